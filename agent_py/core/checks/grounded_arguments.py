"""A remote tool's call whose values come from nowhere: none of them stands in the task, the
conversation or an earlier result. A model that picked a tool that does not fit its task
invents the values (``add(30.603752, -121.388927)`` to delete a record), and the invented
call's result would be reported as done.

What a task implies counts as given: a value that shares a word or a number with the sources
(``Asia/Kolkata`` for "in Kolkata", ``2026-12-01T09:30`` for "at 09:30", a URL built from the
task's words), and a value written in another script than everything it could be compared
with (``Asia/Shanghai`` for a question in Chinese). Numbers are compared by value, in digits,
which are the same in every language."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

from agent_py.core.answer_checks import text_values
from agent_py.core.checks.base import Check, Seen, Stage

MIN_TOKEN_CHARS = 3
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def number_values(text: str) -> set[float]:
    """The numbers written in ``text`` in digits, each read as it may be meant: "1,200" as
    1200 and 1.2, "09" as 9, and a CSV row's "1004,63.10" as its two cells too."""
    values: set[float] = set()
    for match in _NUMBER.finditer(text):
        written = match.group()
        cells = written.split(",") if "," in written else []
        for reading in {written.replace(",", ""), written.replace(",", "."), *cells}:
            try:
                values.add(float(reading))
            except ValueError:
                continue
    return values


def _scripts(text: str) -> set[str]:
    """The writing systems of ``text``'s letters (Latin, CJK, Cyrillic, …)."""
    found = set()
    for char in text:
        if char.isalpha():
            name = unicodedata.name(char, "")
            script = name.split(" ", 1)[0]
            found.add("CJK" if script in ("HIRAGANA", "KATAKANA", "CJK") else script)
    return found


def arguments_from_nowhere(arguments: Mapping[str, Any], sources: Iterable[str]) -> list[str]:
    """The values of ``arguments`` when none of them stands in ``sources`` (the task, the
    conversation, earlier results), else an empty list."""
    values = [value.strip() for value in text_values(arguments) if value.strip()]
    text = "\n".join(sources)
    folded = text.casefold()
    numbers = number_values(text)
    tokens = {t for t in _TOKEN.findall(folded) if len(t) >= MIN_TOKEN_CHARS or t.isdigit()}
    scripts = _scripts(text)

    def grounded(value: str) -> bool:
        written = value.casefold()
        if _NUMBER.fullmatch(value.lstrip("-+")):
            return bool(number_values(value) & numbers)
        if written in folded:
            return True
        own = [t for t in _TOKEN.findall(written) if len(t) >= MIN_TOKEN_CHARS]
        if any(t in tokens for t in own if not t.isdigit()):
            return True
        if any(float(d) in numbers for d in re.findall(r"\d+", value)):
            return True
        letters = _scripts(value)
        return bool(letters) and not letters & scripts

    if any(grounded(value) for value in values):
        return []
    return [value if _NUMBER.fullmatch(value.lstrip("-+")) else repr(value) for value in values]


def run(seen: Seen) -> str | None:
    if seen.tool is None or seen.arguments is None or not seen.tool.remote:
        return None
    sources = [seen.question, *seen.asked, *(r.content for r in seen.results)]
    invented = arguments_from_nowhere(seen.arguments, sources)
    if not invented:
        return None
    goal = seen.meta.get("step_goal", "")
    name = seen.tool.name
    return (
        f"{name} was not called: its values ({', '.join(invented)}) come from neither the "
        f"task nor an earlier result, so {name} does not fit '{goal}'; use a tool that "
        "does, or decline the task"
    )


CHECK = Check(
    name="grounded_arguments",
    stage=Stage.CALL,
    catches="a remote tool's call none of whose values the task, the conversation or a "
    "result holds",
    run=run,
    switch="grounded_arguments",
)
