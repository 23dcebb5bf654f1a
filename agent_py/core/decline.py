"""``decline``: how a plan says that no tool here can do the task.

A plan step that names this tool ends the run failed with the step's reason, before anything
runs: a task that needs the internet, live data, the user's files or an action in the world
(booking, buying, sending) has no honest answer here, and a model that plans code for it
fabricates one (a booking "confirmed" by a returned object, a price it made up). A plan task
whose goal is such an action, or reads a file or a web page, but whose steps only use the
agent's own tools ends the run the same way (``action_no_tool_takes``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from agent_py.core.errors import RunFailure
from agent_py.core.plan import TaskSchema
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


# Verbs of actions in the world, as a plan's goal opens with them ("Send an email", "Book a
# table"): none of this agent's own tools (the writer, the code sandboxes) can take one. Not
# verbs that also name work done here: "call" (a function), "order" (sort), "remove".
_WORLD_ACTION = re.compile(
    r"(?:send(?!\s+(?:me|us)\b)|book|reserve|buy|purchase|pay|post|publish|schedule|transfer"
    r"|tweet|subscribe|submit)\s",
    re.IGNORECASE,
)


# Reading something outside ("Read the file /etc/hostname", "Download the page
# https://example.com", "open ~/notes.txt"): a verb of reading, then a file, a page, a URL or a
# file path. The writer has none of them, and the code sandboxes have no files and no network.
# Not a page or file the task holds itself ("Read the page below: …").
_REACH_OUT = re.compile(
    r"(?:read|open|download|fetch|visit|browse|scrape|crawl|load)\s+"
    r"(?:(?:the|this|that|my|a|an|your)\s+)?"
    r"(?:(?:web\s*)?page|file|website|site|url|link|https?://|www\.|~?/\w|[A-Za-z]:\\)"
    r"(?![^.:\n]{0,40}\b(?:below|above|following|pasted|attached|here)\b)",
    re.IGNORECASE,
)


def action_no_tool_takes(
    task: TaskSchema, own_tool: Callable[[str], bool], question: str
) -> str | None:
    """Why ``task`` cannot be done here, or None: its goal, or a step's goal or input, is an
    action in the world ("Send an email to Bob"), or it or the user's ``question`` reads a
    file or a web page ("Read the file /etc/hostname"), and every step's tool is one of this
    agent's own (``own_tool``: the writer, the code sandboxes), which only write text or
    compute; a remote tool might do it. A small model plans the writer for "send" or "read",
    and the email it writes would be reported as sent, the file's text it makes up as read."""
    if not all(own_tool(step.tool_name) for step in task.steps):
        return None
    texts = [task.task_goal, *(step.step_goal for step in task.steps)]
    texts += [step.input for step in task.steps if isinstance(step.input, str)]
    texts = [" ".join(text.split()) for text in texts]
    action = next((t for t in texts if _WORLD_ACTION.match(t + " ")), None)
    asked = " ".join(question.split())
    reach = next((t for t in [asked, *texts] if _REACH_OUT.match(t)), None)
    if action is None and reach is None:
        return None
    names = ", ".join(dict.fromkeys(step.tool_name for step in task.steps))
    what = (
        f"'{action}' is an action in the world, and no tool here can take it"
        if action is not None
        else f"'{reach}' needs a file or a web page, and no tool here can read one"
    )
    return declined_because(f"{what} (the plan's {names} only writes text or computes)")
