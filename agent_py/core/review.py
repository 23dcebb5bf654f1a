"""Plan review: the run pauses after planning, and the user approves, edits or cancels the plan.

Whether a plan is shown is the ``review`` policy (:data:`ReviewPolicy`): ``off``, ``remote``
(plans that call a tool of a remote server: an MCP tool may act on the world) or ``always``.
The :class:`PlanReviewer` is the user's side (the page's review panel); the planner checks what
comes back: an edited plan meets the same JSON Schema as the model's and names only tools
that exist, its arguments meet each tool's schema, and no step refers to a deleted one. A
plan that does not is offered again with the reason. Every review is an event (``plan_reviewed``)
with what changed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ValidationError

from agent_py.core.errors import PlanCancelled
from agent_py.core.events import EventType
from agent_py.core.history import EventRecorder
from agent_py.core.plan import PlanSchema
from agent_py.core.registry import ToolRegistry
from agent_py.core.tool_schema import validate_arguments

ReviewPolicy = Literal["off", "remote", "always"]


class ReviewAnswer(BaseModel):
    """The user's answer: approve (the plan as proposed, or ``plan``, edited) or cancel.
    ``auto``: approved by a rule ("always allow" these tools), without being shown."""

    action: Literal["approve", "cancel"]
    plan: dict[str, Any] | None = None
    auto: bool = False


class PlanReviewer(Protocol):
    async def review(self, plan: PlanSchema, *, question: str, problem: str | None) -> ReviewAnswer:
        """Show ``plan`` (``problem``: why the user's last edit was refused) and wait."""
        ...


def needs_review(plan: PlanSchema, registry: ToolRegistry, policy: ReviewPolicy) -> bool:
    if policy == "always":
        return True
    if policy == "off":
        return False
    return bool(remote_tools(plan, registry))


def remote_tools(plan: PlanSchema, registry: ToolRegistry) -> list[str]:
    """The remote servers' tools the plan calls, in order."""
    names: list[str] = []
    for step in plan.steps():
        tool = registry.get(step.tool_name)
        if tool is not None and tool.remote and step.tool_name not in names:
            names.append(step.tool_name)
    return names


def checked_edit(
    edited: Mapping[str, Any], schema: Mapping[str, Any], registry: ToolRegistry
) -> PlanSchema:
    """The user's plan, held to what a model's plan must meet; ValueError says what not."""
    problem = validate_arguments(schema, dict(edited))
    if problem is not None:
        raise ValueError(f"the plan does not fit its format: {problem}")
    try:
        plan = PlanSchema.model_validate(edited)
    except ValidationError as error:
        raise ValueError(f"the plan does not fit its format: {error.errors()[0]['msg']}") from None
    ids = [step.step_id for step in plan.steps()]
    for step in plan.steps():
        tool = registry.get(step.tool_name)
        if tool is None:
            raise ValueError(f"step {step.step_id} names an unknown tool {step.tool_name!r}")
        if step.arguments is not None:
            problem = validate_arguments(tool.input_schema, step.arguments)
            if problem is not None:
                raise ValueError(f"the arguments of step {step.step_id} are wrong: {problem}")
        text = f"{step.arguments or ''} {step.input or ''}"
        for ref in re.findall(r"\$\{([A-Za-z0-9_.-]+)\}", text):
            if ref.split(".")[0] not in ids:
                raise ValueError(f"step {step.step_id} refers to ${{{ref}}}, which no step gives")
    return plan


def plan_changes(before: PlanSchema, after: PlanSchema) -> list[str]:
    """What the user changed, step by step, in words."""
    old = {step.step_id: step for step in before.steps()}
    new = {step.step_id: step for step in after.steps()}
    changes = [f"deleted {step_id}" for step_id in old if step_id not in new]
    changes += [f"added {step_id}" for step_id in new if step_id not in old]
    for step_id, step in new.items():
        was = old.get(step_id)
        if was is None:
            continue
        for field in ("step_goal", "tool_name", "arguments", "input"):
            if getattr(step, field) != getattr(was, field):
                changes.append(f"{step_id}: {field.replace('_', ' ')} changed")
    return changes


async def reviewed(
    plan: PlanSchema,
    question: str,
    *,
    reviewer: PlanReviewer | None,
    policy: ReviewPolicy,
    registry: ToolRegistry,
    schema: Mapping[str, Any],
    recorder: EventRecorder,
    on_reviewing: Callable[[], None],
) -> PlanSchema:
    """The plan as the user approved it, when the review policy shows it (else as it is);
    raises PlanCancelled when the user cancels it. An edit that breaks the plan's rules
    is offered again with the reason."""
    if reviewer is None or not needs_review(plan, registry, policy):
        return plan
    on_reviewing()
    problem: str | None = None
    while True:
        answer = await reviewer.review(plan, question=question, problem=problem)
        if answer.action == "cancel":
            recorder.emit(EventType.PLAN_REVIEWED, "cancelled", action="cancel")
            raise PlanCancelled("you cancelled the plan at its review: nothing ran")
        if answer.plan is None:
            allowed = remote_tools(plan, registry)
            how = f"approved (always allowed: {', '.join(allowed)})" if answer.auto else "approved"
            recorder.emit(EventType.PLAN_REVIEWED, how, action="approve", auto=answer.auto)
            return plan
        try:
            edited = checked_edit(answer.plan, schema, registry)
        except ValueError as error:
            problem = str(error)
            continue
        changes = plan_changes(plan, edited)
        recorder.emit(
            EventType.PLAN_REVIEWED,
            "edited: " + ("; ".join(changes) or "no change"),
            action="edit",
            changes=changes,
            plan=edited.model_dump(exclude_none=True),
        )
        return edited
