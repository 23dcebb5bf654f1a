"""The plan: tasks run one after another, the steps of a task run concurrently.

Steps inside one task must not depend on each other; a step that needs an earlier result
belongs in a later task and refers to it as ``${step_id}``.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent_py.core import references

# Bounds handed to constrained decoding: without them a small model keeps adding steps or
# text until it runs out of tokens.
MAX_TASKS = 8
MAX_STEPS_PER_TASK = 5
MAX_ID_CHARS = 16
MAX_TEXT_CHARS = 300
MAX_INPUT_CHARS = 400


class Needs(StrEnum):
    """What a plan task needs, as the model declares it: the check of the plan compares it
    with what the task's tools can do (the agent's own tools compute and write; only a
    remote tool can look something up outside the page or act in the world)."""

    COMPUTE = "compute"
    WRITE = "write"
    LOOK_UP = "look_up"
    ACT = "act"


class AnswerKind(StrEnum):
    """What the user's question wants back, as the model declares it with the plan: the
    answer's checks hold the result to it (a bare number does not answer yes or no)."""

    NUMBER = "number"
    YES_NO = "yes_no"
    DATE_TIME = "date_time"
    LIST = "list"
    TEXT = "text"


def _known_or_none(enum: type[StrEnum]) -> Callable[[Any], Any]:
    """A validator: a value of ``enum``, or None for anything else (a model's own word)."""

    def known(value: Any) -> Any:
        try:
            return enum(str(value).strip().lower()) if value is not None else None
        except ValueError:
            return None

    return known


class _Tolerant(BaseModel):
    """Tolerant of what models write: ids as numbers (kept as text), unknown keys (dropped)."""

    model_config = ConfigDict(coerce_numbers_to_str=True, extra="ignore")


class StepSchema(_Tolerant):
    step_id: str = Field(min_length=1)
    step_goal: str
    tool_name: str = Field(min_length=1)
    tool_intent: str = ""
    expected_output: str = ""
    arguments: dict[str, Any] | None = None
    input: str | None = None
    """The tool's main input as one string (the code, the instruction), when the plan shape
    asks for it instead of an arguments object."""
    after: list[str] = Field(default_factory=list, exclude=True)
    """Steps whose results this one works from though its input names none (a step the
    agent added: code that computes from the files a step read); set by the agent, never
    shown to the model."""


class TaskSchema(_Tolerant):
    task_id: str = Field(min_length=1)
    task_goal: str
    needs: Needs | None = None
    """Declared by the model (required by the plan's grammar); None when a plan lacks it."""
    steps: list[StepSchema] = Field(min_length=1)

    _needs = field_validator("needs", mode="before")(_known_or_none(Needs))


class PlanSchema(_Tolerant):
    answer: AnswerKind | None = None
    """What the question wants back, declared by the model; None when a plan lacks it."""
    tasks: list[TaskSchema] = Field(min_length=1)

    _answer = field_validator("answer", mode="before")(_known_or_none(AnswerKind))

    @model_validator(mode="after")
    def _unique_ids(self) -> PlanSchema:
        seen: set[str] = set()
        for step in self.steps():
            if step.step_id in seen:
                raise ValueError(f"step_id {step.step_id!r} is used twice; ids must be unique")
            seen.add(step.step_id)
        return self

    def steps(self) -> list[StepSchema]:
        return [step for task in self.tasks for step in task.steps]


class PlanShape(BaseModel):
    """How large a plan may be under constrained decoding.

    Small models need a tight shape: the reply budget must hold the largest plan the schema
    allows, or a long plan is cut off mid-JSON. ``with_arguments`` lets the plan carry tool
    arguments as an object (one model call saved per step). ``step_input`` asks instead for
    the tool's main input as one bounded string (``input``: the code for
    javascript_execute, the instruction for llm_generator), which a small model writes far
    more reliably than an object; tools with one required string need no arguments call
    then. ``step_notes`` keeps ``tool_intent`` and ``expected_output`` in the schema.
    """

    max_tasks: int = Field(MAX_TASKS, ge=1)
    max_steps_per_task: int = Field(MAX_STEPS_PER_TASK, ge=1)
    max_text_chars: int = Field(MAX_TEXT_CHARS, ge=20)
    with_arguments: bool = True
    step_input: bool = False
    max_input_chars: int = Field(MAX_INPUT_CHARS, ge=20)
    step_notes: bool = True


