"""``python_execute``: runs model-written Python through an injected runner, never in the
agent's own interpreter.

The runner decides where: a Pyodide worker of its own in the page (``web/python-sandbox.html``,
no network, no storage), a resource-limited subprocess in CPython
(:mod:`agent_py.tools.python_runner`). Both run :mod:`agent_py.tools.python_driver`: the code
runs as a script whose last expression, if any, is the value; stdout and stderr are captured.

Given the user's workspace (:mod:`agent_py.core.workspace`), each call's code runs in a folder
of the sandbox that holds a copy of the workspace's files, and what it writes under ``out/``
is stored back into the workspace afterwards: the sandbox itself never reaches the page's
storage, and its isolation is what it is without files.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent_py.core.tool import ToolContext, ToolError, ToolResult
from agent_py.core.workspace import Workspace, WorkspaceFile
from agent_py.tools.code import (
    CodeTool,
    code_input_schema,
    python_lone_function,
    python_uncalled_function,
)
from agent_py.tools.code_files import OnWorkspace, not_copied, with_written
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
    files: dict[str, bytes] = field(default_factory=dict)
    """What the code wrote under out/ (given the workspace's files): name to bytes."""
    files_error: str | None = None
    """Why some files it wrote did not come back."""

    @classmethod
    def from_driver(cls, text: str) -> PyRunResult:
        """The driver's JSON; an unreadable one is an error, never a crash."""
        try:
            raw = json.loads(text)
            files = {
                str(name): base64.b64decode(str(encoded), validate=True)
                for name, encoded in (raw.get("files") or {}).items()
            }
            return cls(
                value=raw.get("value"),
                stdout=str(raw.get("stdout") or ""),
                stderr=str(raw.get("stderr") or ""),
                error=None if raw.get("error") is None else str(raw["error"]),
                truncated=bool(raw.get("truncated")),
                files=files,
                files_error=None if raw.get("files_error") is None else str(raw["files_error"]),
            )
        except (TypeError, ValueError, AttributeError, binascii.Error):
            return cls(error="the Python sandbox sent an unreadable reply")


class PyRunner(Protocol):
    async def run(self, program: str, *, timeout_s: float, output_limit: int) -> PyRunResult:
        """Runs ``program`` (see :func:`program_for`), whose last expression is the driver's
        JSON, in a sandbox; stops it after ``timeout_s``."""
        ...

    async def close(self) -> None:
        """Ends the sandbox (the run is over, or was stopped)."""
        ...


def program_for(code: str, output_limit: int, files: dict[str, bytes] | None = None) -> str:
    """What a sandbox runs for one call: the driver, then the driver run on ``code`` (in a
    folder holding ``files``, when given). Its last expression is the driver's JSON
    (Pyodide's ``runPythonAsync`` gives it back)."""
    given = ""
    if files is not None:
        encoded = {name: base64.b64encode(data).decode("ascii") for name, data in files.items()}
        given = f", {encoded!r}"
    return f"{source()}\nrun_source({json.dumps(code)}, {int(output_limit)}{given})\n"


class PythonExecutor(OnWorkspace, CodeTool[PyRunner]):
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

    with_files = (
        "Runs Python 3 (standard library only: csv, json, statistics, re, datetime; no numpy "
        "or pandas) in an isolated sandbox with no network. The user's files are in its "
        "current folder: open them by name (open('sales.csv')). Files the code writes under "
        "out/ (open('out/result.csv', 'w')) are kept for the user. The value of the last "
        "line, if it is an expression, is the result (print() output is captured too). Each "
        "call starts afresh: write the whole computation in one call."
    )
    code_with_files = (
        "Python code, standard library only (csv, json, statistics, re, datetime; there is "
        "no pandas or numpy), that opens the user's files by name (%s) and writes any file "
        "for the user under out/; end with an expression (or print) for the result. When the "
        "data lacks what the step needs (a column, a field), raise an error that says what "
        "is missing: never print a stand-in"
    )

    def __init__(
        self,
        runner: PyRunner,
        *,
        workspace: Workspace | None = None,
        files: Sequence[WorkspaceFile] = (),
        heads: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        """``workspace``: the user's files, copied into each call's folder, and where what
        the code writes under out/ is kept (:meth:`OnWorkspace.see`)."""
        super().__init__(runner, **options)
        self.see(workspace, files, heads)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        code = str(arguments["code"])
        self.refuse_constant_code(code)
        self.refuse_caret_power(code)
        self.refuse_uncalled(python_uncalled_function(code))
        lone = python_lone_function(code)
        if lone is not None:  # a function written and never called: it is the entry point
            code = f"{code}\n{lone}()"
        given, left_out = await self.given_files()
        result = await self.runner.run(
            program_for(code, self.output_limit, given),
            timeout_s=self.run_timeout_s,
            output_limit=self.output_limit,
        )
        if result.timed_out:
            raise ToolError(f"the code ran longer than {self.run_timeout_s:g} s and was stopped")
        if result.error is not None:
            error = result.error
            if left_out and error.startswith("FileNotFoundError"):
                error += not_copied(left_out)
            raise ToolError(_with_output(error, result))
        if result.files_error is not None:
            raise ToolError(result.files_error)
        kept = await self.keep(result.files) if result.files else []
        if not kept:  # a file written is a result; without one, the code must give a value
            self.refuse_no_value(result.value, [result.stdout])
        printed = result.stdout.rstrip("\n")
        value = result.value if result.value is not None else printed
        content, value = with_written(format_py_result(result), value, kept)
        meta: dict[str, Any] = {
            "stdout": result.stdout,
            "stderr": result.stderr,
            "truncated": result.truncated,
        }
        if kept:
            meta["files"] = kept
        # Code that only printed its result: what it printed is the value.
        return ToolResult(content=content, data=value, meta=meta)


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
