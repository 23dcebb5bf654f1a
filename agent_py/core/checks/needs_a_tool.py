"""A plan task that needs to look something up or to act, planned with the agent's own tools
only: the writer and the code sandboxes have no network, no files and no hands, so what they
would give is made up (a booking "confirmed", a price, a page's text). A tool that reads the
user's data (``ToolBase.reads_data``: a file of theirs) can look up, but not act; a look-up
task whose steps work on what an earlier step looked up (``${s1}`` of a read) is no
invention either. The model declares
what each task needs in the plan (``TaskSchema.needs``); this compares it with the tools."""

from __future__ import annotations

from agent_py.core.checks.base import Check, Seen, Stage
from agent_py.core.plan import Needs, TaskSchema, step_references

_WHAT = {
    Needs.LOOK_UP: "data from outside this page (a page, a file, live data, a server's records)",
    Needs.ACT: "an action outside this page",
}


def unsupplied(seen: Seen) -> list[TaskSchema]:
    """The plan's tasks declared to look up or act whose steps only use the agent's own tools
    that cannot: not reading the user's data, nor working on what an earlier step read."""
    if seen.plan is None:
        return []
    # The steps that can look something up: a remote tool's, or one that reads the user's data.
    looking = {
        s.step_id
        for s in seen.plan.steps()
        if not seen.own_tool(s.tool_name) or seen.reads_data(s.tool_name)
    }
    tasks = []
    for task in seen.plan.tasks:
        if task.needs not in _WHAT or not all(seen.own_tool(s.tool_name) for s in task.steps):
            continue
        if task.needs is Needs.LOOK_UP and any(
            s.step_id in looking or looking.intersection(step_references(s)) for s in task.steps
        ):
            continue  # it looks up here, or works on what an earlier step looked up
        tasks.append(task)
    return tasks


def run(seen: Seen) -> str | None:
    for task in unsupplied(seen):
        assert task.needs is not None  # unsupplied tasks declared what they need
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