def plan_json_schema(tool_names: Sequence[str], shape: PlanShape | None = None) -> dict[str, Any]:
    """A flat JSON Schema of the plan for constrained decoding.

    No ``$ref``, no recursion, no ``oneOf``: XGrammar and llama.cpp's converter both handle
    it. ``tool_name`` is limited to the tools that exist.
    """
    shape = shape or PlanShape()
    max_tasks, max_steps_per_task = shape.max_tasks, shape.max_steps_per_task
    if not tool_names:
        raise ValueError("a plan needs at least one tool")
    text = {"type": "string", "maxLength": shape.max_text_chars}
    ident = {"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS}
    # Constrained decoders write properties in this order: the input comes right after the
    # tool it is for.
    step_properties: dict[str, Any] = {
        "step_id": ident,
        "step_goal": text,
        "tool_name": {"type": "string", "enum": list(dict.fromkeys(tool_names))},
    }
    if shape.step_input:
        step_properties["input"] = {"type": "string", "maxLength": shape.max_input_chars}
    if shape.step_notes:
        step_properties["tool_intent"] = text
        step_properties["expected_output"] = text
    if shape.with_arguments and not shape.step_input:
        step_properties["arguments"] = {"type": "object"}
    step = {
        "type": "object",
        "properties": step_properties,
        "required": [name for name in step_properties if name != "arguments"],
        "additionalProperties": False,
    }
    task = {
        "type": "object",
        "properties": {
            "task_id": ident,
            "task_goal": text,
            "needs": {"type": "string", "enum": [need.value for need in Needs]},
            "steps": {
                "type": "array",
                "items": step,
                "minItems": 1,
                "maxItems": max_steps_per_task,
            },
        },
        "required": ["task_id", "task_goal", "needs", "steps"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "answer": {"type": "string", "enum": [kind.value for kind in AnswerKind]},
            "tasks": {"type": "array", "items": task, "minItems": 1, "maxItems": max_tasks},
        },
        "required": ["answer", "tasks"],
        "additionalProperties": False,
    }


def declarations_optional(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (``plan_json_schema``'s) without the model's declarations required: a plan
    a person edited may leave ``answer`` and ``needs`` out."""
    plan = json.loads(json.dumps(schema))
    plan["required"] = [name for name in plan["required"] if name != "answer"]
    task = plan["properties"]["tasks"]["items"]
    task["required"] = [name for name in task["required"] if name != "needs"]
    return dict(plan)


def merge_duplicate_steps(plan: PlanSchema) -> tuple[PlanSchema, dict[str, str]]:
    """Drop steps that repeat an earlier step of the plan (same tool, same input or
    arguments, or the same goal when neither is given); references to a dropped step point
    to the step it repeats. Returns the plan and ``{dropped id: kept id}``.

    Small models often write the same step twice, and every copy costs model calls.
    """
    kept_by_signature: dict[str, str] = {}
    merged: dict[str, str] = {}
    tasks: list[TaskSchema] = []
    for task in plan.tasks:
        steps: list[StepSchema] = []
        for step in task.steps:
            step = _renamed_references(step, merged)
            signature = _step_signature(step)
            kept = kept_by_signature.get(signature)
            if kept is not None:
                merged[step.step_id] = kept
                continue
            kept_by_signature[signature] = step.step_id
            steps.append(step)
        if steps:
            tasks.append(task.model_copy(update={"steps": steps}))
    if not merged:
        return plan, {}
    return plan.model_copy(update={"tasks": tasks}), merged


# A unit of up to 12 characters written four times or more in a row, then at most one more
# unit's worth of text up to the end: how a greedy small model loops until the length bound.
_RUNAWAY = re.compile(r"(.{1,12}?)\1{3,}.{0,12}$", re.DOTALL)


def cut_runaway_inputs(plan: PlanSchema, shape: PlanShape) -> tuple[PlanSchema, dict[str, str]]:
    """Cut the loop off a step's input that ran to its length bound repeating itself
    (``greeting for Maria.js.js.js…`` up to 160 characters): the decoder stopped it at the
    bound, not the model. Returns the plan and ``{step id: the input kept}``.

    Only inputs exactly at the bound are looked at, so a repetition the model ended itself
    (``1000000``, ``'ab'.repeat(4)``) is never touched; an input that would be left empty
    stays as it is."""
    return _with_inputs(plan, lambda step: _without_runaway(step.input, shape.max_input_chars))


def _with_inputs(
    plan: PlanSchema, change: Callable[[StepSchema], str | None]
) -> tuple[PlanSchema, dict[str, str]]:
    """``plan`` with each step's input that ``change`` gives a new one for replaced, and
    ``{step id: new input}``; the same plan when there is none."""
    changed: dict[str, str] = {}
    tasks: list[TaskSchema] = []
    for task in plan.tasks:
        steps: list[StepSchema] = []
        for step in task.steps:
            new = change(step)
            if new is not None:
                changed[step.step_id] = new
                step = step.model_copy(update={"input": new})
            steps.append(step)
        tasks.append(task.model_copy(update={"steps": steps}))
    if not changed:
        return plan, {}
    return plan.model_copy(update={"tasks": tasks}), changed


def _without_runaway(text: str | None, bound: int) -> str | None:
    if text is None or len(text) < bound:
        return None
    loop = _RUNAWAY.search(text)
    if loop is None:
        return None
    kept = text[: loop.start()].rstrip()
    return kept or None


# The shortest run of the request's own text that counts as copied from it, not as words the
# model happened to write the same way.
MIN_COPIED_CHARS = 40
COPY_END_SLACK = 12


def give_copied_text_whole(
    plan: PlanSchema, shape: PlanShape, question: str, takes_code: Callable[[str], bool]
) -> tuple[PlanSchema, dict[str, str]]:
    """Give a step the request's text whole where its input copied that text until the plan's
    length bound stopped it: "summarise this: <a page>" planned as the page's first 160
    characters. Returns the plan and ``{step id: the input given}``.

    The input is looked at only when it is exactly at the bound and ends in a copy of at
    least MIN_COPIED_CHARS of the request's text (spaces aside) that the request goes on
    after. Its copy then runs to the request's end; an input that was nothing but the copy
    becomes the whole request, whose own words say what to do with the text. Steps of tools
    that take code (``takes_code(tool)``) are left alone: text is not code."""

    def whole(step: StepSchema) -> str | None:
        if step.input is None or takes_code(step.tool_name):
            return None
        return _copy_made_whole(step.input, question, shape.max_input_chars)

    return _with_inputs(plan, whole)


def _copy_made_whole(text: str, question: str, bound: int) -> str | None:
    if len(text) < bound:
        return None
    asked, where = _squeezed(question)
    written, _ = _squeezed(text.rstrip())
    # The copy: the longest run of the request's text that the input ends in, give or take
    # its last few characters (the bound falls inside a word, and a word cut there is
    # often finished otherwise: "a bicycle" copied as "a bike").
    for end in range(len(written), max(len(written) - COPY_END_SLACK, MIN_COPIED_CHARS) - 1, -1):
        for start in range(end - MIN_COPIED_CHARS + 1):
            found = asked.find(written[start:end])
            if found < 0:
                continue
            if not asked[found + end - start :].strip():
                return None  # the copy reached the request's end: nothing was cut
            own = written[:start].lstrip()
            return (own + question[where[found] :]).strip() if own.strip() else question.strip()
    return None


def _squeezed(text: str) -> tuple[str, list[int]]:
    """``text`` with each run of white space as one space, and where each of its characters
    stands in ``text``."""
    chars: list[str] = []
    where: list[int] = []
    for index, char in enumerate(text):
        if char.isspace():
            if chars and chars[-1] == " ":
                continue
            char = " "
        chars.append(char)
        where.append(index)
    return "".join(chars), where


def rename_reused_ids(plan: PlanSchema, taken: set[str]) -> tuple[PlanSchema, dict[str, str]]:
    """Give the steps of a new plan whose ids an earlier plan used fresh ids, so
    ``${s1}`` keeps meaning one step. Returns the plan and ``{old id: new id}``.

    A reference to a renamed id from a later task of the new plan means the new step and
    follows the rename; from the same task or an earlier one it can only mean the earlier
    result, and stays."""
    used = taken | {step.step_id for step in plan.steps()}
    renamed: dict[str, str] = {}
    tasks: list[TaskSchema] = []
    for task in plan.tasks:
        steps = [_renamed_references(step, renamed) for step in task.steps]
        for index, step in enumerate(steps):
            if step.step_id in taken:
                fresh = next(f"s{n}" for n in range(1, len(used) + 2) if f"s{n}" not in used)
                used.add(fresh)
                renamed[step.step_id] = fresh
                steps[index] = step.model_copy(update={"step_id": fresh})
        tasks.append(task.model_copy(update={"steps": steps}))
    if not renamed:
        return plan, {}
    return plan.model_copy(update={"tasks": tasks}), renamed


def order_by_references(plan: PlanSchema) -> tuple[PlanSchema, dict[str, str]]:
    """``plan`` with each task whose steps use a result of their own task (``${s1}`` in the
    step after it) split in turns, one task each, so a step runs after the steps it uses:
    a task's steps run together, and a step cannot wait for its neighbour. Returns the plan
    and ``{step id: the task id it now runs in}`` for the steps that moved. The turns keep
    the task's goal and what it needs; a cycle of references is left as planned (the step
    fails saying what it refers to)."""
    tasks: list[TaskSchema] = []
    ordered: dict[str, str] = {}
    task_ids = {task.task_id for task in plan.tasks}
    for task in plan.tasks:
        turns = _turns(task.steps)
        if turns is None or len(turns) == 1:
            tasks.append(task)
            continue
        for number, steps in enumerate(turns):
            task_id = task.task_id
            if number:
                task_id = next(
                    f"{task.task_id}_{n}"
                    for n in itertools.count(number + 1)
                    if f"{task.task_id}_{n}" not in task_ids
                )
                task_ids.add(task_id)
                ordered.update({step.step_id: task_id for step in steps})
            tasks.append(task.model_copy(update={"task_id": task_id, "steps": steps}))
    if not ordered:
        return plan, {}
    return plan.model_copy(update={"tasks": tasks}), ordered


def _turns(steps: list[StepSchema]) -> list[list[StepSchema]] | None:
    """``steps`` in turns: each after every step of its own list it refers to; None for a
    cycle."""
    ids = {step.step_id for step in steps}
    uses = {step.step_id: set(step_sources(step)) & ids for step in steps}
    turn_of: dict[str, int] = {}
    while len(turn_of) < len(steps):
        ready = [
            step_id
            for step_id, used in uses.items()
            if step_id not in turn_of and used <= turn_of.keys()
        ]
        if not ready:
            return None
        for step_id in ready:
            turn_of[step_id] = 1 + max((turn_of[u] for u in uses[step_id]), default=-1)
    turns: list[list[StepSchema]] = [[] for _ in range(max(turn_of.values()) + 1)]
    for step in steps:
        turns[turn_of[step.step_id]].append(step)
    return turns


def step_references(step: StepSchema) -> list[str]:
    """The ``${step_id}`` references in a step's planned arguments and input, in order."""
    return references.find([step.arguments, step.input])


def step_sources(step: StepSchema) -> list[str]:
    """The steps whose results ``step`` works from: those it refers to, then its ``after``;
    it runs after them, and a failed one fails it."""
    named = step_references(step)
    return [*named, *(source for source in step.after if source not in named)]


def _step_signature(step: StepSchema) -> str:
    what: Any
    if step.arguments is not None:
        what = step.arguments
    elif step.input is not None and step.input.strip():
        what = " ".join(step.input.split())
    else:
        what = " ".join(step.step_goal.lower().split())
    return json.dumps([step.tool_name, what], sort_keys=True, default=str)


def _renamed_references(step: StepSchema, renamed: dict[str, str]) -> StepSchema:
    if not renamed:
        return step
    return step.model_copy(
        update={
            "arguments": references.rename(step.arguments, renamed),
            "input": references.rename(step.input, renamed),
            "after": [renamed.get(source, source) for source in step.after],
        }
    )
