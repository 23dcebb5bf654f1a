"""JavaScript Dates that count the task's months from 1: ``new Date(2025, 3, 3)`` for the
task's 2025-03-03 is April 3, since JavaScript counts months from 0, and every day count from
it is a month off. The task's dates are read in digits only (2025-03-03, 2025/03/03,
2025.03.03), the same in every language. A task that writes its dates in words ("March 3,
2025", "3 mars 2025") cannot be compared with the code: there, a Date built from numbers is
refused too, for the date as text (``new Date('2025-03-03')``), whose month counts from 1 as
people count it."""

from __future__ import annotations

import re

from agent_py.core.checks.base import Check, Seen, Stage

_DIGIT_DATE = re.compile(r"(?<!\d)(\d{4})([-/.])(\d{1,2})\2(\d{1,2})(?!\d)")
_JS_DATE = re.compile(r"(new\s+Date|Date\.UTC)\(\s*(\d{4})\s*,\s*(\d{1,2})\s*,\s*(\d{1,2})\s*[,)]")


def question_dates(question: str) -> set[tuple[int, int, int]]:
    """The dates ``question`` writes in digits, as (year, month from 1, day)."""
    dates = {(int(m[1]), int(m[3]), int(m[4])) for m in _DIGIT_DATE.finditer(question)}
    return {d for d in dates if 1 <= d[1] <= 12 and 1 <= d[2] <= 31}


def months_counted_from_one(code: str, question: str) -> list[tuple[str, str]]:
    """The Dates of JavaScript ``code`` written with a month counted from 1, each with the
    month it means, as pairs of the Date as the code wrote it and as it should be."""
    asked = question_dates(question)
    found = []
    for m in _JS_DATE.finditer(code):
        year, month, day = int(m.group(2)), int(m.group(3)), int(m.group(4))
        if (year, month, day) in asked and (year, month + 1, day) not in asked:
            call = m.group(1)
            found.append((f"{call}({year}, {month}, {day})", f"{call}({year}, {month - 1}, {day})"))
    return found


def dates_from_numbers(code: str, question: str) -> list[str]:
    """The Dates of ``code`` built from numbers (year, month from 0, day) when ``question``
    writes no date in digits to compare them with."""
    if question_dates(question):
        return []
    return [
        f"{m.group(1)}({m.group(2)}, {m.group(3)}, {m.group(4)})" for m in _JS_DATE.finditer(code)
    ]


def run(seen: Seen) -> str | None:
    tool, arguments = seen.tool, seen.arguments
    if tool is None or tool.code_language != "JavaScript" or arguments is None:
        return None
    code = str(arguments.get("code", ""))
    built = dates_from_numbers(code, seen.question)
    if built:
        return (
            f"{tool.name} was not run: {', '.join(built)} counts its month from 0 (January "
            "is 0), so a date the task gives in words is easily a month off: write each date "
            "as text, new Date('YYYY-MM-DD'), with the month counted from 1"
        )
    wrong = months_counted_from_one(code, seen.question)
    if not wrong:
        return None
    return (
        f"{tool.name} was not run: {', '.join(w for w, _ in wrong)} is a month after the "
        "task's date, since JavaScript counts months from 0 (January is 0): write "
        f"{', '.join(r for _, r in wrong)}"
    )


CHECK = Check(
    name="months_from_one",
    stage=Stage.CALL,
    catches="a JavaScript Date whose month is the task's month number, counted from 1",
    run=run,
)
