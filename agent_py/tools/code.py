"""What the code tools share (``javascript_execute``, ``python_execute``): one input, the
source code, run by an injected runner under a time limit and an output cap."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any, ClassVar, Generic, TypeVar

from agent_py.core.tool import JSONSchema, ToolBase, ToolError

RunnerT = TypeVar("RunnerT")

DEFAULT_TIMEOUT_S = 10.0  # a code call's time limit, unless the caller sets one
DEFAULT_OUTPUT_LIMIT = 20_000  # characters of output kept

# Code whose whole work is to give back numbers written into it: `return 42;`, `[3, 8, 15]`,
# `print(6.75)`. It computes nothing, so its "result" is the model's own guess dressed up as a
# tool's: refused, with what to do instead, so the step is planned again rather than trusted.
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_CONSTANT_CODE = re.compile(
    rf"""(?:return\s+|(?:console\.log|print)\s*\(\s*)?
    (?:{_NUMBER}|\[\s*(?:{_NUMBER}(?:\s*,\s*{_NUMBER})*\s*,?)?\s*\])
    \s*\)?\s*;?""",
    re.VERBOSE,
)

# The same for text: `return 'Hello, Bob!';` computes nothing either. Refused only where the
# profile says so (Strategy.refuse_constant_text): a tiny model writes its texts as code.
_STRING = r"""(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|`(?:[^`\\$]|\\.)*`)"""
_LITERAL = rf"(?:{_STRING}|{_NUMBER}|true|false|True|False|null|None)"
_ENTRY = rf"(?:{_STRING}|[A-Za-z_$][\w$]*)\s*:\s*{_LITERAL}"  # key: literal
_CONSTANT_TEXT = re.compile(
    rf"""(?:return\s+|(?:console\.log|print)\s*\(\s*)?
    (?:{_STRING}(?:\s*\+\s*{_STRING})*
      |\[\s*(?:{_STRING}(?:\s*,\s*{_STRING})*\s*,?)?\s*\]
      |\{{\s*(?:{_ENTRY}(?:\s*,\s*{_ENTRY})*\s*,?)?\s*\}})
    \s*\)?\s*;?""",
    re.VERBOSE,
)

# `^` between a value and a number, outside strings: `1^2 + 2^2`, `x ^ 2`. Both languages read
# it as bitwise XOR, but a model that copies a user's "2^10" means a power.
_CARET_POWER = re.compile(r"(?:\b\d+(?:\.\d+)?|\b[A-Za-z_]\w*|\))\s*\^\s*\d+\b")

# What JavaScript writes for a Date it could not make (`new Date("Dubai 14:00")` as text).
_INVALID_DATE = "Invalid Date"
# What code prints for a value it does not have: JavaScript's console shows undefined, and
# null for NaN and null (through JSON), and {} for a promise logged instead of awaited; Python
# prints None and nan. Code that only prints these computed nothing usable, and "null" or "{}"
# must not pass for an answer.
_NO_VALUE_PRINTS = frozenset({"", "null", "undefined", "NaN", "None", "nan", "{}", _INVALID_DATE})
# An error given back as the value: `fetch(url).catch((error) => error)` returns
# "TypeError: Failed to fetch", which would be reported as the answer.
_ERROR_VALUE = re.compile(r"(?:[A-Z][A-Za-z]*)?(?:Error|Exception)(?::\s|$)")
# How the sandboxes mark what code wrote with console.error, and errors thrown after it returned
# (node_runner.py, web/sandbox.html).
_ERROR_PREFIXES = ("[error] ", "[uncaught] ")

# The same code inside a function of no parameters, called or not (`function weather() {
# return "Sunny, 20°C"; }`, `def f():\n    return 42` then `print(f())`): unwrapped to its body.
_WRAPPED = re.compile(
    r"""(?:async\s+)?function\s+(?P<js>[A-Za-z_$][\w$]*)\s*\(\s*\)\s*\{(?P<js_body>.*)\}\s*
      (?:(?:return\s+|console\.log\s*\(\s*)?(?:await\s+)?(?P=js)\s*\(\s*\)\s*\)?\s*;?)?
    |def\s+(?P<py>[A-Za-z_]\w*)\s*\(\s*\)\s*(?:->\s*\w+\s*)?:\s*(?P<py_body>.*?)\s*
      (?:\n(?:print\s*\(\s*)?(?P=py)\s*\(\s*\)\s*\)?)?""",
    re.VERBOSE | re.DOTALL,
)


def _unwrapped(code: str) -> str:
    """The body of ``code`` when it is one function of no parameters (and maybe its call),
    else ``code``; stripped."""
    code = code.strip()
    wrapped = _WRAPPED.fullmatch(code)
    if wrapped is None:
        return code
    return (wrapped.group("js_body") or wrapped.group("py_body") or "").strip()


# Code that names its literal first and then gives the name back (`day = "Christmas"` then
# `print(day)`) computes as little: each statement a literal put into a name, a comment, or
# the output of one name, which stands for its literal.
_NAME = r"[A-Za-z_$][\w$]*"
_LITERAL_VALUE = rf"(?:{_STRING}|{_NUMBER})"
_ASSIGNED = re.compile(rf"(?:(?:const|let|var)\s+)?({_NAME})\s*=\s*({_LITERAL_VALUE})\s*;?")
_NAME_OUT = re.compile(rf"(?:return\s+|(?:console\.log|print)\s*\(\s*)({_NAME})\s*\)?\s*;?")


def _named_literal(code: str) -> str | None:
    """``return <literal>`` when ``code`` only puts literals into names and gives one of them
    back, else None."""
    values: dict[str, str] = {}
    out: str | None = None
    for line in code.splitlines():
        for statement in (part.strip() for part in _before_comment(line).split(";")):
            if not statement:
                continue
            assigned = _ASSIGNED.fullmatch(statement)
            given = _NAME_OUT.fullmatch(statement)
            if assigned is not None and out is None:
                values[assigned.group(1)] = assigned.group(2)
            elif given is not None and given.group(1) in values and out is None:
                out = values[given.group(1)]
            else:
                return None
    return f"return {out}" if out is not None else None


def _before_comment(line: str) -> str:
    """``line`` up to a ``#`` or ``//`` comment outside its string literals."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote and line[index - 1] != "\\" else quote
        elif char in "'\"`":
            quote = char
        elif char == "#" or line.startswith("//", index):
            return line[:index]
    return line


def code_input_schema(description: str) -> JSONSchema:
    """The input of a code tool: ``code``, a non-empty string."""
    return {
        "type": "object",
        "properties": {"code": {"type": "string", "minLength": 1, "description": description}},
        "required": ["code"],
        "additionalProperties": False,
    }


class CodeTool(ToolBase, Generic[RunnerT]):
    """A tool that runs source code with ``runner``, which enforces ``timeout_s`` itself; the
    agent's own limit for the tool is a backstop ``start_margin_s`` above it (what a runner
    may need before the code starts: a sandbox's first start)."""

    start_margin_s = 5.0
    # How the code's language is told to give its result, and the refusal of code that gave none.
    result_hint: ClassVar[str] = "return the result"
    nothing_message: ClassVar[str] = "the code returned nothing and printed nothing"
    call_example: ClassVar[str] = "return %s(...);"

    def __init__(
        self,
        runner: RunnerT,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        refuse_constant_text: bool = False,
        caret_is_power: bool = False,
    ) -> None:
        self.runner = runner
        self.run_timeout_s = timeout_s
        self.output_limit = output_limit
        self.timeout_s = timeout_s + self.start_margin_s
        self.refuse_constant_text = refuse_constant_text
        self.caret_is_power = caret_is_power

    def refuse_no_value(self, value: Any, printed: Iterable[str]) -> None:
        """Raises ToolError when the code gave back an error as its value ("TypeError: Failed
        to fetch", from an error caught and returned), or gave no value (null, undefined, NaN,
        None) and logged an error, or printed nothing but such words.

        Code that catches its error, logs it and goes on prints what it had instead
        ("Page title: null" after a failed fetch): with no value, the printed lines are its
        result, and a logged error among them means the computation failed."""
        if isinstance(value, str) and _ERROR_VALUE.match(value.strip()):
            raise ToolError(f"the code gave back an error, not a result: {value.strip()[:200]}")
        if isinstance(value, str) and value.strip() == _INVALID_DATE:
            raise ToolError(
                "the code gave Invalid Date: a date it made from its values could not be read "
                f"(give Date a year, month and day as numbers, or an ISO text): fix it and "
                f"{self.result_hint}"
            )
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            return
        lines = [line.strip() for text in printed for line in text.splitlines()]
        errors = [line for line in lines if line.startswith(_ERROR_PREFIXES)]
        if errors:  # an error the code caught and logged is still an error
            raise ToolError(f"the code gave no value and logged an error: {'; '.join(errors)}")
        if any(line not in _NO_VALUE_PRINTS for line in lines):
            return
        shown = ", ".join(dict.fromkeys(line for line in lines if line))
        if shown:
            raise ToolError(
                f"the code gave no value: it printed only {shown}, so its calculation went "
                f"wrong: fix it and {self.result_hint}"
            )
        raise ToolError(f"{self.nothing_message}: {self.result_hint}")

    def refuse_caret_power(self, code: str) -> None:
        """With ``caret_is_power``: raises ToolError when ``code`` writes ``^`` before a number
        (outside strings), which computes XOR where a power is meant."""
        if not self.caret_is_power:
            return
        found = _CARET_POWER.search(re.sub(_STRING, "''", code))
        if found is not None:
            raise ToolError(
                f"`{found.group()}` is bitwise XOR in {self.code_language}, not a power: "
                "write a power with ** (2 ** 10)"
            )

    def refuse_uncalled(self, signature: str | None) -> None:
        """Raises ToolError when the code only defines ``signature`` and never calls it (a
        code model's habit: the function is the answer to it, but running it gives nothing)."""
        if signature is not None:
            name = signature.split("(", 1)[0]
            raise ToolError(
                f"the code only defines {signature} and never calls it, so it gives nothing: "
                f"call it with the task's values and {self.result_hint} (after the function: "
                f"{self.call_example % name})"
            )

    def refuse_constant_code(self, code: str) -> None:
        """Raises ToolError when ``code`` only gives back numbers written into it (or text,
        with ``refuse_constant_text``), itself or from a function of no parameters, its
        comments aside (``return 10.00; // Replace with the actual cost``)."""
        code = "\n".join(_before_comment(line) for line in code.splitlines())
        code = _unwrapped(code)
        code = _named_literal(code) or code
        if _CONSTANT_CODE.fullmatch(code):
            raise ToolError(
                "the code only gives back numbers written into it, so it computes nothing: "
                f"write the calculation itself in {self.code_language} (with operators, Math "
                "or a loop)"
            )
        if self.refuse_constant_text and _CONSTANT_TEXT.fullmatch(code):
            raise ToolError(
                "the code only gives back text written into it, so it computes nothing: "
                f"compute the result in {self.code_language}, or use another tool (or decline "
                "when no tool can do the task)"
            )


# Code models often write their answer as a function and never call it (`function total() {
# return 3 + 8; }`, `def main(): ...`): code that is nothing but function definitions, the last
# of which takes no argument, is run by calling that function, as a script's entry point.
_JS_FUNCTION = re.compile(r"(?:async\s+)?function\s*\*?\s*([A-Za-z_$][\w$]*)\s*\(([^()]*)\)\s*\{")
_JS_SKIPPED = re.compile(r"\s+|//[^\n]*|/\*.*?\*/|;", re.DOTALL)


def _js_block_end(code: str, start: int) -> int | None:
    """The index after the ``}`` that closes the ``{`` at ``start``, skipping strings,
    template literals and comments; None when it never closes."""
    depth, i = 0, start
    while i < len(code):
        char = code[i]
        if char in "'\"`":
            i += 1
            while i < len(code) and code[i] != char:
                i += 2 if code[i] == "\\" else 1
        elif code.startswith("//", i):
            i = code.find("\n", i)
            if i < 0:
                return None
        elif code.startswith("/*", i):
            i = code.find("*/", i)
            if i < 0:
                return None
            i += 1
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _javascript_last_declared(code: str) -> tuple[str, str] | None:
    """The name and parameter list of the last function when ``code`` is only function
    declarations (and comments); else None."""
    at, last = 0, None
    while True:
        skipped = _JS_SKIPPED.match(code, at)
        while skipped and skipped.end() > at:
            at = skipped.end()
            skipped = _JS_SKIPPED.match(code, at)
        if at >= len(code):
            return last
        declared = _JS_FUNCTION.match(code, at)
        if declared is None:
            return None
        end = _js_block_end(code, declared.end() - 1)
        if end is None:
            return None
        at = end
        last = (declared.group(1), declared.group(2).strip())


def javascript_lone_function(code: str) -> str | None:
    """The name of the function to call when ``code`` is only function declarations (and
    comments), the last of which takes no parameter; else None."""
    last = _javascript_last_declared(code)
    return last[0] if last is not None and not last[1] else None


def javascript_uncalled_function(code: str) -> str | None:
    """``name(parameters)`` when ``code`` is only function declarations, the last of which
    takes parameters: nothing calls it, and nothing here knows its arguments; else None."""
    last = _javascript_last_declared(code)
    return f"{last[0]}({last[1]})" if last is not None and last[1] else None


def _python_last_defined(code: str) -> tuple[str, list[str]] | None:
    """The name and required parameters of the last function when ``code`` is only imports
    and function definitions (and a docstring), the last one not async; else None."""
    import ast

    try:
        body = ast.parse(code).body
    except SyntaxError:
        return None
    functions = [node for node in body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    allowed = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Import, ast.ImportFrom)
    docstring = (ast.Expr,)
    if not functions or not all(
        isinstance(node, allowed)
        or (isinstance(node, docstring) and isinstance(node.value, ast.Constant))
        for node in body
    ):
        return None
    last = functions[-1]
    if isinstance(last, ast.AsyncFunctionDef):
        return None
    arguments = last.args
    positional = [*arguments.posonlyargs, *arguments.args]
    required = positional[: len(positional) - len(arguments.defaults)]
    keyword = [
        arg
        for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
        if default is None
    ]
    return last.name, [arg.arg for arg in [*required, *keyword]]


def python_lone_function(code: str) -> str | None:
    """The name of the function to call when ``code`` is only imports and function definitions
    (and a docstring), the last of which takes no required argument; else None."""
    last = _python_last_defined(code)
    return last[0] if last is not None and not last[1] else None


def python_uncalled_function(code: str) -> str | None:
    """``name(parameters)`` when ``code`` is only imports and function definitions, the last
    of which needs arguments: nothing calls it; else None."""
    last = _python_last_defined(code)
    return f"{last[0]}({', '.join(last[1])})" if last is not None and last[1] else None
