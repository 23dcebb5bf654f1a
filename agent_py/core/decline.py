"""``decline``: how a plan says that no tool here can do the task.

A plan step that names this tool ends the run failed with the step's reason, before anything
runs: a task that needs the internet, live data, the user's files or an action in the world
(booking, buying, sending) has no honest answer here, and a model that plans code for it
fabricates one (a booking "confirmed" by a returned object, a price it made up). A plan task
that the model declared as a look-up or an action, but whose steps only use the agent's own
tools, ends the run the same way (``checks.needs_a_tool``).
"""

from __future__ import annotations

from typing import Any

from agent_py.core.errors import RunFailure
from agent_py.core.tool import ToolBase, ToolContext, ToolResult

DECLINE_TOOL = "decline"


class TaskDeclined(RunFailure):
    """A plan declined the task; the message says why, for the user."""


class Decline(ToolBase):
    name = DECLINE_TOOL
    description = (
        "Says that the task cannot be done here, and why. Use it when the task needs what no "
        "other tool has: the internet or live data (prices, weather, news, web pages), files "
        "or apps on this computer, or an action in the world (booking, buying, sending an "
        "email or a message). Give the reason in 'reason'."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "reason": {
                "type": "string",
                "minLength": 1,
                "description": "why no tool here can do the task",
            }
        },
        "required": ["reason"],
        "additionalProperties": False,
    }

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise TaskDeclined(declined_because(str(arguments.get("reason") or "")))


def declined_because(reason: str) -> str:
    reason = " ".join(reason.split()).rstrip(".")
    return f"the task cannot be done here: {reason or 'no tool can do it'}"
