"""``javascript_execute``: runs JavaScript through an injected runner.

The runner decides where code runs: Node with a hard timeout in CPython
(:mod:`agent_py.tools.node_runner`), a sandboxed Worker in the page. Code is the body of an
async function: ``return`` gives the result, ``console.log`` output is captured.

Given the user's workspace (:mod:`agent_py.tools.code_files`), each call's program carries
copies of its files, which the code reads with ``readFile(name)``, and gives back what the
code wrote with ``writeFile('out/…', text)`` beside its value, which the tool keeps in the
workspace. The files travel inside the program and its result, so every runner (Node, the
page's sandboxed Worker) gives the same functions, and none of them reaches storage.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent_py.core.tool import ToolContext, ToolError, ToolResult
from agent_py.core.workspace import Workspace, WorkspaceFile
from agent_py.tools.code import (
    CodeTool,
    code_input_schema,
    javascript_lone_function,
    javascript_uncalled_function,
)
from agent_py.tools.code_files import OnWorkspace, not_copied, with_written


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


WRITTEN_CHARS = 4 * 1024 * 1024
"""The most text one call's written files may hold together: the runner's output cap is
raised by this much to carry them back, and the value and console are cut to the tool's own
cap here."""

_HOW = (
    "'return' a JSON-serialisable value (code without return or await gives the value of "
    "its last expression, as a console does); console.log output is captured. Each call "
    "starts afresh (nothing one call defines exists in another): write the whole "
    "computation in one call."
)


class JavascriptExecutor(OnWorkspace, CodeTool[JSRunner]):
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

    with_files = (
        "Runs JavaScript (the body of an async function) in an isolated sandbox with no "
        "network or page. readFile('sales.csv') gives the text of a file of the user's; "
        "writeFile('out/result.csv', text) keeps a file for the user; listFiles() names "
        f"them. {_HOW}"
    )
    code_with_files = (
        "JavaScript function body that reads the user's files with readFile(name), which "
        "gives a file's text (%s), and writes any file for the user with "
        "writeFile('out/name', text); use return for the result. When the data lacks what "
        "the step needs (a column, a field), throw an Error that says what is missing: "
        "never return a stand-in"
    )

    def __init__(
        self,
        runner: JSRunner,
        *,
        workspace: Workspace | None = None,
        files: Sequence[WorkspaceFile] = (),
        heads: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        """``workspace``: the user's files, given to each call's code, and where what it
        writes under out/ is kept (:meth:`OnWorkspace.see`); a workspace without ``files``
        gives the code nothing (its description says it has no files)."""
        super().__init__(runner, **options)
        self.see(workspace, files, heads)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        code = str(arguments["code"])
        self.refuse_constant_code(code)
        self.refuse_caret_power(code)
        self.refuse_uncalled(javascript_uncalled_function(code))
        lone = javascript_lone_function(code)
        if lone is not None:  # a function written and never called: it is the entry point
            code = f"{code}\nreturn await {lone}();"
        # Only a tool told of the files gives its code the functions to read and write them.
        given, left_out = await self.given_files() if self.sees_files else (None, [])
        program = console_semantics(code)
        if given is not None:
            program = with_files(program, given)
        result = await self.runner.run(
            program,
            timeout_s=self.run_timeout_s,
            output_limit=self.output_limit + (WRITTEN_CHARS if given is not None else 0),
        )
        if result.timed_out:
            raise ToolError(f"the code ran longer than {self.run_timeout_s:g} s and was stopped")
        written: dict[str, bytes] = {}
        if given is not None:
            result, written = self._unpacked(result)
        console = "\n".join(result.console)
        if result.error is not None:
            detail = f"\nconsole:\n{console}" if console else ""
            missing = left_out and result.error.startswith("Error: no file ")
            raise ToolError(f"{result.error}{not_copied(left_out) if missing else ''}{detail}")
        kept = await self.keep(written) if written else []
        if not kept:  # a file written is a result; without one, the code must give a value
            self.refuse_no_value(result.value, result.console)
        # Code that only printed its result: what it printed is the value.
        value = result.value if result.value is not None else console
        # Code that only wrote files gave them as its result: no "result: null" beside them.
        quiet = bool(kept) and result.value is None and not console
        shown = "" if quiet else format_js_result(result.value, console, result.truncated)
        content, value = with_written(shown, value, kept)
        meta: dict[str, Any] = {"console": result.console, "truncated": result.truncated}
        if kept:
            meta["files"] = kept
        return ToolResult(content=content, data=value, meta=meta)

    def _unpacked(self, result: JSRunResult) -> tuple[JSRunResult, dict[str, bytes]]:
        """A run of :func:`with_files`'s program as a run of the code alone (its value and
        console cut to the tool's cap, as a runner cuts them), and the files it wrote."""
        console, cut = _capped_lines(result.console, self.output_limit)
        truncated = result.truncated or cut
        error = result.error
        if error is not None and len(error) > self.output_limit:
            error, truncated = error[: self.output_limit], True
        value: Any = None
        written: dict[str, bytes] = {}
        if error is None and not result.timed_out:
            envelope = result.value
            if not isinstance(envelope, dict) or not isinstance(envelope.get("files"), dict):
                error = (
                    "the code's result and the files it wrote came to over "
                    f"{WRITTEN_CHARS} characters: write less"
                )
            else:
                value = envelope.get("value")
                written = {str(n): str(t).encode() for n, t in envelope["files"].items()}
                shown = json.dumps(value, ensure_ascii=False)
                if len(shown) > self.output_limit:
                    value, truncated = shown[: self.output_limit], True
        unpacked = JSRunResult(
            value=value,
            console=console,
            error=error,
            timed_out=result.timed_out,
            truncated=truncated,
        )
        return unpacked, written


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


