"""The agent from the terminal: serve the page on loopback, run it in headless Chromium.

``python -m agent_py run "task"`` uses the very page a person opens, so the terminal gets the
same agent, engines and sandbox: WebLLM when the browser has a WebGPU adapter, the CPU engine
otherwise. Progress is printed as it happens and the session's JSONL history is written to a
file. CPython only (Playwright and a local HTTP server); meant for a source checkout, where
``web/`` and ``scripts/`` sit beside the package.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

from agent_py.events import Event, EventType
from agent_py.web_server import start_server

ROOT = Path(__file__).resolve().parents[1]
EXIT_OK, EXIT_FAILED, EXIT_SETUP = 0, 1, 2


class SetupError(Exception):
    """Something the command needs is missing; the message says how to get it."""


def load_browser_config() -> ModuleType:
    """playwright.config.py at the repository root: the browser settings the terminal runner,
    the tests and the benchmarks share. Loaded by path: its name has a dot in it."""
    path = ROOT / "playwright.config.py"
    if not path.exists():
        raise SetupError(f"{path} is missing: run this from a source checkout of agent_py")
    spec = importlib.util.spec_from_file_location("agent_py_playwright_config", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def describe(event: Event) -> str | None:
    """One line for the terminal, or None for events not worth a line."""
    where = f"[{event.step}] " if event.step else ""
    meta = event.meta
    match event.type:
        case EventType.STATE:
            return f"· {event.content}"
        case EventType.PLAN_STARTED:
            lines = [f"plan: {event.content}"]
            for task in meta["plan"]["tasks"]:
                lines.append(f"  {task['task_id']}: {task['task_goal']}")
                lines += [
                    f"    {s['step_id']} {s['tool_name']}: {s['step_goal']}" for s in task["steps"]
                ]
            return "\n".join(lines)
        case EventType.STEP_STARTED:
            return f"{where}started ({meta['tool']}): {event.content}"
        case EventType.THINKING:
            return f"{where}thinking: {event.content[:200]}"
        case EventType.ACTION:
            return f"{where}input: {event.content[:300]}"
        case EventType.STEP_COMPLETED | EventType.STEP_FAILED:
            status = "done" if event.type is EventType.STEP_COMPLETED else "FAILED"
            return f"{where}{status} in {meta['seconds']:.2f} s: {event.content[:300]}"
        case EventType.REFLECTION:
            return f"rethink: {meta['status']}"
        case EventType.MODEL if event.content == "reload":
            return f"· model {meta.get('model')} loaded"
        case _:
            return None


class HistoryWriter:
    """Writes each event as a JSONL line as it arrives, and prints its line."""

    def __init__(self, path: Path, out: TextIO) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.file = path.open("w", encoding="utf-8")
        self.out = out
        self.final: Event | None = None

    def __call__(self, raw: dict[str, Any]) -> None:
        event = Event.model_validate(raw)
        self.file.write(event.to_json() + "\n")
        self.file.flush()
        if event.type is EventType.FINAL:
            self.final = event
        line = describe(event)
        if line:
            print(line, file=self.out, flush=True)

    def close(self) -> None:
        self.file.close()


def run_in_browser(
    task: str,
    *,
    history: Path,
    engine: str = "auto",
    script: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    timeout_s: float = 1800,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Run ``task`` in the page; returns the process exit code."""
    try:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("Playwright is missing: run 'bash scripts/setup.sh --browser'", file=err)
        return EXIT_SETUP
    try:
        browser_config = load_browser_config()
        if not (ROOT / "web" / "vendor" / "manifest.json").exists():
            raise SetupError("web/vendor is missing: run 'bash scripts/setup.sh' first")
        if not Path(browser_config.CHROMIUM_PATH).exists():
            raise SetupError(
                f"no Chromium at {browser_config.CHROMIUM_PATH}: "
                "run 'bash scripts/setup.sh --browser'"
            )
    except SetupError as exc:
        print(str(exc), file=err)
        return EXIT_SETUP

    writer = HistoryWriter(history, out)
    server, base_url = start_server(port=0)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(**browser_config.launch_options())
            page = browser.new_page()
            page.expose_function("__agent_py_event", writer)
            if settings:
                page.add_init_script(
                    f"localStorage.setItem('agent_py.settings', {json.dumps(json.dumps(settings))})"
                )
            url = f"{base_url}index.html?engine={engine}"
            return _drive(page, url, task, script, timeout_s, writer, out, err)
    except PlaywrightError as exc:
        print(f"the browser failed: {exc}", file=err)
        return EXIT_FAILED
    finally:
        writer.close()
        server.shutdown()
        server.server_close()


def _drive(
    page: Any,
    url: str,
    task: str,
    script: dict[str, Any] | None,
    timeout_s: float,
    writer: HistoryWriter,
    out: TextIO,
    err: TextIO,
) -> int:
    page.goto(url)
    page.wait_for_function(
        "['ready', 'failed'].includes(document.body.dataset.status)", timeout=180_000
    )
    engine = page.evaluate("window.agentApp.engine")
    if not engine or not engine.get("usable"):
        reason = (engine or {}).get("reason") or page.locator("#error").inner_text()
        print(f"no model engine can run: {reason}", file=err)
        return EXIT_FAILED
    print(f"engine: {engine['label']}", file=out, flush=True)
    if engine.get("reason"):
        print(f"note: {engine['reason']}", file=out, flush=True)
    if script is not None:
        page.evaluate("replies => window.agentApp.setScript(replies)", script)
    page.evaluate("question => window.agentApp.run(question)", task)
    page.wait_for_function(
        "window.agentApp.lastResult !== undefined", timeout=int(timeout_s * 1000), polling=250
    )
    result = page.evaluate("window.agentApp.lastResult")
    if result is None:
        print(f"the run failed: {page.locator('#error').inner_text()}", file=err)
        return EXIT_FAILED
    print(file=out)
    if result["state"] != "completed":
        print(f"{result['state']}: {result.get('error')}", file=err)
        return EXIT_FAILED
    print(result["answer"], file=out)
    stats = result["stats"]
    calls = sum(stats["model_calls"].values())
    print(
        f"\n{calls} model calls, {stats['steps_run']} steps, {stats['wall_time_s']:.1f} s; "
        f"history: {writer.path}",
        file=out,
    )
    return EXIT_OK
