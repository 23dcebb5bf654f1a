"""``python -m agent_py run "task"``: one task in the page, from the terminal.

It uses the very page a person opens (:class:`~agent_py.cli.terminal.PageAgent`), so the
terminal gets the same agent, engines and sandbox: WebLLM when the browser has a WebGPU
adapter, the CPU engine otherwise. Progress is printed as it happens and the session's JSONL
history is written to a file (:mod:`agent_py.cli.run_report`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, TextIO

from agent_py.cli.mcp_servers import report_servers
from agent_py.cli.run_report import (
    EXIT_FAILED,
    EXIT_SETUP,
    HistoryWriter,
    print_prepared,
    read_session,
    report_result,
)
from agent_py.cli.terminal import PageAgent, WaitTimedOut
from agent_py.cli.workspace_files import replace_workspace, save_outputs, workspace_files
from agent_py.core.errors import SetupError


def run_in_browser(
    task: str,
    *,
    history: Path,
    continue_session: bool = False,
    engine: str = "auto",
    script: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    timeout_s: float = 1800,
    profile: Path | None = None,
    mcp_servers: list[dict[str, Any]] | None = None,
    files: list[Path] | None = None,
    outputs: Path = Path(".artifacts/outputs"),
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Run ``task`` in the page; returns the process exit code. ``continue_session``: the
    task is the next turn of the session recorded in ``history`` (a follow-up), appended to
    it; otherwise a new session, written over ``history``. ``profile``: the browser's
    storage folder, kept between runs (None: a fresh one each run). ``mcp_servers``: servers
    (as the page's servers list holds them) whose tools join the page; the task runs only
    once each is connected. ``files``: what the run's workspace holds (nothing else); the
    files its steps write are saved into a folder of the run's own under ``outputs``."""
    from playwright.sync_api import Error as PlaywrightError

    started = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    try:
        session = read_session(history) if continue_session else []
        given = workspace_files(files or [])
    except SetupError as exc:
        print(str(exc), file=err)
        return EXIT_SETUP
    writer = HistoryWriter(history, out, append=continue_session)
    try:
        with PageAgent(
            engine=engine,
            settings=settings,
            on_event=writer,
            profile=profile,
            # Always set: a kept profile's servers of an earlier run must not join this one.
            mcp_servers=mcp_servers or [],
            deadline=deadline,
            notices=err,
        ) as agent:
            if not agent.usable:
                print(f"no model engine can run: {agent.why_unusable()}", file=err)
                return EXIT_FAILED
            print(f"engine: {agent.engine['label']}", file=out, flush=True)
            if agent.engine.get("reason"):
                print(f"note: {agent.engine['reason']}", file=out, flush=True)
            unusable = report_servers(agent, mcp_servers or [], out, err)
            if unusable:
                which = "servers" if len(unusable) > 1 else "server"
                names = ", ".join(unusable)
                print(f"the task was not run: the MCP {which} {names} cannot be used", file=err)
                return EXIT_SETUP
            replace_workspace(agent.page, given)
            for name, data in given:
                print(f"file: {name} ({len(data)} bytes)", file=out, flush=True)
            left = max(deadline - time.monotonic(), 1.0)
            result = agent.run(task, script=script, timeout_s=left, session=session)
            if result is None:
                print(f"the run failed: {agent.page_error()}", file=err)
                return EXIT_FAILED
            code = report_result(result, writer.path, out, err)
            for path in save_outputs(agent.page, result.get("files", []), outputs):
                print(f"wrote: {path}", file=out)
            prepared = agent.page.evaluate("window.agentApp.prepared ?? null")
            if prepared:
                print_prepared(prepared, out)
            print(
                f"total {time.perf_counter() - started:.1f} s (browser, page and model included)",
                file=out,
            )
            return code
    except SetupError as exc:
        print(str(exc), file=err)
        return EXIT_SETUP
    except WaitTimedOut as exc:
        print(f"failed: {exc.message(timeout_s)}", file=err)
        return EXIT_FAILED
    except PlaywrightError as exc:
        print(f"the browser failed: {exc}", file=err)
        return EXIT_FAILED
    finally:
        writer.close()
