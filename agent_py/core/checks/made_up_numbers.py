"""A number in the answer that nothing gave: not the task, not the conversation, not a result
of code or of a remote tool. The writer (the model) stood in for data it did not have ("The
price of the product is $100" after a fetch failed) or did arithmetic in prose; digits are
the same in every language, so this holds whatever the user writes. Answers the plan
declared as text may hold numbers of their own (a poem, a story) where a task of the plan
writes, or the plan says nothing of what its tasks need; a text answer to a plan that only
looks up or computes is checked (seen: "together they cost €1.25" for a menu that says 4.50
and 2.80). In an answer declared a date or time, a month's or a 12-hour clock's number is the
data's own form."""

from __future__ import annotations

import math
import re

from agent_py.core.checks.base import Check, Seen, Stage
from agent_py.core.checks.grounded_arguments import number_values
from agent_py.core.plan import AnswerKind, Needs, PlanSchema

# A number standing alone: not part of a Latin-letter name ("mp3", "s1", "H2O"), not a list
# item's marker at the start of a line ("1. Athens").
_NUMBER = re.compile(r"(?<![A-Za-z\d.,])\d+(?:[.,]\d+)*(?![A-Za-z\d]|[.,]\d)")
_LIST_MARKER = re.compile(r"^\s*\d+[.)]\s", re.MULTILINE)
SMALL = {0.0, 1.0}  # "one of them", "0 left": prose, never data worth inventing
# In a date or a time of day, 1 to 12 are a month ("27 December" written 12月27日) or an hour
# of a 12-hour clock (14:00 as 2 PM): the same data, in the form the user's language writes.
CALENDAR = {float(n) for n in range(1, 13)}


def _readings(written: str) -> set[tuple[float, int]]:
    """The values ``written`` may mean, each with its decimals: "1,200" is 1200 (0) or 1.2
    (1); "34.90" is 34.9 (2)."""
    readings = set()
    for reading in {written.replace(",", ""), written.replace(",", ".")}:
        try:
            value = float(reading)
        except ValueError:
            continue
        decimals = len(reading.split(".", 1)[1]) if "." in reading else 0
        readings.add((value, decimals))
    return readings


def _held(value: float, decimals: int, known: set[float]) -> bool:
    """Whether ``known`` holds ``value``, a source rounded to the answer's decimals too
    (3.5999999999999996 given as 3.6)."""
    return any(
        math.isclose(value, source, rel_tol=1e-9, abs_tol=1e-9) or round(source, decimals) == value
        for source in known
    )


def made_up(answer: str, sources: list[str], also: frozenset[float] = frozenset()) -> list[str]:
    """The numbers of ``answer`` that no text of ``sources`` holds (nor ``also``), in order."""
    known = set().union(also, *(number_values(text) for text in sources))
    text = _LIST_MARKER.sub(" ", answer)
    invented = []
    for match in _NUMBER.finditer(text):
        readings = _readings(match.group())
        if any(value in SMALL for value, _ in readings):
            continue
        if not readings and any(match.group() in source for source in sources):
            continue  # no one number (an address, 127.0.0.1; a version, 2.4.1): as written
        if not any(_held(value, decimals, known) for value, decimals in readings):
            invented.append(match.group())
    return list(dict.fromkeys(invented))


def _writes(plan: PlanSchema | None) -> bool:
    """Whether a plan's answer may hold numbers of its own: a task of it writes, or it does
    not say what its tasks need."""
    return plan is None or any(task.needs in (Needs.WRITE, None) for task in plan.tasks)


def run(seen: Seen) -> str | None:
    if seen.answer is None or (seen.kind is AnswerKind.TEXT and _writes(seen.plan)):
        return None
    sources = [seen.question, *seen.asked, *(r.reference_text() for r in seen.results)]
    sources += [r.content for r in seen.results]
    also = frozenset(CALENDAR) if seen.kind is AnswerKind.DATE_TIME else frozenset()
    invented = made_up(seen.answer, sources, also)
    if not invented:
        return None
    return (
        f"the answer gives {', '.join(invented)}, which no tool result, the task or an "
        "earlier turn holds, and no code computed: it is made up"
    )


CHECK = Check(
    name="made_up_numbers",
    stage=Stage.ANSWER,
    catches="a number in the answer that neither the task, the conversation nor a code or "
    "remote tool result holds",
    run=run,
)
