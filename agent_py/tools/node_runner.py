"""A :class:`~agent_py.tools.javascript.JSRunner` for CPython: one Node process per call.

Node's permission model (``--experimental-permission``) denies file system, child process
and worker access; a hard timeout kills the process; console output is capped. Network access
is not blocked by Node 20's permission model, so this runner is for a user's own machine,
not for untrusted multi-user hosting. CPython only: the page has its own sandbox runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil

from agent_py.tools.javascript import JSRunResult

_MARKER = "\x1eagent_py_result:"  # str.splitlines() would split at \x1e: split on "\\n"

# Reads the code from stdin, runs it as an async function body with console captured,
# and prints one marked JSON line with the outcome.
_WRAPPER = r"""
const limit = Number(process.argv[1]);
const marker = process.argv[2];
const write = process.stdout.write.bind(process.stdout);
const lines = [];
let size = 0, truncated = false;
const show = (v) => typeof v === "string" ? v : (() => {
  try { return JSON.stringify(v) ?? String(v); } catch { return String(v); } })();
const capture = (line) => {
  if (truncated) return;
  if (size + line.length > limit) {
    line = line.slice(0, Math.max(limit - size, 0));
    truncated = true;
  }
  size += line.length; lines.push(line);
};
for (const level of ["log", "info", "warn", "error", "debug"]) {
  console[level] = (...args) => {
    const line = args.map(show).join(" ");
    capture(level === "log" || level === "info" ? line : `[${level}] ${line}`);
  };
}
// Raw writes are captured too, so nothing but our result line reaches the real stdout.
for (const stream of [process.stdout, process.stderr]) {
  stream.write = (chunk, ...rest) => {
    capture(String(chunk));
    const done = rest.find((r) => typeof r === "function");
    if (done) done();
    return true;
  };
}
// Exit only once the pipe has taken the line: process.exit would drop buffered output.
const finish = (out) => write(marker + JSON.stringify(out) + "\n", () => process.exit(0));
let code = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => { code += d; });
process.stdin.on("end", async () => {
  try {
    const AsyncFunction = (async () => {}).constructor;
    let value = await new AsyncFunction(code)();
    let text;
    // An Error as the page's sandbox shows it ("TypeError: Failed to fetch"), not as {}.
    const errors = (k, v) => v instanceof Error ? `${v.name}: ${v.message}` : v;
    try { text = JSON.stringify(value === undefined ? null : value, errors); }
    catch { text = JSON.stringify(String(value)); }
    if (text.length > limit) { text = JSON.stringify(text.slice(0, limit)); truncated = true; }
    finish({ value: JSON.parse(text), console: lines, truncated });
  } catch (e) {
    const message = e && e.stack ? String(e.stack).split("\n").slice(0, 3).join("\n") : String(e);
    finish({ error: message, console: lines, truncated });
  }
});
"""


class NodeRunner:
    def __init__(self, node: str | None = None, *, max_memory_mb: int = 256) -> None:
        found = node or shutil.which("node")
        if found is None:
            raise RuntimeError("javascript_execute needs Node.js ('node' was not found on PATH)")
        self.node = found
        self.max_memory_mb = max_memory_mb

    async def run(self, code: str, *, timeout_s: float, output_limit: int) -> JSRunResult:
        process = await asyncio.create_subprocess_exec(
            self.node,
            "--experimental-permission",
            "--no-warnings",
            f"--max-old-space-size={self.max_memory_mb}",
            "-e",
            _WRAPPER,
            str(output_limit),
            _MARKER,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            stdout, stderr = await asyncio.wait_for(
                self._exchange(process, code, output_limit), timeout_s
            )
        except TimeoutError:
            return JSRunResult(timed_out=True)
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        return self._read_outcome(stdout, stderr)

    @staticmethod
    async def _exchange(
        process: asyncio.subprocess.Process, code: str, output_limit: int
    ) -> tuple[str, str]:
        assert process.stdin and process.stdout and process.stderr
        process.stdin.write(code.encode("utf-8"))
        await process.stdin.drain()
        process.stdin.close()
        # Keep at most a bounded amount: a flood on stdout must not eat memory.
        cap = output_limit * 4 + 65_536
        stdout, stderr = await asyncio.gather(
            _read_capped(process.stdout, cap), _read_capped(process.stderr, 8_192)
        )
        await process.wait()
        return stdout, stderr

    @staticmethod
    def _read_outcome(stdout: str, stderr: str) -> JSRunResult:
        line = next((ln for ln in reversed(stdout.split("\n")) if ln.startswith(_MARKER)), None)
        if line is None:
            detail = stderr.strip().splitlines()[-1:] or ["no output"]
            return JSRunResult(error=f"the JavaScript process ended abnormally: {detail[0]}")
        outcome = json.loads(line[len(_MARKER) :])
        return JSRunResult(
            value=outcome.get("value"),
            console=list(outcome.get("console", [])),
            error=outcome.get("error"),
            truncated=bool(outcome.get("truncated")),
        )


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> str:
    kept = bytearray()
    while chunk := await stream.read(65_536):
        if len(kept) < cap:
            kept += chunk[: cap - len(kept)]
    return kept.decode("utf-8", errors="replace")
