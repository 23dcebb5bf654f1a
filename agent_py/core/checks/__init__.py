"""The checks that can refuse a plan, a tool call or a run's answer: one module a check.

Every check reads structure only: the plan's declarations, a tool's input schema, code,
JSON, numbers and tool results, never the words of a natural language (the user writes in
any language, and the model's prose is the model's). Each module defines one :class:`Check`:
its name, the stage it looks at, what it catches, the :class:`Strategy` switch that turns it
on (None: every profile), and ``run(seen)``, which gives the reason it refuses (told to the
user and, where a plan can still be corrected, to the model) or None. ``CHECKS`` is the
table; docs/agent.md shows it.
"""

from __future__ import annotations

from typing import Any

from agent_py.core.checks import (
    answer_kind,
    caught_failure,
    computed_dropped,
    data_cut_short,
    description_as_value,
    earlier_question_as_data,
    example_values,
    grounded_arguments,
    made_up_numbers,
    milliseconds,
    months_from_one,
    needs_a_tool,
    worked_example_copied,
)
from agent_py.core.checks.base import Check, Seen, Stage

__all__ = ["CHECKS", "Check", "Seen", "Stage", "checks_at", "first_refusal"]

CHECKS: tuple[Check, ...] = (
    needs_a_tool.CHECK,
    description_as_value.CHECK,
    grounded_arguments.CHECK,
    example_values.CHECK,
    data_cut_short.CHECK,
    earlier_question_as_data.CHECK,
    months_from_one.CHECK,
    worked_example_copied.CHECK,
    milliseconds.CHECK,
    caught_failure.CHECK,
    answer_kind.CHECK,
    made_up_numbers.CHECK,
    computed_dropped.CHECK,
)


def checks_at(stage: Stage, strategy: Any) -> list[Check]:
    """The checks of ``stage`` that ``strategy`` (a Strategy) turns on, in table order."""
    return [
        check
        for check in CHECKS
        if check.stage is stage and (check.switch is None or getattr(strategy, check.switch))
    ]


def first_refusal(stage: Stage, strategy: Any, seen: Seen) -> str | None:
    """The reason of the first check of ``stage`` that refuses ``seen``, or None."""
    for check in checks_at(stage, strategy):
        reason = check.run(seen)
        if reason is not None:
            return reason
    return None
