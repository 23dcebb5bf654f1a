"""Runs one piece of model-written Python and reports what it did, as one JSON object.

Standard library only, and nothing of agent_py: this file's source is what the sandboxes run
(the page's Pyodide worker, ``web/python-sandbox.html``; the terminal's subprocess,
:mod:`agent_py.tools.python_runner`), ahead of one call of :func:`run_source`. The agent's own
interpreter never runs model code through it.

The code runs as a module in a fresh namespace, as ``python file.py`` would, except that a last
statement that is an expression gives its value, as the interactive interpreter does
(``sum(range(10))`` gives 45), and that code which returns at its top level (``return 6 * 7``,
as the JavaScript tool takes it: models write Python that way too) runs as a function's body,
whose return value is the value. stdout and stderr are captured, within one budget.

Given the workspace's files (``files``: name to base64), the code runs in a fresh folder that
holds them, as its current folder (``open("sales.csv")``), and the files it leaves under
``out/`` that are new or changed come back in the JSON, base64, within ``OUTPUT_BYTES``. The
folder is removed afterwards: nothing one call writes is there for the next.
"""

# agent_py: keep this source in the page's bundle
from __future__ import annotations

import ast
import base64
import io
import json
import math
import os
import shutil
import sys
import tempfile
import traceback

FILENAME = "<python_execute>"
OUTPUT_FOLDER = "out"
OUTPUT_BYTES = 8 * 1024 * 1024
"""The most the files one call writes may hold together."""


class _Capped(io.TextIOBase):
    """A text stream that keeps at most ``budget.left`` characters, shared with its twin."""

    def __init__(self, budget: _Budget) -> None:
        self._budget = budget
        self._parts: list[str] = []

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._parts.append(self._budget.take(text))
        return len(text)

    def getvalue(self) -> str:
        return "".join(self._parts)


class _Budget:
    def __init__(self, limit: int) -> None:
        self.left = limit
        self.cut = False

    def take(self, text: str) -> str:
        if len(text) > self.left:
            self.cut = True
            text = text[: self.left]
        self.left -= len(text)
        return text


def _value_json(value: object, limit: int) -> tuple[object, bool]:
    """The value as JSON where it has a JSON form (numbers, strings, lists, dicts), else as
    print() shows it (a date as 2024-01-01); cut to ``limit`` characters of JSON. NaN is no
    value, as JavaScript's JSON has it (null)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None, False
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        value = str(value)
        text = json.dumps(value, ensure_ascii=False)
    if len(text) <= limit:
        return value, False
    return text[:limit], True


MAIN = "_python_execute_main"


def _returns_at_top(tree: ast.Module) -> bool:
    """Whether a ``return`` stands outside any function (Python refuses to compile it)."""
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)

    def walk(node: ast.AST) -> bool:
        return any(
            isinstance(child, ast.Return) or (not isinstance(child, scopes) and walk(child))
            for child in ast.iter_child_nodes(node)
        )

    return walk(tree)


def _as_function(tree: ast.Module) -> ast.Module:
    """The module's statements as the body of a function of no parameters, a last expression
    returned, followed by a call of it that gives the value."""
    body = list(tree.body)
    if isinstance(body[-1], ast.Expr):
        body[-1] = ast.copy_location(ast.Return(body[-1].value), body[-1])
    # Parsed, not built, so that the node has the fields of this Python's version.
    main = ast.parse(f"def {MAIN}():\n    pass").body[0]
    assert isinstance(main, ast.FunctionDef)
    main.body = body
    # The call has no line of the code's own (line 0): a traceback shows the code's lines only.
    call = ast.Expr(ast.Call(ast.Name(MAIN, ast.Load()), [], []))
    for node in ast.walk(call):
        node.lineno, node.col_offset, node.end_lineno, node.end_col_offset = 0, 0, 0, 0  # type: ignore[attr-defined]
    module = ast.Module(body=[ast.copy_location(main, body[0]), call], type_ignores=[])
    return ast.fix_missing_locations(module)


def _error_text(error: BaseException) -> str:
    """The exception with the lines of the model's code only (no frames of this driver)."""
    if isinstance(error, SyntaxError) and error.filename == FILENAME:
        where = f" (line {error.lineno})" if error.lineno else ""
        return f"SyntaxError: {error.msg}{where}"
    frames = [
        f for f in traceback.extract_tb(error.__traceback__) if f.filename == FILENAME and f.lineno
    ]
    lines = [f"line {f.lineno}" + (f": {f.line}" if f.line else "") for f in frames[-3:]]
    head = "".join(traceback.format_exception_only(type(error), error)).strip()
    return "\n".join([head, *(f"  at {line}" for line in lines)])


