"""The interface every check meets: what it sees (Seen), where it looks (Stage), and the
Check record the table in ``agent_py.core.checks`` lists."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from agent_py.core.plan import AnswerKind, PlanSchema
from agent_py.core.tool import ToolBase, ToolResult


class Stage(StrEnum):
    PLAN = "plan"  # a plan, before anything of it runs
    CALL = "call"  # a tool call, before the tool runs
    RESULT = "result"  # a tool's result, before a later step or the answer uses it
    ANSWER = "answer"  # the run's answer, before the user gets it


@dataclass(frozen=True)
class Seen:
    """What a check may look at; a stage fills what it has."""

    question: str
    asked: tuple[str, ...] = ()
    """The conversation's earlier questions and answers, oldest first."""
    plan: PlanSchema | None = None
    own_tool: Callable[[str], bool] = lambda name: False
    """Whether a tool is one of the agent's own (not a remote server's)."""
    reads_data: Callable[[str], bool] = lambda name: False
    """Whether a tool reads the user's data (a file of theirs, a page): it can look up."""
    tool: ToolBase | None = None
    arguments: Mapping[str, Any] | None = None
    results: tuple[ToolResult, ...] = ()
    """Results of the steps that worked; at the answer stage only those of tools that do not
    ask the model (code and remote tools): data, where the writer's text is the model's own."""
    answer: str | None = None
    computed: ToolResult | None = None
    """At the answer stage, the result of the plan's last step when that step is code that
    ran: what the run computed last."""
    kind: AnswerKind | None = None
    """What the question wants back, as the plan declared it."""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    name: str
    stage: Stage
    catches: str
    run: Callable[[Seen], str | None]
    switch: str | None = None
    """The Strategy field that turns the check on; None: on in every profile."""
