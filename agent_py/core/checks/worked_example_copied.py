"""A step whose input is a worked example's (``prompts/examples.json``), word for word, or whose
task or step goal is a worked example's task, for another task: a small model that cannot map
a task to a tool copies the example closest to hand (a two-line poem about rain for "download
this page"), and the result would be reported as the answer. A decline's reason may be copied:
it ends the run failed anyway. Only where the examples are shown (``Strategy.examples``)."""

from __future__ import annotations

from agent_py.core.checks.base import Check, Seen, Stage
from agent_py.core.decline import DECLINE_TOOL
from agent_py.core.prompts import examples
from agent_py.core.tool import main_input_property


def _words(text: str) -> str:
    return " ".join(text.casefold().split())


def example_copied(value: str, question: str) -> str | None:
    """The task of the worked example whose step input ``value`` is, word for word, when
    that task is not ``question``; else None."""
    copied = _words(value)
    for example in examples()["plan"]:
        for task in example["tasks"]:
            for step in task["steps"]:
                if (
                    step["tool_name"] != DECLINE_TOOL
                    and _words(str(step.get("input", ""))) == copied
                    and _words(example["task"]) != _words(question)
                ):
                    return str(example["task"])
    return None


def example_task_copied(goal: str, question: str) -> str | None:
    """The task of the worked example whose text ``goal`` (a plan's task or step goal) is,
    word for word, when that task is not ``question``; else None."""
    copied = _words(goal).rstrip(".")
    for example in examples()["plan"]:
        task = str(example["task"])
        if _words(task).rstrip(".") == copied and _words(task) != _words(question):
            return task
    return None


def run(seen: Seen) -> str | None:
    tool, arguments = seen.tool, seen.arguments
    if tool is None or arguments is None:
        return None
    main = main_input_property(tool.input_schema)
    value = arguments.get(main) if main is not None else None
    copied = "input"
    example = example_copied(value, seen.question) if isinstance(value, str) else None
    for goal in (seen.meta.get("task_goal", ""), seen.meta.get("step_goal", "")):
        if example is None:
            copied, example = "task", example_task_copied(goal, seen.question)
    if example is None:
        return None
    return (
        f"{tool.name} was not run: its {copied} is copied from the worked example for "
        f"'{example}', not written for this task; write it for the task, or decline the task "
        "when no tool can do it"
    )


CHECK = Check(
    name="worked_example_copied",
    stage=Stage.CALL,
    catches="a step's input or goal copied from a worked example of the prompt",
    run=run,
    switch="examples",
)
