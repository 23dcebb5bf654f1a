"""Code that uses a piece of a text the task quotes instead of the whole of it: for "reverse
the string 'stressed'" the code reversed 'ressed', and the result was handed over. Quotes and
string literals are structure, the same in every language; a piece the task quotes on its own
("does 'stressed' hold 'ress'?") is the task's data too."""

from __future__ import annotations

from agent_py.core.answer_checks import question_data
from agent_py.core.checks.base import Check, Seen, Stage
from agent_py.core.checks.code_literals import string_literals

MIN_PIECE_CHARS = 3


def pieces_of_quoted(code: str, question: str) -> list[tuple[str, str]]:
    """(literal, quoted text) pairs where a string literal of ``code`` is a proper piece of a
    text ``question`` quotes, and no literal of the code holds that text whole."""
    quoted, _ = question_data(question)
    literals = string_literals(code)
    found = []
    for text in quoted:
        if any(text in literal for literal in literals):
            continue
        for literal in literals:
            if len(literal) >= MIN_PIECE_CHARS and literal in text and literal not in quoted:
                found.append((literal, text))
                break
    return found


def run(seen: Seen) -> str | None:
    tool, arguments = seen.tool, seen.arguments
    if tool is None or tool.code_language is None or arguments is None:
        return None
    found = pieces_of_quoted(str(arguments.get("code", "")), seen.question)
    if not found:
        return None
    piece, whole = found[0]
    return (
        f"{tool.name} was not run: the code uses {piece!r}, a piece of the task's {whole!r}; "
        "use the task's text whole"
    )


CHECK = Check(
    name="data_cut_short",
    stage=Stage.CALL,
    catches="code whose string literal is a piece of a text the task quotes, never the whole",
    run=run,
)
