"""A computed answer checked by a second computation (Strategy.compute_twice).

A small model that writes a word problem's code in the plan often writes it wrong (hours
subtracted where minutes were asked, a rate applied twice), and a wrong number handed over as
the answer is the worst outcome. Before the last task's result becomes the answer, its step is
computed once more, from a code call that frames the step afresh (the step's goal and the
task, code in a block of its own rather than a line inside the plan's JSON): two different
draws that reach the same number (or the same yes or no, a boolean) are the answer; where
they differ, a third draw decides,
and where it agrees with neither the step fails with the numbers, and the corrected plan (or
the run's failure) follows, so that none is reported as done. Numbers are compared as
numbers, in any language: nothing here reads words.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from agent_py.core.checks.code_literals import without_string_literals
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
from agent_py.core.plan import TaskSchema
from agent_py.core.tool import ToolResult

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?", re.IGNORECASE)
# An operation of code: an arithmetic operator between operands, or a call.
_OPERATION = re.compile(r"(?<=[\w)\]\s])\s*(?:\*\*|[-+*/%])\s*(?=[\w(.\[])|\w\s*\(")
_KEYWORD_CALL = re.compile(r"\b(?:return|if|for|while|switch|print|function)\s*\(")


def operations(code: str) -> int:
    """How many operations ``code`` does, about: arithmetic operators and calls, outside its
    string literals (``return 6 * 7;`` does one; a word problem's code does several)."""
    own = _KEYWORD_CALL.sub(" ", without_string_literals(code))
    return len(_OPERATION.findall(own))


def lone_number(text: str) -> float | None:
    """The number ``text`` is, where it is one and nothing else (``42``, ``-3.5``, ``1e3``,
    quoted or not), else None."""
    text = text.strip().strip("\"'")
    if not _NUMBER.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


_BOOLEAN = {"true": True, "false": False}


def lone_value(text: str) -> float | bool | None:
    """The number or the boolean (``true``, ``False``) ``text`` is, where it is one and
    nothing else, else None."""
    boolean = _BOOLEAN.get(text.strip().strip("\"'").lower())
    return boolean if boolean is not None else lone_number(text)


def same_value(a: float | bool, b: float | bool) -> bool:
    """Equal as computed values: booleans as booleans, numbers as :func:`same_number`."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return same_number(a, b)


def same_number(a: float, b: float) -> bool:
    """Equal as computed numbers: a float's last digits (0.1 + 0.2) and a rounding to cents
    of the same value agree; different values do not."""
    rounded = a == round(a, 2) or b == round(b, 2)
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) or (
        rounded and abs(a - b) <= 0.005 + 1e-9
    )


@dataclass(frozen=True)
class Agreement:
    """How computing the last step again went: the outcomes to go on with, and whether two
    computations disagreed (a corrected plan's number is then computed again however few
    operations its code does)."""

    outcomes: list[StepOutcome]
    disagreed: bool = False


async def computed_twice(
    executor: StepExecutor,
    recorder: EventRecorder,
    outcomes: list[StepOutcome],
    task: TaskSchema,
    question: str,
    earlier: list[StepOutcome],
    step_ids: frozenset[str],
    follow_up: FollowUp = NOT_A_FOLLOW_UP,
    *,
    third_temperature: float | None = None,
    always: bool = False,
) -> Agreement:
    """The last task's ``outcomes``; where it is one successful step whose code came from the
    plan, does more than one operation (or ``always``) and gives a number, or gives a boolean
    however short its code, that step is run
    again with its code from a code call (one operation, ``6 * 7``, is what the plan's checks
    already read). The same number: the first outcome stands. Another number: a third code
    call, sampled at ``third_temperature``, decides; a number it shares with one of the two is
    the answer, and without one the step fails, naming them. A run that fails or gives no
    number says nothing against the others."""
    if len(outcomes) != 1:
        return Agreement(outcomes)
    first = outcomes[0]
    if not first.ok or not executor.code_from_plan(first):
        return Agreement(outcomes)
    value = lone_value(first.result.reference_text())
    code = "\n".join(str(v) for v in (first.arguments or {}).values())
    # A yes or no is computed again however short its code: ``221 % 1 === 0`` is one
    # operation and no test of a prime.
    if value is None or (operations(code) < 2 and not always and not isinstance(value, bool)):
        return Agreement(outcomes)

    def note(text: str) -> None:
        recorder.emit(
            EventType.REFLECTION,
            text,
            task=task.task_id,
            status=RethinkStatus.CONTINUE.value,
            skipped=True,
        )

    note(
        f"step {first.step.step_id} computed {_shown(first)}: computing it once more, from "
        "code written afresh, before it is the answer"
    )

    async def again(temperature: float | None) -> tuple[StepOutcome, float | bool | None]:
        # A fresh memory: the same call once more is the point here, not a repeated re-plan.
        outcome = await executor.run(
            first.step,
            task,
            question,
            earlier,
            CallMemory(),
            step_ids,
            code_call=True,
            follow_up=follow_up,
            code_temperature=temperature,
        )
        return outcome, lone_value(outcome.result.reference_text()) if outcome.ok else None

    second, other = await again(None)
    if other is None or same_value(value, other):
        return Agreement(outcomes)
    note(
        f"the plan's code gave {_shown(first)}, code written afresh {_shown(second)}: a third "
        "computation decides"
    )
    third, decider = await again(third_temperature)
    if decider is not None and same_value(decider, value):
        return Agreement(outcomes, disagreed=True)
    if decider is not None and same_value(decider, other):
        return Agreement([second], disagreed=True)
    thirdly = f", a third {_shown(third)}" if decider is not None else ""
    why = (
        f"computations of this step disagree: the plan's code gave {_shown(first)}, code "
        f"written afresh for the same step gave {_shown(second)}{thirdly}; at most one of "
        "them is right"
    )
    recorder.emit(
        EventType.STEP_FAILED,
        why,
        step=first.step.step_id,
        task=task.task_id,
        tool=first.step.tool_name,
        disagree=[n for n in (value, other, decider) if n is not None],
    )
    return Agreement([replace(first, result=ToolResult(why, is_error=True))], disagreed=True)


def _shown(outcome: StepOutcome) -> str:
    return outcome.result.reference_text().strip()