def _lay_out(files: dict[str, str]) -> str:
    """A fresh folder holding ``files`` (name to base64), with an empty ``out/``."""
    folder = tempfile.mkdtemp(prefix="workspace-", dir=os.getcwd())
    for name, encoded in files.items():
        path = os.path.join(folder, *name.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(encoded))
    os.makedirs(os.path.join(folder, OUTPUT_FOLDER), exist_ok=True)
    return folder


def _written(folder: str, given: dict[str, str]) -> tuple[dict[str, str], str | None]:
    """The files under ``out/`` of ``folder`` that are new or differ from ``given``, as
    name to base64, and why some did not come back (over ``OUTPUT_BYTES``), or None."""
    found: dict[str, str] = {}
    total = 0
    over: list[str] = []
    root = os.path.join(folder, OUTPUT_FOLDER)
    for directory, _, names in sorted(os.walk(root)):
        for file_name in sorted(names):
            path = os.path.join(directory, file_name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            name = os.path.relpath(path, folder).replace(os.sep, "/")
            with open(path, "rb") as handle:
                data = handle.read()
            encoded = base64.b64encode(data).decode("ascii")
            if given.get(name) == encoded:
                continue
            if total + len(data) > OUTPUT_BYTES:
                over.append(f"{name} ({len(data)} bytes)")
                continue
            total += len(data)
            found[name] = encoded
    why = None
    if over:
        why = f"files over the {OUTPUT_BYTES} bytes one call may write were not kept: " + ", ".join(
            over
        )
    return found, why


def run_source(code: str, output_limit: int, files: dict[str, str] | None = None) -> str:
    """Runs ``code``; returns JSON: value, stdout, stderr, error (None when it ran to the
    end), truncated (something was cut to ``output_limit``); with ``files`` (the workspace,
    name to base64), also files (what it wrote under out/) and files_error."""
    home = os.getcwd()
    folder = None
    written: dict[str, str] = {}
    files_error: str | None = None
    if files is not None:
        folder = _lay_out(files)
        os.chdir(folder)
    try:
        reply = json.loads(_run_here(code, output_limit))
        if folder is not None:
            os.chdir(folder)  # the code may have changed folder
            written, files_error = _written(folder, files or {})
    finally:
        if folder is not None:
            os.chdir(home)
            shutil.rmtree(folder, ignore_errors=True)
    if files is not None:
        reply["files"] = written
        reply["files_error"] = files_error
    return json.dumps(reply, ensure_ascii=False)


def _run_here(code: str, output_limit: int) -> str:
    budget = _Budget(output_limit)
    stdout, stderr = _Capped(budget), _Capped(budget)
    value: object = None
    error: str | None = None
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = stdout, stderr
    try:
        tree = ast.parse(code, FILENAME, "exec")
        if _returns_at_top(tree):
            tree = _as_function(tree)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body[-1].value)
            del tree.body[-1]
        namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": __builtins__}
        # The code's own lines, for tracebacks: linecache reads them by file name.
        import linecache

        linecache.cache[FILENAME] = (len(code), None, code.splitlines(True), FILENAME)
        exec(compile(tree, FILENAME, "exec"), namespace)
        if last is not None:
            value = eval(compile(last, FILENAME, "eval"), namespace)
    except BaseException as caught:  # SystemExit and KeyboardInterrupt end the code, not us
        if isinstance(caught, SystemExit) and caught.code in (None, 0):
            error = None
        else:
            error = _error_text(caught)
    finally:
        sys.stdout, sys.stderr = saved
    shown, value_cut = _value_json(value, output_limit)
    if error is not None and len(error) > output_limit:
        error, value_cut = error[:output_limit], True
    return json.dumps(
        {
            "value": shown,
            "stdout": stdout.getvalue(),
            "stderr": stderr.getvalue(),
            "error": error,
            "truncated": budget.cut or value_cut,
        },
        ensure_ascii=False,
    )


def source() -> str:
    """This module's source: what a sandbox runs before calling :func:`run_source`."""
    from importlib.resources import files

    return files(__package__ or "agent_py.tools").joinpath("python_driver.py").read_text("utf-8")
