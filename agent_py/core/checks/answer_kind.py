"""An answer of the wrong type for what the question wants back, as the plan declared it
(``PlanSchema.answer``): a bare number for a yes-or-no question ("1" for "is 97 prime?" says
neither), or a number question answered with no number at all (``true`` for a count)."""

from __future__ import annotations

import re

from agent_py.core.answer_checks import WEB_ADDRESS
from agent_py.core.checks.base import Check, Seen, Stage
from agent_py.core.plan import AnswerKind

_BARE_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_DIGIT = re.compile(r"\d")


def wrong_kind(answer: str, kind: AnswerKind | None) -> str | None:
    """Why ``answer`` is not of ``kind``, or None."""
    text = answer.strip()
    if kind is AnswerKind.YES_NO and _BARE_NUMBER.fullmatch(text):
        return f"the answer {text} says neither yes nor no to a yes-or-no question"
    # The digits of a web address are its name, not a number the answer gives ("the club
    # sandwich on the menu at http://127.0.0.1:8000/menu.html").
    if kind is AnswerKind.NUMBER and text and not _DIGIT.search(WEB_ADDRESS.sub(" ", text)):
        return f"the question asks for a number, and the answer {text[:80]!r} has none"
    return None


def run(seen: Seen) -> str | None:
    return wrong_kind(seen.answer or "", seen.kind)


CHECK = Check(
    name="answer_kind",
    stage=Stage.ANSWER,
    catches="a bare number for a yes-or-no question, or no number for a number question",
    run=run,
)
