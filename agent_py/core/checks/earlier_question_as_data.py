"""A follow-up's code whose data is an earlier task's own words: for "Now use Python to reverse
that text." after "Use JavaScript to convert the word 'agent' to upper case.", the code
reversed the earlier task's words. A follow-up's "that" is the last result, never the user's
earlier instruction. Compared word for word, apart from case and punctuation."""

from __future__ import annotations

import re
from collections.abc import Iterable

from agent_py.core.checks.base import Check, Seen, Stage
from agent_py.core.checks.code_literals import string_literals

_WORD = re.compile(r"\w+", re.UNICODE)
QUESTION_MIN_WORDS = 3  # a literal this long or longer that is a whole question


def _words_only(text: str) -> str:
    return "".join(_WORD.findall(text.casefold()))


def question_as_data(code: str, questions: Iterable[str]) -> str | None:
    """The first of ``questions`` (a conversation's earlier tasks) that a string literal of
    ``code`` is, word for word apart from case and punctuation, when it has at least
    ``QUESTION_MIN_WORDS`` words; else None."""
    asked = {_words_only(q): q for q in questions if len(_WORD.findall(q)) >= QUESTION_MIN_WORDS}
    for value in string_literals(code):
        question = asked.get(_words_only(value))
        if question is not None:
            return question
    return None


def run(seen: Seen) -> str | None:
    tool, arguments = seen.tool, seen.arguments
    if tool is None or tool.code_language is None or arguments is None:
        return None
    asked = question_as_data(str(arguments.get("code", "")), seen.asked)
    if asked is None:
        return None
    return (
        f"{tool.name} was not run: the code takes the words of an earlier task ({asked!r}) as "
        "its data; in a follow-up, 'that' is the last result"
    )


CHECK = Check(
    name="earlier_question_as_data",
    stage=Stage.CALL,
    catches="a follow-up's code whose string literal is an earlier task, word for word",
    run=run,
)
