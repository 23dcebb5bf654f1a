"""An answer to a number question that gives none of the numbers the run's code computed last.
The plan's last step was code and it printed 0 for a column that is not there; the answer
writer then took another number from a file the run read ("The total of the discount column
is 63.10", an order's amount). What code computed is the run's result: an answer that drops
all of it for some other number reports what nothing computed. Digits only, so this holds in
any language; answers declared as anything but a number are not checked."""

from __future__ import annotations

from agent_py.core.checks.base import Check, Seen, Stage
from agent_py.core.checks.grounded_arguments import number_values
from agent_py.core.checks.made_up_numbers import made_up
from agent_py.core.plan import AnswerKind


def run(seen: Seen) -> str | None:
    computed = seen.computed
    if seen.answer is None or seen.kind is not AnswerKind.NUMBER or computed is None:
        return None
    result = computed.reference_text()
    if not number_values(result):
        return None  # code that gave text (a name, a date): nothing to hold the answer to
    given = made_up(seen.answer, [seen.question, *seen.asked])
    if not given:
        return None  # the answer's numbers are all the task's own
    if len(made_up(seen.answer, [seen.question, *seen.asked, result])) < len(given):
        return None  # at least one of them is what the code computed
    return (
        f"the answer gives {', '.join(given)}, and the run's code computed "
        f"{result.strip()[:120]!r}: the answer is not what was computed"
    )


CHECK = Check(
    name="computed_dropped",
    stage=Stage.ANSWER,
    catches="a number answer holding none of the numbers the run's last code step computed",
    run=run,
)
