"""The page driven from Python: :class:`PageAgent` serves the page on loopback, runs it in
headless Chromium and calls its API (``window.agentApp``), checking each result against the
core's ``RunResult``.

The terminal's ``run`` command (:mod:`agent_py.cli.run_command`), the real-task suite, scripts
and tests drive the very page a person opens, so they get the same agent, engines and sandbox.
What it starts (the page's bundle, its server, the browser) is in
:mod:`agent_py.cli.browser_launch`. CPython only (Playwright and a local HTTP server); meant
for a source checkout, where ``web/`` and ``scripts/`` sit beside the package.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from agent_py.cli.browser_launch import ensure_bundle, open_page, start_page_server
from agent_py.cli.checkout import load_browser_config
from agent_py.core.agent import RunResult
from agent_py.core.errors import SetupError as SetupError  # what the terminal commands catch
from agent_py.core.events import Event, EventType

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
        ensure_bundle()
        executable = self.browser_path or browser_config.CHROMIUM_PATH
        if not Path(executable).exists():
            raise SetupError(f"no browser at {executable}: run 'bash scripts/setup.sh --browser'")
        try:
            server, base_url = start_page_server(self.profile)
            self._stack.callback(server.server_close)
            self._stack.callback(server.shutdown)
            playwright = self._stack.enter_context(sync_playwright())
            options = browser_config.launch_options(
                executable_path=executable, extra_args=self.browser_args
            )
            if self.headed:
                options["headless"] = False
            self.page = open_page(playwright, options, self.profile, self._stack)
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

    def server_states(self) -> list[dict[str, Any]]:
        """Each server's state as the MCP panel shows it: {name, state, error?}, and once
        connected its ``tool_count``, ``tools`` and ``protocol_version``."""
        return list(self.page.evaluate("window.agentApp.serverStates()"))

    def _wait_for_servers(self, servers: list[dict[str, Any]], timeout_s: float = 60) -> None:
        """Wait until each server is connected, has failed or asks for a sign-in (which
        nobody gives here); past ``timeout_s`` the run goes on (the page shows the server as
        connecting)."""
        for server in servers:
            settled = (
                "window.agentApp.serverStates().some((s) => s.name === "
                f"{json.dumps(server['name'])} && "
                "['connected', 'error', 'sign-in'].includes(s.state))"
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
