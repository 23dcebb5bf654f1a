"""A plan task that needs to look something up or to act, planned with the agent's own tools
only: the writer and the code sandboxes have no network, no files and no hands, so what they
would give is made up (a booking "confirmed", a price, a page's text). The model declares
what each task needs in the plan (``TaskSchema.needs``); this compares it with the tools."""

from __future__ import annotations

from agent_py.core.checks.base import Check, Seen, Stage
from agent_py.core.plan import Needs

_WHAT = {
    Needs.LOOK_UP: "data from outside this page (a page, a file, live data, a server's records)",
    Needs.ACT: "an action outside this page",
}


def run(seen: Seen) -> str | None:
    if seen.plan is None:
        return None
    for task in seen.plan.tasks:
        if task.needs not in _WHAT or not all(seen.own_tool(s.tool_name) for s in task.steps):
            continue
        names = ", ".join(dict.fromkeys(step.tool_name for step in task.steps))
        return (
            f"task '{task.task_goal}' needs {_WHAT[task.needs]}, and no tool here can do that "
            f"(the plan's {names} only writes text or computes)"
        )
    return None


CHECK = Check(
    name="needs_a_tool",
    stage=Stage.PLAN,
    catches="a task declared look_up or act whose steps only use the writer or the sandboxes",
    run=run,
)
