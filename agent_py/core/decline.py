"""``decline``: how a plan says that no tool here can do the task.

A plan step that names this tool ends the run failed with the step's reason, before anything
runs: a task that needs the internet, live data, the user's files or an action in the world
(booking, buying, sending) has no honest answer here, and a model that plans code for it
fabricates one (a booking "confirmed" by a returned object, a price it made up). A plan task
whose goal is such an action, reads a file or a web page, or asks for live data, but whose
steps only use the agent's own tools ends the run the same way, and so does a plan of only
those tools for such a request (``action_no_tool_takes``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
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


# Verbs of actions in the world, as a plan's goal or the user's request opens with them ("Send
# an email", "Book a table"): none of this agent's own tools (the writer, the code sandboxes) can
# take one. Not verbs that also name work done here: "call" (a function), "order" (sort),
# "remove". Verbs of reaching a person count only with the person ("Text my sister", "Email
# them"): "Text message for Ann" and "Call the function" are work done here. Not "tell", whose
# person is as often a story's ("Tell his story in one sentence").
_WORLD_ACTION = re.compile(
    r"(?:(?:send(?!\s+(?:me|us)\b)|book|reserve|buy|purchase|pay|post|publish|schedule"
    r"|transfer|tweet|subscribe|submit)\s"
    r"|(?:text|message|e-?mail|call|phone|ring|dm|notify|remind|invite|contact)\s+"
    r"(?:my|our|his|her|him|them|everyone|everybody)\b)",
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

# Live data ("What's the weather in Oslo right now?", "today's price of gold"): a word of the
# present moment and a quantity that changes out there, in one clause that gives no number of
# its own ("The current price is $80; what do I pay with 25% off?" holds its data). The code
# sandboxes have no network, and what the writer or the code says of it is made up. Not bare
# "now" ("What's the price now, after 25% off?") nor the date or the time, which code can read.
_NOW = (
    r"(?:right\s+now|currently|current|today'?s?|tonight|at\s+the\s+moment|at\s+present"
    r"|latest|live|real[- ]time|up[- ]to[- ]date)"
)
_CHANGING = (
    r"(?:weather|forecasts?|temperatures?|rain(?:ing)?|snow(?:ing)?|sunny|windy"
    r"|prices?|costs?|worth|exchange\s+rates?|rates?"
    r"|stocks?|shares?|news|headlines?|scores?|traffic)"
)
_LIVE_DATA = re.compile(
    rf"\b(?:{_NOW}\b[^.;?!\n]{{0,40}}\b{_CHANGING}|{_CHANGING}\b[^.;?!\n]{{0,40}}\b{_NOW})\b",
    re.IGNORECASE,
)
_CLAUSE = re.compile(r"[^.;?!\n]+")
# What a request holds rather than asks: quoted text, and what follows a colon ("Summarise:
# The latest news from the meeting …").
_HELD = re.compile(r"(?<!\w)'[^']*'(?!\w)|\"[^\"]*\"|“[^”]*”|:\s.*", re.DOTALL)
# A text to write may speak of today's weather: nothing in it claims to be looked up.
_COMPOSE = re.compile(
    r"(?:write|draft|compose|create|invent|imagine|make\s+up|pretend)\b", re.IGNORECASE
)


def _asks_live_data(text: str) -> bool:
    if _COMPOSE.match(text):
        return False
    asked = _HELD.sub(" ", text)
    return any(
        _LIVE_DATA.search(clause) and not re.search(r"\d", clause)
        for clause in _CLAUSE.findall(asked)
    )


def action_no_tool_takes(
    tasks: Sequence[TaskSchema], own_tool: Callable[[str], bool], question: str
) -> str | None:
    """Why a plan of ``tasks`` cannot be done here, or None. A task whose steps all use this
    agent's own tools (``own_tool``: the writer, the code sandboxes, which only write text or
    compute) while its goal, or a step's goal or input, is an action in the world ("Send an
    email to Bob"), reads a file or a web page ("Read the file /etc/hostname") or asks for
    live data ("Get the weather in Oslo right now"); or a plan of only those tools for a user's
    ``question`` that is one of these. A remote tool might do any of them. A small model plans
    the writer for "send" or "read", and the email it writes would be reported as sent, the
    file's text it makes up as read, a price it makes up as today's."""
    own = [task for task in tasks if all(own_tool(step.tool_name) for step in task.steps)]
    if not own:
        return None
    goals = [text for task in own for text in (task.task_goal, *(s.step_goal for s in task.steps))]
    inputs = [s.input for task in own for s in task.steps if isinstance(s.input, str)]
    # The request speaks for the whole plan: only when no step has a tool that might do it.
    asked = [question] if len(own) == len(tasks) else []
    texts = [" ".join(text.split()) for text in [*asked, *goals, *inputs]]
    goals = [" ".join(text.split()) for text in [*asked, *goals]]
    action = next((t for t in texts if _WORLD_ACTION.match(t + " ")), None)
    reach = next((t for t in texts if _REACH_OUT.match(t)), None)
    live = next((t for t in goals if _asks_live_data(t)), None)
    if action is not None:
        what = f"'{action}' is an action in the world, and no tool here can take it"
    elif reach is not None:
        what = f"'{reach}' needs a file or a web page, and no tool here can read one"
    elif live is not None:
        what = f"'{live}' needs live data, and no tool here can look it up"
    else:
        return None
    names = ", ".join(dict.fromkeys(step.tool_name for task in own for step in task.steps))
    return declined_because(f"{what} (the plan's {names} only writes text or computes)")
