"""Code "corrected" after a failure by catching the error and giving it back as text: the
corrected code has a ``catch`` (JavaScript) or ``except`` (Python) clause, and what it gave is
text naming an error class of the language (``ReferenceError: require is not defined``) or
text with no digit in it ("File does not exist."). It computes nothing; handed over, the
failure would read as the answer. Read from the code and its result, never their words."""

from __future__ import annotations

import re

from agent_py.core.checks.base import Check, Seen, Stage

_CATCHES = {"JavaScript": re.compile(r"\bcatch\b"), "Python": re.compile(r"\bexcept\b")}
_ERROR_CLASS = re.compile(r"\b[A-Z]?[A-Za-z]*(?:Error|Exception)\b")
_DIGIT = re.compile(r"\d")


def run(seen: Seen) -> str | None:
    tool, arguments = seen.tool, seen.arguments
    if not seen.meta.get("repaired") or tool is None or arguments is None or not seen.results:
        return None
    catches = _CATCHES.get(tool.code_language or "")
    result = seen.results[-1]
    if catches is None or result.is_error or not catches.search(str(arguments.get("code", ""))):
        return None
    if result.data is not None and not isinstance(result.data, str):
        return None  # a number, a list, an object: something was computed
    text = result.reference_text().strip()
    if not (_ERROR_CLASS.search(text) or not _DIGIT.search(text)):
        return None
    return (
        f"{seen.meta.get('error', 'the code failed')} (the corrected code only caught the "
        f"failure and gave it back: {text[:120]!r})"
    )


CHECK = Check(
    name="caught_failure",
    stage=Stage.RESULT,
    catches="corrected code that catches its error and gives back text instead of a result",
    run=run,
    switch="code_repair",
)
