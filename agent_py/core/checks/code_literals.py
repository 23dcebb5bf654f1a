"""The string literals of code, as JavaScript and Python write them ('…', "…", `…`): what the
checks of code compare with the task's data. Not a check itself."""

from __future__ import annotations

import re

_STRING_LITERAL = re.compile(r"""'((?:[^'\\\n]|\\.)*)'|"((?:[^"\\\n]|\\.)*)"|`((?:[^`\\]|\\.)*)`""")


def string_literals(code: str) -> list[str]:
    """The contents of ``code``'s string literals, in order."""
    return [
        next(part for part in m.groups() if part is not None)
        for m in _STRING_LITERAL.finditer(code)
    ]


def without_string_literals(code: str) -> str:
    """``code`` with each string literal emptied (``''``): what is left is the code's own."""
    return _STRING_LITERAL.sub("''", code)