# readFile, writeFile, listFiles and require('fs') are globals: code that runs as a
# function body of its own (see _CONSOLE_WRAPPER) sees the global scope only. The
# program's result is the code's value and the files it wrote; JavascriptExecutor unpacks
# them.
_FILES_WRAPPER = """const __written = {};
{
  const given = __GIVEN__;
  const named = (name) => String(name).replace(/^(\\.?\\/)+/, "");
  globalThis.listFiles = () => Object.keys(given);
  globalThis.readFile = (name) => {
    const file = named(name);
    if (!Object.hasOwn(given, file)) {
      const held = Object.keys(given).join(", ") || "no files";
      throw new Error(`no file ${file} in the user's workspace (it holds: ${held})`);
    }
    return new TextDecoder().decode(Uint8Array.from(atob(given[file]), (c) => c.charCodeAt(0)));
  };
  globalThis.writeFile = (name, text) => {
    const file = named(name);
    if (!file.startsWith("out/")) {
      throw new Error(`the user's files are written under out/: writeFile("out/${file}", text)`);
    }
    if (typeof text !== "string") {
      throw new TypeError("writeFile takes the file's text, a string (JSON.stringify an object)");
    }
    __written[file] = text;
  };
  // Node's fs over the same files, so code written for Node (the habit of models trained on
  // it: require('fs').readFileSync(name, 'utf8')) reads and writes them too.
  const fs = {
    readFileSync: (name) => globalThis.readFile(name),
    writeFileSync: (name, text) => globalThis.writeFile(name, text),
    existsSync: (name) => [given, __written].some((files) => Object.hasOwn(files, named(name))),
    readdirSync: () => Object.keys(given),
    readFile: (name, ...rest) => {
      const done = rest.find((r) => typeof r === "function");
      let text;
      try { text = fs.readFileSync(name); } catch (error) { return done(error); }
      return done(null, text);
    },
  };
  fs.promises = {
    readFile: async (name) => fs.readFileSync(name),
    writeFile: async (name, text) => fs.writeFileSync(name, text),
    readdir: async () => fs.readdirSync(),
  };
  globalThis.require = (module) => {
    const name = String(module).replace(/^node:/, "");
    if (name === "fs") return fs;
    if (name === "fs/promises") return fs.promises;
    throw new Error(
      `there is no module ${module} here: the user's files are read with readFile(name) and ` +
      "written with writeFile('out/name', text), with JavaScript's own objects for the rest");
  };
}
const __value = await (async () => {
__CODE__
})();
return { value: __value, files: __written };"""


def with_files(program: str, files: Mapping[str, bytes]) -> str:
    """``program`` given the workspace's ``files`` (readFile, writeFile, listFiles), its
    result the code's value and what it wrote: ``{value, files: {name: text}}``."""
    encoded = {name: base64.b64encode(data).decode("ascii") for name, data in files.items()}
    before, after = _FILES_WRAPPER.split("__CODE__")
    return before.replace("__GIVEN__", json.dumps(encoded)) + program + after


def _capped_lines(lines: list[str], limit: int) -> tuple[list[str], bool]:
    """``lines`` within ``limit`` characters (a line costs its length and one for its break,
    as the runners count), and whether some were cut."""
    kept: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > limit:
            if limit - used > 1:
                kept.append(line[: limit - used - 1])
            return kept, True
        kept.append(line)
        used += len(line) + 1
    return kept, False


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
