"""``python_execute``: runs model-written Python through an injected runner, never in the
agent's own interpreter.

The runner decides where: a Pyodide worker of its own in the page (``web/python-sandbox.html``,
no network, no storage), a resource-limited subprocess in CPython
(:mod:`agent_py.tools.python_runner`). Both run :mod:`agent_py.tools.python_driver`: the code
runs as a script whose last expression, if any, is the value; stdout and stderr are captured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from agent_py.core.tool import ToolContext, ToolError, ToolResult
from agent_py.tools.code import (
    CodeTool,
    code_input_schema,
    python_lone_function,
    python_uncalled_function,
)
from agent_py.tools.python_driver import source


@dataclass
class PyRunResult:
    """What a runner reports: the driver's JSON (value, stdout, stderr, error, truncated), or
    ``timed_out`` / an ``error`` of the runner itself."""

    value: Any = None
    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    timed_out: bool = False
    truncated: bool = False

    @classmethod
    def from_driver(cls, text: str) -> PyRunResult:
        """The driver's JSON; an unreadable one is an error, never a crash."""
        try:
            raw = json.loads(text)
            return cls(
                value=raw.get("value"),
                stdout=str(raw.get("stdout") or ""),
                stderr=str(raw.get("stderr") or ""),
                error=None if raw.get("error") is None else str(raw["error"]),
                truncated=bool(raw.get("truncated")),
            )
        except (TypeError, ValueError, AttributeError):
            return cls(error="the Python sandbox sent an unreadable reply")


class PyRunner(Protocol):
    async def run(self, program: str, *, timeout_s: float, output_limit: int) -> PyRunResult:
        """Runs ``program`` (see :func:`program_for`), whose last expression is the driver's
        JSON, in a sandbox; stops it after ``timeout_s``."""
        ...

    async def close(self) -> None:
        """Ends the sandbox (the run is over, or was stopped)."""
        ...


def program_for(code: str, output_limit: int) -> str:
    """What a sandbox runs for one call: the driver, then the driver run on ``code``. Its last
    expression is the driver's JSON (Pyodide's ``runPythonAsync`` gives it back)."""
    return f"{source()}\nrun_source({json.dumps(code)}, {int(output_limit)})\n"


class PythonExecutor(CodeTool[PyRunner]):
    name = "python_execute"
    description = (
        "Runs Python 3 (standard library only) in an isolated sandbox with no network, files "
        "or storage. The value of the last line, if it is an expression, is the result "
        "(print() output is captured too). Each call starts afresh (nothing one call defines "
        "exists in another): write the whole computation in one call. Use it for "
        "calculations, dates, statistics, parsing and text processing."
    )
    input_schema = code_input_schema(
        "Python code; end with an expression (or print) for the result"
    )
    code_language = "Python"
    result_hint = "end it with the result's expression, or print it"
    nothing_message = "the code gave no value and printed nothing"
    call_example = "%s(...) as the last line"
    start_margin_s = 30.0  # the page's sandbox loads Pyodide at a run's first call

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        code = str(arguments["code"])
        self.refuse_constant_code(code)
        self.refuse_caret_power(code)
        self.refuse_uncalled(python_uncalled_function(code))
        lone = python_lone_function(code)
        if lone is not None:  # a function written and never called: it is the entry point
            code = f"{code}\n{lone}()"
        result = await self.runner.run(
            program_for(code, self.output_limit),
            timeout_s=self.run_timeout_s,
            output_limit=self.output_limit,
        )
        if result.timed_out:
            raise ToolError(f"the code ran longer than {self.run_timeout_s:g} s and was stopped")
        if result.error is not None:
            raise ToolError(_with_output(result.error, result))
        self.refuse_no_value(result.value, [result.stdout])
        printed = result.stdout.rstrip("\n")
        return ToolResult(
            content=format_py_result(result),
            # Code that only printed its result: what it printed is the value.
            data=result.value if result.value is not None else printed,
            meta={"stdout": result.stdout, "stderr": result.stderr, "truncated": result.truncated},
        )


def _with_output(error: str, result: PyRunResult) -> str:
    parts = [error]
    if result.stdout:
        parts.append(f"stdout:\n{result.stdout.rstrip()}")
    if result.stderr:
        parts.append(f"stderr:\n{result.stderr.rstrip()}")
    return "\n".join(parts)


def format_py_result(result: PyRunResult) -> str:
    parts = []
    if result.value is not None:
        shown = result.value if isinstance(result.value, str) else json.dumps(result.value)
        parts.append(f"result: {shown}")
    if result.stdout:
        parts.append(f"stdout:\n{result.stdout.rstrip()}")
    if result.stderr:
        parts.append(f"stderr:\n{result.stderr.rstrip()}")
    if result.truncated:
        parts.append("(output was cut at the size limit)")
    return "\n".join(parts)
