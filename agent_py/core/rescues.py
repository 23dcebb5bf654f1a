"""What the loop does for a model that is often wrong (the small profiles' strategy): a
last step whose result would be the answer is failed when no call was given the task's
data, and code the plan wrote that failed is written again in a call of its own."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from agent_py.core.agreement import lone_number
from agent_py.core.answer_checks import data_left_out, text_values
from agent_py.core.checks.answer_kind import wrong_kind
from agent_py.core.concurrency import run_together
from agent_py.core.events import EventType
from agent_py.core.execution import (
    NOT_A_FOLLOW_UP,
    CallMemory,
    FollowUp,
    StepExecutor,
    StepOutcome,
)
from agent_py.core.history import EventRecorder
from agent_py.core.parsing import RethinkStatus
from agent_py.core.plan import AnswerKind, StepSchema, TaskSchema, step_sources
from agent_py.core.registry import ToolRegistry
from agent_py.core.tool import ToolResult


def founded(
    question: str,
    earlier: list[StepOutcome],
    outcomes: list[StepOutcome],
    task: TaskSchema,
    recorder: EventRecorder,
) -> list[StepOutcome]:
    """The last task's ``outcomes``, its one step failed when its result would be handed to
    the user as it is (Strategy.answer_from_single_step) but no call of the run was given
    some of the question's data: that result is about something else."""
    answer = single_step_answer(outcomes)
    if answer is None:
        return outcomes
    calls = [o.arguments for o in [*earlier, *outcomes] if o.ok and o.arguments is not None]
    missing = data_left_out(question, calls)
    if not missing:
        return outcomes
    why = (
        f"its result {_shown(answer)} cannot answer the task: no step was given "
        f"{_listed(missing)} from the task"
    )
    return [_failed_after_all(outcomes[0], why, task, recorder, left_out=missing)]


def says_yes_or_no(
    kind: AnswerKind | None,
    outcomes: list[StepOutcome],
    task: TaskSchema,
    recorder: EventRecorder,
) -> list[StepOutcome]:
    """The last task's ``outcomes``, its one step failed when its result would be handed to
    the user as it is (Strategy.answer_from_single_step) but is a bare number where the plan
    declared a yes-or-no answer (``checks.answer_kind``): code that returns 1 for "is it
    prime?" answers neither, and a corrected plan can return true or false."""
    answer = single_step_answer(outcomes)
    if answer is None or kind is not AnswerKind.YES_NO or wrong_kind(answer, kind) is None:
        return outcomes
    why = (
        f"its result {_shown(answer)} says neither yes nor no, and the task asks a yes-or-no "
        "question: return true or false"
    )
    return [_failed_after_all(outcomes[0], why, task, recorder)]


def changes_the_last_result(
    follow_up: FollowUp, outcomes: list[StepOutcome], task: TaskSchema, recorder: EventRecorder
) -> list[StepOutcome]:
    """The last task's ``outcomes``, its one step failed when its result would be handed to
    the user as it is (Strategy.answer_from_single_step) but, in a follow-up, is the last
    turn's result unchanged: the follow-up asks for something done with that result ("Now
    reverse that text"), and a step that gives it back did the earlier task again."""
    answer = single_step_answer(outcomes)
    last = follow_up.last_result
    if answer is None or last is None:
        return outcomes
    if "".join(answer.split()) != "".join(last.reference_text().split()):
        return outcomes
    why = (
        f"its result {_shown(answer)} is the last result unchanged, and the task asks for "
        "something done with it"
    )
    return [_failed_after_all(outcomes[0], why, task, recorder)]


def chained(
    earlier: list[StepOutcome],
    outcomes: list[StepOutcome],
    plan_steps: frozenset[str],
    task: TaskSchema,
    recorder: EventRecorder,
) -> list[StepOutcome]:
    """The last task's ``outcomes``, its one step failed when its result would be handed to
    the user as it is (Strategy.answer_from_single_step) but an earlier step of the same plan
    (``plan_steps``) found something that no step after it used: the answer leaves that
    work out (the capital found, then the letters of the country's name counted instead).

    A step uses an earlier result when it refers to it (``${s1}``) or its arguments hold
    the result's text, ignoring case (code that wrote the value in). An empty result (``[]``)
    left out counts too: the chain is broken all the same (a dedupe that kept nothing, then
    the list sorted again with its duplicates)."""
    answer = single_step_answer(outcomes)
    if answer is None:
        return outcomes
    after = [*earlier, *outcomes]
    unused = [
        o
        for index, o in enumerate(earlier)
        if o.ok and o.step.step_id in plan_steps and not _used(o, after[index + 1 :])
    ]
    if not unused:
        return outcomes
    found = ", ".join(
        f"{o.step.step_id} found {_shown(o.result.reference_text().strip(), 40)}" for o in unused
    )
    refs = ", ".join(f"${{{o.step.step_id}}}" for o in unused)
    why = (
        f"its result {_shown(answer)} leaves out what the earlier steps found ({found}): no "
        f"step after them used it; use it as {refs} where the task needs it"
    )
    unused_ids = [o.step.step_id for o in unused]
    return [_failed_after_all(outcomes[0], why, task, recorder, unused=unused_ids)]


