"""JavaScript that works with Dates and gives back a whole number of hours of at least a day
in milliseconds: one Date minus another is milliseconds, and a model asked for the days
between two dates returns 5184000000 for 60. Read from the code and its result only."""

from __future__ import annotations

import re
from typing import Any

from agent_py.core.checks.base import Check, Seen, Stage

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
_PRINTED_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def days_in_milliseconds(code: str, value: Any) -> float | None:
    """The days that ``value`` counts when JavaScript ``code`` that works with Dates gave
    back a whole number of hours, of at least a day, in milliseconds; else None."""
    if isinstance(value, str) and _PRINTED_NUMBER.fullmatch(value.strip()):
        value = float(value)  # printed with console.log, not returned
    if isinstance(value, bool) or not isinstance(value, (int, float)) or "Date" not in code:
        return None
    if abs(value) < DAY_MS or value % HOUR_MS:
        return None
    return value / DAY_MS


def run(seen: Seen) -> str | None:
    tool, arguments = seen.tool, seen.arguments
    if tool is None or tool.code_language != "JavaScript" or arguments is None:
        return None
    result = seen.results[-1] if seen.results else None
    if result is None or result.is_error:
        return None
    days = days_in_milliseconds(str(arguments.get("code", "")), result.data)
    if days is None:
        return None
    return (
        f"the result {days * DAY_MS:g} is milliseconds (one Date minus another is in "
        f"milliseconds), that is {days:g} days: divide by 86400000 for days, or by 3600000 "
        "for hours"
    )


CHECK = Check(
    name="milliseconds",
    stage=Stage.RESULT,
    catches="a JavaScript Date difference given back in milliseconds, a whole number of hours",
    run=run,
)
