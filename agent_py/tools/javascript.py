"""``javascript_execute``: runs JavaScript through an injected runner.

The runner decides where code runs: Node with a hard timeout in CPython
(:mod:`agent_py.tools.node_runner`), a sandboxed Worker in the page. Code is the body of an
async function: ``return`` gives the result, ``console.log`` output is captured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent_py.core.tool import ToolContext, ToolError, ToolResult
from agent_py.tools.code import (
    CodeTool,
    code_input_schema,
    javascript_lone_function,
    javascript_uncalled_function,
)


@dataclass
class JSRunResult:
    """What a runner reports. ``value`` is the JSON-able return value, ``error`` a message."""

    value: Any = None
    console: list[str] = field(default_factory=list)
    error: str | None = None
    timed_out: bool = False
    truncated: bool = False


class JSRunner(Protocol):
    async def run(self, code: str, *, timeout_s: float, output_limit: int) -> JSRunResult: ...


class JavascriptExecutor(CodeTool[JSRunner]):
    name = "javascript_execute"
    description = (
        "Runs JavaScript (the body of an async function) in an isolated sandbox with no page, "
        "files or storage. 'return' a JSON-serialisable value (code without return or await "
        "gives the value of its last expression, as a console does); console.log output is "
        "captured. Each call starts afresh (nothing one call defines exists in another): write "
        "the whole computation in one call. Use it for calculations, data transformation and "
        "parsing. Dates: write new Date('2024-01-31'), the ISO text, not new Date(y, m, d), "
        "whose months count from 0; getDay() is a number, so name a weekday with "
        "toLocaleDateString('en-US', {weekday: 'long', timeZone: 'UTC'})."
    )
    input_schema = code_input_schema("JavaScript function body; use return for the result")
    code_language = "JavaScript"

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        code = str(arguments["code"])
        self.refuse_constant_code(code)
        self.refuse_caret_power(code)
        self.refuse_uncalled(javascript_uncalled_function(code))
        lone = javascript_lone_function(code)
        if lone is not None:  # a function written and never called: it is the entry point
            code = f"{code}\nreturn await {lone}();"
        result = await self.runner.run(
            console_semantics(code),
            timeout_s=self.run_timeout_s,
            output_limit=self.output_limit,
        )
        if result.timed_out:
            raise ToolError(f"the code ran longer than {self.run_timeout_s:g} s and was stopped")
        console = "\n".join(result.console)
        if result.error is not None:
            detail = f"\nconsole:\n{console}" if console else ""
            raise ToolError(f"{result.error}{detail}")
        self.refuse_no_value(result.value, result.console)
        return ToolResult(
            content=format_js_result(result.value, console, result.truncated),
            # Code that only printed its result: what it printed is the value.
            data=result.value if result.value is not None else console,
            meta={"console": result.console, "truncated": result.truncated},
        )


# Parsed as a script first, so a lone expression (or code whose last statement is one) gives
# its value, as a browser console does. Only when the parser refuses the code as a script
# (a top-level return or await) does it run as the body of an async function. eval parses
# the whole text before running any of it, so nothing runs twice.
_CONSOLE_WRAPPER = """const __source = %s;
try {
  return eval(__source);
} catch (error) {
  if (!(error instanceof SyntaxError && /Illegal return|await is only valid/.test(error.message))) {
    throw error;
  }
}
return await new (async () => {}).constructor(__source)();"""


def console_semantics(code: str) -> str:
    """Code whose last statement is an expression gives that value (``1234 + 5678`` is
    6912, not undefined); code with a top-level ``return`` or ``await`` runs as the body
    of an async function, as before."""
    return _CONSOLE_WRAPPER % json.dumps(code)


def format_js_result(value: Any, console: str, truncated: bool) -> str:
    """The result as the model reads it. Code that returned nothing but printed is shown by
    its output alone, as python_execute's is: "result: null" beside the printed 42 read to a
    1.5B model as a computation that gave nothing."""
    parts = []
    if value is not None or not console:
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"result: {shown}")
    if console:
        parts.append(f"console:\n{console}")
    if truncated:
        parts.append("(output was cut at the size limit)")
    return "\n".join(parts)