def _failed_after_all(
    outcome: StepOutcome, why: str, task: TaskSchema, recorder: EventRecorder, **meta: Any
) -> StepOutcome:
    """``outcome``, reported done, now failed with ``why``; the failure is reported too."""
    recorder.emit(
        EventType.STEP_FAILED,
        why,
        step=outcome.step.step_id,
        task=task.task_id,
        tool=outcome.step.tool_name,
        seconds=round(outcome.seconds, 4),
        thought=outcome.thought,
        **meta,
    )
    return replace(outcome, result=ToolResult(why, is_error=True))


def _used(outcome: StepOutcome, later: list[StepOutcome]) -> bool:
    """Whether a step of ``later`` refers to ``outcome`` or was given its result's text
    (compared without case or whitespace: code writes [1,3] for [1, 3])."""
    text = _squeezed(outcome.result.reference_text())
    for other in later:
        if outcome.step.step_id in step_sources(other.step):
            return True
        given = "\n".join(text_values(other.arguments)) if other.arguments is not None else ""
        if text and text in _squeezed(given):
            return True
    return False


def _squeezed(text: str) -> str:
    return "".join(text.split()).casefold()


async def code_written_again(
    executor: StepExecutor,
    recorder: EventRecorder,
    outcomes: list[StepOutcome],
    task: TaskSchema,
    question: str,
    earlier: list[StepOutcome],
    memory: CallMemory,
    step_ids: frozenset[str],
    follow_up: FollowUp = NOT_A_FOLLOW_UP,
) -> list[StepOutcome]:
    """The task's outcomes, with each failed step whose code came from the plan run
    once more with its code from a code call (Strategy.code_call_after_failure), on the
    code tool that opens the user's files when they are here (:func:`afresh`)."""
    again = [o for o in outcomes if not o.ok and executor.code_from_plan(o)]
    if not again:
        return outcomes
    recorder.emit(
        EventType.REFLECTION,
        "code from the plan failed: writing it again in a separate call: "
        + ", ".join(o.step.step_id for o in again),
        task=task.task_id,
        status=RethinkStatus.CONTINUE.value,
        skipped=True,
    )
    redone = await run_together(
        [
            executor.run(
                afresh(executor.registry, o.step),
                task,
                question,
                earlier,
                memory,
                step_ids,
                code_call=True,
                follow_up=follow_up,
                failed_before=o.result.content,
            )
            for o in again
        ]
    )
    by_id = {o.step.step_id: o for o in redone}
    return [by_id.get(o.step.step_id, o) for o in outcomes]


def afresh(registry: ToolRegistry, step: StepSchema) -> StepSchema:
    """``step`` as a code call writes its code afresh: on the code tool that writes code on
    the user's files when they are here and the step's code tool is another one (fresh code
    on the files is Python, see Planner._files_tool_for), else as it is."""
    tool = registry.get(step.tool_name)
    files_code = registry.files_code
    if tool is None or tool.code_language is None or files_code in (None, step.tool_name):
        return step
    return step.model_copy(update={"tool_name": files_code, "input": None, "arguments": None})


def single_step_answer(outcomes: list[StepOutcome]) -> str | None:
    """The result of the last task as the answer, when that task was one successful step."""
    if len(outcomes) != 1 or not outcomes[0].ok:
        return None
    return outcomes[0].result.reference_text().strip() or None


MATERIAL_CHARS = 300
"""A remote tool's result longer than this (a page, a listing) is material to read, not an
answer to hand over as it is."""


def _material(answer: str) -> bool:
    """Whether a remote tool's result is material for the answer call to read rather than
    the answer: longer than MATERIAL_CHARS, or text of several lines that is no JSON (a
    short page's text, "Contents of …: | Item | Price |", handed over for "what does my
    order cost?", and in English for a question in Chinese). JSON (a time zone's record)
    and a one-line value are handed over."""
    if len(answer) > MATERIAL_CHARS:
        return True
    if "\n" not in answer:
        return False
    try:
        json.loads(answer)
    except ValueError:
        return True
    return False


def handed_over(
    outcomes: list[StepOutcome], kind: AnswerKind | None, *, remote: bool
) -> str | None:
    """The last task's one result as the answer (Strategy.answer_from_single_step), or None
    where the answer call must read it first: a result that is no lone number where the plan
    declared a number (a page's text for "what does it cost?"), or a remote tool's result
    that is material to read (:func:`_material`: a fetched page handed over is no answer)."""
    answer = single_step_answer(outcomes)
    if answer is None:
        return None
    if kind is AnswerKind.NUMBER and lone_number(answer) is None:
        return None
    if remote and _material(answer):
        return None
    return answer


def describe_failures(failed: list[StepOutcome], limit: int = 200) -> str:
    return "; ".join(
        f"{o.step.step_id} ({o.step.tool_name}): {o.result.content[:limit]}" for o in failed
    )


def _shown(answer: str, limit: int = 80) -> str:
    return answer if len(answer) <= limit else answer[:limit] + "..."


def _listed(items: list[str], limit: int = 5) -> str:
    """The first ``limit`` items (a pasted text may hold hundreds of numbers), and how many more."""
    shown = ", ".join(_shown(item, 40) for item in items[:limit])
    return shown if len(items) <= limit else f"{shown} and {len(items) - limit} more"
