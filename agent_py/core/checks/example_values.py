"""Code that copies a value of the tool description's example (``new Date('2024-01-31')`` for
the weather in Oslo): a small model with nothing of the task to compute copies the example
whole, and its result would be reported as the answer. Values with a digit only: values
without one ('en-US', 'long') are how the description teaches an API."""

from __future__ import annotations

import re
from collections.abc import Iterable

from agent_py.core.checks.base import Check, Seen, Stage

# A quoted value with a digit in it, as code writes one: '2024-01-31', "3 apples".
_QUOTED_DATA = re.compile(r"""'([^'\n]*\d[^'\n]*)'|"([^"\n]*\d[^"\n]*)"|`([^`\n]*\d[^`\n]*)`""")


def example_data_copied(code: str, description: str, sources: Iterable[str]) -> list[str]:
    """The quoted values of ``code`` that hold a digit and stand in the tool's
    ``description`` (its examples) but in none of ``sources`` (the task, the conversation,
    earlier results)."""
    text = "\n".join(sources).casefold()
    copied = []
    for match in _QUOTED_DATA.finditer(code):
        value = next(part for part in match.groups() if part is not None)
        if value in description and value.casefold() not in text:
            copied.append(value)
    return list(dict.fromkeys(copied))


def run(seen: Seen) -> str | None:
    tool, arguments = seen.tool, seen.arguments
    if tool is None or tool.code_language is None or arguments is None:
        return None
    code = arguments.get("code")
    if not isinstance(code, str):
        return None
    sources = [seen.question, *(r.content for r in seen.results)]
    copied = example_data_copied(code, tool.description, sources)
    if not copied:
        return None
    values = ", ".join(f"'{value}'" for value in copied)
    return (
        f"{tool.name} was not run: the code uses {values} from the example in the tool's "
        "description, not a value of the task; write code for the task's own values, or "
        "decline the task when no tool can do it"
    )


CHECK = Check(
    name="example_values",
    stage=Stage.CALL,
    catches="code that uses a value with a digit from the tool description's example",
    run=run,
)
