"""The plan: tasks run one after another, the steps of a task run concurrently.

Steps inside one task must not depend on each other; a step that needs an earlier result
belongs in a later task and refers to it as ``${step_id}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Bounds handed to constrained decoding: without them a small model keeps adding steps or
# text until it runs out of tokens.
MAX_TASKS = 8
MAX_STEPS_PER_TASK = 5
MAX_ID_CHARS = 16
MAX_TEXT_CHARS = 300


class _Strict(BaseModel):
    # Models write ids as numbers now and then; accept them as text.
    model_config = ConfigDict(coerce_numbers_to_str=True, extra="ignore")


class StepSchema(_Strict):
    step_id: str = Field(min_length=1)
    step_goal: str
    tool_name: str = Field(min_length=1)
    tool_intent: str = ""
    expected_output: str = ""
    arguments: dict[str, Any] | None = None


class TaskSchema(_Strict):
    task_id: str = Field(min_length=1)
    task_goal: str
    steps: list[StepSchema] = Field(min_length=1)


class PlanSchema(_Strict):
    tasks: list[TaskSchema] = Field(min_length=1)

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
    arguments (one model call saved per step); small models write better arguments in a step
    of their own, under the tool's schema.
    """

    max_tasks: int = Field(MAX_TASKS, ge=1)
    max_steps_per_task: int = Field(MAX_STEPS_PER_TASK, ge=1)
    max_text_chars: int = Field(MAX_TEXT_CHARS, ge=20)
    with_arguments: bool = True


def plan_json_schema(tool_names: Sequence[str], shape: PlanShape | None = None) -> dict[str, Any]:
    """A flat JSON Schema of the plan for constrained decoding.

    No ``$ref``, no recursion, no ``oneOf``: XGrammar and llama.cpp's converter both handle
    it. ``tool_name`` is limited to the tools that exist.
    """
    shape = shape or PlanShape()
    max_tasks, max_steps_per_task = shape.max_tasks, shape.max_steps_per_task
    max_text_chars, with_arguments = shape.max_text_chars, shape.with_arguments
    if not tool_names:
        raise ValueError("a plan needs at least one tool")
    text = {"type": "string", "maxLength": max_text_chars}
    ident = {"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS}
    step_properties: dict[str, Any] = {
        "step_id": ident,
        "step_goal": text,
        "tool_name": {"type": "string", "enum": list(dict.fromkeys(tool_names))},
        "tool_intent": text,
        "expected_output": text,
    }
    if with_arguments:
        step_properties["arguments"] = {"type": "object"}
    step = {
        "type": "object",
        "properties": step_properties,
        "required": ["step_id", "step_goal", "tool_name", "tool_intent", "expected_output"],
        "additionalProperties": False,
    }
    task = {
        "type": "object",
        "properties": {
            "task_id": ident,
            "task_goal": text,
            "steps": {
                "type": "array",
                "items": step,
                "minItems": 1,
                "maxItems": max_steps_per_task,
            },
        },
        "required": ["task_id", "task_goal", "steps"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "tasks": {"type": "array", "items": task, "minItems": 1, "maxItems": max_tasks}
        },
        "required": ["tasks"],
        "additionalProperties": False,
    }
