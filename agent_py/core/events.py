"""Events: what the agent reports while it works, and the lines of its JSONL history.

One shape serves both purposes, so the UI, the terminal and the history file all read the
same records: ``{ts, session, turn, step, type, content, meta}``.
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class AgentState(StrEnum):
    IDLE = "idle"
    PLANNING = "planning"
    REVIEWING = "reviewing"  # the plan waits for the user's review
    EXECUTING = "executing"
    REFLECTING = "reflecting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINAL_STATES = frozenset({AgentState.COMPLETED, AgentState.FAILED, AgentState.CANCELLED})


class FailureCause(StrEnum):
    """Why a failed turn failed, for whoever scores or retries it: the task's own outcome, or
    the machinery under it."""

    TASK = "task"  # the run did not do the task: steps failed, the model refused, a limit
    ENGINE = "engine"  # the model engine failed (load, storage, crash): nothing was judged
    INTERNAL = "internal"  # a bug of ours


class EventType(StrEnum):
    # Session and turn framing of the JSONL history.
    SESSION_START = "session_start"
    TURN_START = "turn_start"
    TURN_END = "turn_end"
    SESSION_END = "session_end"
    # The conversation itself.
    ASSISTANT = "assistant"  # a model reply, <think> removed
    THINKING = "thinking"  # the <think> text of a reply
    ACTION = "action"  # a tool is about to run with these arguments
    OBSERVATION = "observation"  # what the tool returned (possibly cut)
    FINAL = "final"  # the answer, or why there is none; always emitted once per turn
    # Plan progress.
    STATE = "state"
    PLAN_STARTED = "plan_started"
    PLAN_REVIEWED = "plan_reviewed"  # the user's review: meta.action, meta.changes, meta.plan
    PLAN_MERGED = "plan_merged"  # repeated steps of a plan were merged (meta.merged)
    PLAN_CUT = "plan_cut"  # looping step inputs were cut (meta.cut: {step id: input kept})
    # step inputs that copied the request's text up to their bound were given it whole
    # (meta.given: {step id: the input given})
    PLAN_TEXT_WHOLE = "plan_text_whole"
    PLAN_RENAMED = "plan_renamed"  # a new plan's reused step ids were renamed (meta.renamed)
    # steps of a task declared "compute" that the writer was to do go to a code tool
    # (meta.moved: {step id: the code tool})
    PLAN_TO_CODE = "plan_to_code"
    # a step that reads the page at the task's web address, added first to a plan that reads
    # none (meta.added: {step id: the tool})
    PLAN_TO_READ = "plan_to_read"
    # steps that use a result of their own task run in a task after it (meta.ordered: {step
    # id: the task it runs in})
    PLAN_ORDERED = "plan_ordered"
    STEP_STARTED = "step_started"
    STEP_THINKING = "step_thinking"  # the step asks the model for its arguments
    STEP_PROGRESS = "step_progress"
    STEP_COMPLETED = "step_completed"
    STEP_FAILED = "step_failed"
    REFLECTION = "reflection"
    PLAN_COMPLETED = "plan_completed"
    # Model residency and usage.
    MODEL = "model"


class Event(BaseModel):
    """One record. ``meta`` holds the structured details of each type (see docs/api.md)."""

    model_config = ConfigDict(frozen=True)

    ts: float = Field(default_factory=time.time)
    session: str
    turn: int = 0
    step: str | None = None
    type: EventType
    content: str = ""
    meta: dict[str, Any] = Field(default_factory=dict)

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, line: str) -> Event:
        return cls.model_validate_json(line)
