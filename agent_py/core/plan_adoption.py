"""What happens to a plan the model (or the user) gave before it runs: a declining step ends
the run; inputs that looped to their length bound are cut; inputs that copied the request
up to that bound get it whole; repeated steps are merged (when the strategy says so); step
ids an earlier plan used are renamed. Each change is an event."""

from __future__ import annotations

from collections.abc import Callable

from agent_py.core.checks import Seen, Stage, first_refusal
from agent_py.core.decline import DECLINE_TOOL, TaskDeclined, declined_because
from agent_py.core.events import EventType
from agent_py.core.execution import CallMemory
from agent_py.core.history import EventRecorder
from agent_py.core.plan import (
    PlanSchema,
    PlanShape,
    cut_runaway_inputs,
    give_copied_text_whole,
    merge_duplicate_steps,
    rename_reused_ids,
)


def adopt(
    plan: PlanSchema,
    plans: list[PlanSchema],
    memory: CallMemory,
    question: str,
    *,
    plan_shape: PlanShape,
    merge_duplicates: bool,
    takes_code: Callable[[str], bool],
    own_tool: Callable[[str], bool],
    recorder: EventRecorder,
) -> PlanSchema:
    """``plan`` as it will run, added to the run's ``plans`` (which it follows); raises
    TaskDeclined when a step declines the task, or a check of the plan stage refuses it (a
    task that needs a look-up or an action, planned with only the agent's own tools,
    ``own_tool``)."""
    declined = decline_reason(plan, own_tool, question)
    if declined is not None:
        plans.append(plan)
        raise TaskDeclined(declined)
    plan, cut = cut_runaway_inputs(plan, plan_shape)
    if cut:
        recorder.emit(
            EventType.PLAN_CUT,
            "cut inputs that looped to their length bound: "
            + "; ".join(f"{step} keeps {kept!r}" for step, kept in cut.items()),
            cut=cut,
        )
    plan, given = give_copied_text_whole(plan, plan_shape, question, takes_code)
    if given:
        recorder.emit(
            EventType.PLAN_TEXT_WHOLE,
            f"gave the request's text whole to steps whose input copied it up to the "
            f"{plan_shape.max_input_chars}-character bound: {', '.join(given)}",
            given=given,
        )
    if merge_duplicates:
        plan, merged = merge_duplicate_steps(plan)
        if merged:
            recorder.emit(
                EventType.PLAN_MERGED,
                "merged repeated steps: "
                + ", ".join(f"{dropped} into {kept}" for dropped, kept in merged.items()),
                merged=merged,
            )
    taken = {step.step_id for earlier in plans for step in earlier.steps()}
    plan, renamed = rename_reused_ids(plan, taken)
    if renamed:
        recorder.emit(
            EventType.PLAN_RENAMED,
            "new plan reuses step ids: "
            + ", ".join(f"{old} is now {new}" for old, new in renamed.items()),
            renamed=renamed,
        )
    if plans:
        memory.replanned()
    plans.append(plan)
    return plan


def decline_reason(plan: PlanSchema, own_tool: Callable[[str], bool], question: str) -> str | None:
    """Why the run ends before it starts: a step of ``plan`` declines the task, or a check of
    the plan stage (``checks``) finds that no tool here can do a task of it."""
    for step in plan.steps():
        if step.tool_name == DECLINE_TOOL:
            reason = step.input if step.input is not None else (step.arguments or {}).get("reason")
            return declined_because(str(reason or step.step_goal))
    refused = first_refusal(Stage.PLAN, None, Seen(question=question, plan=plan, own_tool=own_tool))
    return declined_because(refused) if refused is not None else None
