"""The agent from the terminal: serve the page on loopback, run it in headless Chromium.

``python -m agent_py run "task"`` uses the very page a person opens, so the terminal gets the
same agent, engines and sandbox: WebLLM when the browser has a WebGPU adapter, the CPU engine
otherwise. Progress is printed as it happens and the session's JSONL history is written to a
file. CPython only (Playwright and a local HTTP server); meant for a source checkout, where
``web/`` and ``scripts/`` sit beside the package.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

from agent_py.cli.web_server import start_server
from agent_py.core.agent import RunResult
from agent_py.core.errors import SetupError as SetupError  # what the terminal commands catch
from agent_py.core.events import Event, EventType
from agent_py.core.history import read_history_file

ROOT = Path(__file__).resolve().parents[2]
EXIT_OK, EXIT_FAILED, EXIT_SETUP = 0, 1, 2
PORT_FILE = "agent_py-port"  # in a browser profile: the port of the origin its storage is for


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


def bundled_cpu_models(root: Path = ROOT) -> list[str]:
    """The ids of the CPU engine's bundled models (web/models.json, the page's catalog)."""
    catalog = json.loads((root / "web" / "models.json").read_text(encoding="utf-8"))
    return [model["id"] for model in catalog["models"]]


def stale_sources(root: Path = ROOT) -> list[Path]:
    """The agent_py sources newer than the page's vendored bundle: the page runs the bundle
    (scripts/vendor.py builds it), so a run after an edit would otherwise test old code."""
    manifest = root / "web" / "vendor" / "manifest.json"
    built = manifest.stat().st_mtime
    return [
        path
        for path in sorted((root / "agent_py").rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.stat().st_mtime > built
    ]


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
        case EventType.PLAN_CUT | EventType.PLAN_TEXT_WHOLE:
            return f"· {event.content}"  # the inputs the steps show next are not the plan's
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

    def __init__(self, path: Path, out: TextIO, *, append: bool = False) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.file = path.open("a" if append else "w", encoding="utf-8")
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


NOTICE_AFTER_S = 5.0
"""A wait that passes this long is said on ``notices``, then every ``NOTICE_EVERY_S``."""
NOTICE_EVERY_S = 15.0
STOP_GRACE_S = 30.0
"""How long a run stopped at its deadline may take to end before it is given up."""


class WaitTimedOut(Exception):
    """The run's deadline (or, with ``guard_s``, a wait's own hang guard) passed while the
    terminal waited for ``what`` (the page's start, an MCP server, the model's preparation)."""

    def __init__(self, what: str, guard_s: float | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.guard_s = guard_s

    def message(self, timeout_s: float) -> str:
        """What the terminal says, ``timeout_s`` being the run's own limit."""
        limit = timeout_s if self.guard_s is None else self.guard_s
        return f"no answer within {limit:g} s: still waiting for {self.what}"


class PageAgent:
    """The page in headless Chromium, driven from Python: ``python -m agent_py run`` and the
    real-task suite use it. Open it as a context manager; ``run()`` as often as needed.

    Events of the page arrive through ``on_event`` (which may be swapped between runs).
    Raises :class:`SetupError` when something the page needs is missing. With a
    ``deadline`` (``time.monotonic()``), every wait of the start ends there with
    :class:`WaitTimedOut`; a wait that lasts is said on ``notices`` ("waiting for …").
    """

    def __init__(
        self,
        *,
        engine: str = "auto",
        settings: dict[str, Any] | None = None,
        on_event: Callable[[dict[str, Any]], None] = lambda raw: None,
        browser_path: str | None = None,
        headed: bool = False,
        browser_args: Sequence[str] = (),
        profile: Path | None = None,
        mcp_servers: list[dict[str, Any]] | None = None,
        deadline: float | None = None,
        notices: TextIO | None = None,
    ) -> None:
        self.engine_choice = engine
        self.deadline = deadline
        self.notices = notices
        self.profile = profile
        # Saved in the page's storage before it opens, as a user's saved servers are: they
        # connect at start, and the planner's prompt is prefilled once, with their tools.
        self.mcp_servers = mcp_servers
        self.settings = settings
        self.on_event = on_event
        self.browser_path = browser_path
        self.headed = headed
        self.browser_args = list(browser_args)
        self.engine: dict[str, Any] = {}
        self._stack = contextlib.ExitStack()
        self.page: Any = None

    def __enter__(self) -> PageAgent:
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            raise SetupError(
                "Playwright is missing: run 'bash scripts/setup.sh --browser'"
            ) from None
        browser_config = load_browser_config()
        manifest = ROOT / "web" / "vendor" / "manifest.json"
        if not manifest.exists():
            raise SetupError("web/vendor is missing: run 'bash scripts/setup.sh' first")
        changed = stale_sources()
        if changed:
            print(
                f"agent_py changed since the page's bundle was built ({changed[0].name}"
                f"{' and more' if len(changed) > 1 else ''}): rebuilding it (scripts/vendor.py)",
                file=sys.stderr,
            )
            vendor = [sys.executable, str(ROOT / "scripts" / "vendor.py")]
            if subprocess.run(vendor, capture_output=True, check=False).returncode != 0:
                raise SetupError("rebuilding web/vendor failed: run 'bash scripts/setup.sh'")
            manifest.touch()  # built from these sources
        executable = self.browser_path or browser_config.CHROMIUM_PATH
        if not Path(executable).exists():
            raise SetupError(f"no browser at {executable}: run 'bash scripts/setup.sh --browser'")
        try:
            server, base_url = self._start_server()
            self._stack.callback(server.server_close)
            self._stack.callback(server.shutdown)
            playwright = self._stack.enter_context(sync_playwright())
            options = browser_config.launch_options(
                executable_path=executable, extra_args=self.browser_args
            )
            if self.headed:
                options["headless"] = False
            if self.profile is None:
                browser = playwright.chromium.launch(**options)
                self._stack.callback(browser.close)
                self.page = browser.new_context(service_workers="block").new_page()
            else:
                context = self._persistent_context(playwright, options)
                self._stack.callback(context.close)
                self.page = context.pages[0] if context.pages else context.new_page()
            self.page.expose_function("__agent_py_event", lambda raw: self.on_event(raw))
            # Nobody is at the page to review a plan: off unless the settings say otherwise.
            settings = {"review_plans": "off", **(self.settings or {})}
            stored = json.dumps(json.dumps(settings))
            self.page.add_init_script(f"localStorage.setItem('agent_py.settings', {stored})")
            if self.mcp_servers is not None:
                # As the servers panel saves them (it fills in what a server leaves out).
                servers = json.dumps(json.dumps(self.mcp_servers))
                self.page.add_init_script(
                    f"localStorage.setItem('agent_py.mcp_servers', {servers})"
                )
            self.page.goto(f"{base_url}index.html?engine={self.engine_choice}")
            what = "the page to start (Python and the model engine)"
            if not self._wait(
                "['ready', 'failed'].includes(window.agentApp?.state())", what, guard_s=180
            ):
                raise WaitTimedOut(what, guard_s=180)
            self.engine = self.page.evaluate("window.agentApp.engine") or {}
            if self.page.evaluate("window.agentApp.state()") == "ready":
                self._wait_for_servers(self.mcp_servers or [])
                if self.usable:
                    self._wait_for_preparation()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _start_server(self) -> tuple[Any, str]:
        """The page's server on loopback. With a profile, on the port that profile used
        before: the browser keeps storage per origin, and the port is part of the origin."""
        if self.profile is None:
            return start_server(port=0)
        remembered = self.profile / PORT_FILE
        try:
            port = int(remembered.read_text())
        except (OSError, ValueError):
            port = 0
        try:
            server, base_url = start_server(port=port)
        except OSError:  # taken by another program meanwhile: a new origin, a cold start
            print(
                f"port {port} of the browser profile {self.profile} is taken: "
                "this run starts without the profile's saved state",
                file=sys.stderr,
            )
            server, base_url = start_server(port=0)
        self.profile.mkdir(parents=True, exist_ok=True)
        remembered.write_text(str(server.server_address[1]))
        return server, base_url

    def _persistent_context(self, playwright: Any, options: dict[str, Any]) -> Any:
        """A browser whose storage outlives the run (the model's file and its prefilled
        state among it), in ``self.profile``; a profile another run holds open gives way to
        a temporary one, said on stderr. Without service workers: the page's offline copy
        would serve the run the files of the previous version (a new one is taken only at
        the next load), and the terminal always has our server."""
        from playwright.sync_api import Error as PlaywrightError

        assert self.profile is not None
        self.profile.mkdir(parents=True, exist_ok=True)
        # Registrations made by a profile that ran before service workers were blocked here
        # would still control the page; the Cache API's data (the model's file) stays.
        for registrations in ("Database", "ScriptCache"):
            shutil.rmtree(self.profile / "Default" / "Service Worker" / registrations, True)
        try:
            return playwright.chromium.launch_persistent_context(
                str(self.profile), service_workers="block", **options
            )
        except PlaywrightError as error:
            if "ProcessSingleton" not in str(error) and "in use" not in str(error):
                raise
        print(
            f"the browser profile {self.profile} is in use by another run: "
            "this run starts from a fresh one",
            file=sys.stderr,
        )
        fresh = self._stack.enter_context(tempfile.TemporaryDirectory(prefix="agent_py-profile-"))
        return playwright.chromium.launch_persistent_context(
            fresh, service_workers="block", **options
        )

    @property
    def usable(self) -> bool:
        return bool(self.engine.get("usable"))

    def why_unusable(self) -> str:
        reason = self.engine.get("reason")
        return str(reason or self.page.locator("#error").inner_text())

    def page_error(self) -> str:
        return str(self.page.locator("#error").inner_text())

    def _wait(self, expression: str, what: str, *, guard_s: float, polling: int = 100) -> bool:
        """Wait until ``expression`` holds in the page: True, or False once ``guard_s`` (a
        hang guard) passed; raises :class:`WaitTimedOut` at the run's deadline. A wait that
        lasts is said on ``notices``: "waiting for WHAT (12 s)"."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

        started = time.monotonic()
        notice_at = started + NOTICE_AFTER_S
        while True:
            now = time.monotonic()
            if self.deadline is not None and now >= self.deadline:
                raise WaitTimedOut(what)
            ends = min(started + guard_s, self.deadline or math.inf)
            if now >= started + guard_s:
                return False
            until = min(ends, notice_at) if self.notices is not None else ends
            try:
                self.page.wait_for_function(
                    expression, timeout=max(1, int((until - now) * 1000)), polling=polling
                )
                return True
            except PlaywrightTimeoutError:
                if self.notices is not None and time.monotonic() >= notice_at:
                    waited = time.monotonic() - started
                    print(f"waiting for {what} ({waited:.0f} s)", file=self.notices, flush=True)
                    notice_at += NOTICE_EVERY_S

    def _wait_for_servers(self, servers: list[dict[str, Any]], timeout_s: float = 60) -> None:
        """Wait until each server is connected or has failed; past ``timeout_s`` the run
        goes on (the page shows the server as connecting)."""
        for server in servers:
            settled = (
                "window.agentApp.serverStates().some((s) => s.name === "
                f"{json.dumps(server['name'])} && ['connected', 'error'].includes(s.state))"
            )
            self._wait(settled, f"the MCP server {server['name']} to connect", guard_s=timeout_s)

    def _wait_for_preparation(self, timeout_s: float = 900) -> None:
        """Wait for the boot's preparation of the model: the planner's prompt restored from
        the saved state, or prefilled and saved for the next run. A task sent before it
        would prefill that prompt itself, unsaved, and the next run would start cold (the
        page skips a preparation that a run has overtaken). Nobody types here, so the wait
        costs the task nothing; past ``timeout_s`` (a hang guard) the task goes anyway."""
        label = str(self.engine.get("label") or "model engine")
        first = label.split(" ", 1)[0]
        if first[1:].islower():  # "Model server at …", but "CPU engine", "WebLLM"
            label = label[:1].lower() + label[1:]
        self._wait(
            "window.agentApp.prepared != null",
            f"the {label} to answer the planner's prompt (the model's preparation)",
            guard_s=timeout_s,
        )

    def run(
        self,
        question: str,
        *,
        script: dict[str, Any] | None = None,
        timeout_s: float = 1800,
        session: list[Event] | None = None,
    ) -> dict[str, Any] | None:
        """Run one task; the RunResult as a dict, or None when the page could not run it.

        ``session``: the recorded session the task continues (its events; [] a new one);
        None: the page's current one (the previous task's, a follow-up). Past ``timeout_s``
        (a hang guard) the run is stopped and reported as failed."""
        if session is not None:
            self.page.evaluate(
                "events => window.agentApp.useSession(events)",
                [event.model_dump(mode="json") for event in session],
            )
        if script is not None:
            self.page.evaluate("replies => window.agentApp.setScript(replies)", script)
        # run() settles with the result; finished(ms) gives it, or says the run has not ended.
        self.page.evaluate("question => { window.agentApp.run(question); }", question)
        ended, result = self._finished(timeout_s)
        if not ended:
            self.page.evaluate("window.agentApp.stop()")
            late = f"no answer within {timeout_s:g} s"
            ended, result = self._finished(STOP_GRACE_S)
            if not ended:
                return {
                    "state": "failed",
                    "error": f"{late}, and the run did not end within {STOP_GRACE_S:g} s "
                    "of being stopped",
                    "steps": [],
                }
            if result is not None:
                result.update(state="failed", error=f"{late}: stopped")
        return result

    def _finished(self, timeout_s: float) -> tuple[bool, dict[str, Any] | None]:
        """Whether the page's run ended within ``timeout_s``, and its result: the RunResult
        as a dict, or None when the page could not run it. The result is checked against the
        core's RunResult, the contract the page passes on."""
        wait = self.page.evaluate("ms => window.agentApp.finished(ms)", int(timeout_s * 1000))
        if not wait["done"]:
            return False, None
        raw = wait.get("result")
        if raw is None:
            return True, None
        return True, RunResult.model_validate(raw).model_dump(mode="json")

    def end_session(self, timeout_s: float = 30) -> None:
        """End the page's session (it records ``session_end``) and wait until that event has
        come through ``on_event``, so it lands with the session's other events, not with the
        next run's. A hang guard of ``timeout_s``."""
        ended: list[dict[str, Any]] = []
        previous = self.on_event

        def watch(raw: dict[str, Any]) -> None:
            previous(raw)
            if raw.get("type") == EventType.SESSION_END:
                ended.append(raw)

        self.on_event = watch
        try:
            self.page.evaluate("window.agentApp.useSession([])")
            deadline = time.monotonic() + timeout_s
            while not ended and time.monotonic() < deadline:
                self.page.wait_for_timeout(50)  # Playwright delivers events while it waits
        finally:
            self.on_event = previous


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
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Run ``task`` in the page; returns the process exit code. ``continue_session``: the
    task is the next turn of the session recorded in ``history`` (a follow-up), appended to
    it; otherwise a new session, written over ``history``. ``profile``: the browser's
    storage folder, kept between runs (None: a fresh one each run)."""
    from playwright.sync_api import Error as PlaywrightError

    started = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    try:
        session = read_session(history) if continue_session else []
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
            deadline=deadline,
            notices=err,
        ) as agent:
            if not agent.usable:
                print(f"no model engine can run: {agent.why_unusable()}", file=err)
                return EXIT_FAILED
            print(f"engine: {agent.engine['label']}", file=out, flush=True)
            if agent.engine.get("reason"):
                print(f"note: {agent.engine['reason']}", file=out, flush=True)
            left = max(deadline - time.monotonic(), 1.0)
            result = agent.run(task, script=script, timeout_s=left, session=session)
            if result is None:
                print(f"the run failed: {agent.page_error()}", file=err)
                return EXIT_FAILED
            code = report_result(result, writer.path, out, err)
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


def read_session(path: Path) -> list[Event]:
    """The events of a session's JSONL history; [] for a file that does not exist yet (the
    session starts with this task). A file that is not such a history is a set-up error."""
    if not path.exists() or path.stat().st_size == 0:
        return []
    try:
        events = read_history_file(path)
    except (OSError, ValueError) as exc:
        why = f"{path} is not a session's history (JSONL of agent events): {exc}"
        raise SetupError(why) from None
    if len({event.session for event in events}) > 1:
        raise SetupError(f"{path} holds more than one session: give the file of one")
    return events


def print_prepared(prepared: dict[str, Any], out: TextIO) -> None:
    """How the model was prepared before the task (the page's PREPARED report)."""
    if prepared.get("warning"):
        print(f"warning: {prepared['warning']}", file=out)
    if not prepared.get("prefilled"):
        return
    seconds = prepared["ms"] / 1000
    restored = prepared.get("restored_tokens") or 0
    how = (
        f"restored from the saved state ({restored} tokens)"
        if restored
        else "prefilled and saved for the next run"
        if prepared.get("state") == "saved"
        else "prefilled"
    )
    tokens = prepared["prompt_tokens"]
    # A server that reports no usage (llama-cpp-python's, streaming) gives no count.
    counted = "the planner's prompt"
    if tokens:
        counted = f"{tokens} prompt tokens of {counted}"
    print(f"model prepared before the task in {seconds:.1f} s: {counted} {how}", file=out)


def report_result(result: dict[str, Any], history: Path, out: TextIO, err: TextIO) -> int:
    """Print a run's outcome; the exit code: 0 completed, 1 failed or stopped."""
    print(file=out)
    failed = [step for step in result.get("steps", []) if not step["ok"]]
    if failed:
        shown = "; ".join(f"{s['step_id']} ({s['tool']}): {s['output'][:160]}" for s in failed)
        print(f"note: {len(failed)} of {len(result['steps'])} steps failed: {shown}", file=out)
    if result["state"] != "completed":
        print(f"{result['state']}: {result.get('error')}", file=err)
        return EXIT_FAILED
    print(result["answer"], file=out)
    stats = result["stats"]
    calls = sum(stats["model_calls"].values())
    # The model's own time apart: the run's time also holds waiting for the preparation.
    model_time = stats.get("model_time_s")
    in_calls = f" ({model_time:.1f} s in them)" if model_time is not None else ""
    print(
        f"\n{calls} model calls{in_calls}, {stats['steps_run']} steps, "
        f"{stats['wall_time_s']:.1f} s; history: {history}",
        file=out,
    )
    return EXIT_OK
