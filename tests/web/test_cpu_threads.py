"""The CPU engine's threads come from the machine (web/worker/engines/cpu-threads.js): the cores
the browser reports less one (two on two cores), at most what llama.cpp's thread pool runs, one
without cross-origin isolation, or the user's setting, clamped to the pool.

The rule is checked in Node; the page in Chromium made to report 8 cores in the page and in
every worker (ReportedCores), where the engine loads its model with the threads the rule gives
and Settings says how many.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RULE = ROOT / "web" / "worker" / "engines" / "cpu-threads.js"
# The quickest bundled model: what is tested is the threads it loads with, not the model.
SMALL = "smollm2-135m-instruct-q4_1"
GUARD_MS = 300_000  # a hang guard for a busy two-core machine, never a measure of speed
# The model bar's texts as they come (the engine reports "<model> loaded (N threads)"), kept by
# the page from its start: the load's text is replaced as soon as the prompt's prefill begins.
KEEP_MODEL_TEXTS = """
window.modelTexts = [];
new MutationObserver(() => {
  const text = document.getElementById("progress-model-text")?.textContent;
  if (text && window.modelTexts.at(-1) !== text) window.modelTexts.push(text);
}).observe(document, { subtree: true, childList: true, characterData: true });
"""


def threads_for(cases: list[tuple[int | None, bool, int]]) -> list[dict[str, int]]:
    """cpuThreads(cores, isolated, setting) for each case, computed by Node."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js is needed (scripts/setup.sh installs the page's tools with it)")
    script = (
        f"import {{ cpuThreads }} from {json.dumps(RULE.as_uri())};"
        f"const cases = {json.dumps(cases)};"
        "console.log(JSON.stringify(cases.map((c) => cpuThreads(...c))));"
    )
    done = subprocess.run(
        [node, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def test_the_default_is_the_reported_cores_less_one_within_the_pool() -> None:
    # cores reported, cross-origin isolated, setting (0: automatic) -> threads
    cases = {
        (8, True, 0): 7,
        (16, True, 0): 15,
        (64, True, 0): 17,  # the pool: 16 helpers and the engine's own thread
        (4, True, 0): 3,
        (2, True, 0): 2,  # both: the page and the agent's worker wait while the model computes
        (1, True, 0): 1,
        (None, True, 0): 2,  # no count reported
        (8, False, 0): 1,  # no SharedArrayBuffer, no threads
    }
    got = threads_for(list(cases))
    assert [choice["threads"] for choice in got] == list(cases.values())
    assert all(choice["automatic"] == choice["threads"] for choice in got)


def test_a_setting_is_honoured_below_the_pool_and_clamped_above_it() -> None:
    cases = {(8, True, 1): 1, (8, True, 4): 4, (8, True, 9): 9, (8, True, 40): 9, (8, False, 4): 1}
    got = threads_for(list(cases))
    assert [choice["threads"] for choice in got] == list(cases.values())
    assert [(choice["automatic"], choice["most"]) for choice in got[:4]] == [(7, 9)] * 4


class ReportedCores:
    """Makes a page and every worker it starts, at any depth, report ``cores`` cores
    (navigator.hardwareConcurrency), as a machine with that many would.

    CDP's Emulation.setHardwareConcurrencyOverride reaches one target: the page's does not reach
    its workers (Chromium 156), where the engine chooses its threads and llama.cpp sizes its pool.
    So each worker is paused as it starts (Target.setAutoAttach), given the override and let go;
    a worker's own workers are reached through its session (Target.sendMessageToTarget).
    """

    AUTO_ATTACH = {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": False}
    RELAY = "Target.sendMessageToTarget"

    def __init__(self, page: Any, cores: int) -> None:
        self.override = {"hardwareConcurrency": cores}
        self.ids = itertools.count(1)
        self.root = page.context.new_cdp_session(page)
        self.root.on("Target.attachedToTarget", lambda event: self.started([event["sessionId"]]))
        self.root.on(
            "Target.receivedMessageFromTarget",
            lambda event: self.heard([event["sessionId"]], json.loads(event["message"])),
        )
        self.root.send("Emulation.setHardwareConcurrencyOverride", self.override)
        self.root.send("Target.setAutoAttach", self.AUTO_ATTACH)

    def send(self, path: list[str], method: str, params: dict[str, Any]) -> None:
        """``method`` to the target at the end of ``path`` (session ids from the page down)."""
        message = {"id": next(self.ids), "method": method, "params": params}
        for session in reversed(path):  # wrapped for each session on the way, the last first
            relayed = {"sessionId": session, "message": json.dumps(message)}
            message = {"id": next(self.ids), "method": self.RELAY, "params": relayed}
        self.root.send(message["method"], message["params"])

    def started(self, path: list[str]) -> None:
        self.send(path, "Emulation.setHardwareConcurrencyOverride", self.override)
        self.send(path, "Target.setAutoAttach", self.AUTO_ATTACH)
        self.send(path, "Runtime.runIfWaitingForDebugger", {})

    def heard(self, path: list[str], message: dict[str, Any]) -> None:
        params = message.get("params", {})
        if message.get("method") == "Target.attachedToTarget":
            self.started([*path, params["sessionId"]])
        elif message.get("method") == "Target.receivedMessageFromTarget":  # from a worker's worker
            self.heard([*path, params["sessionId"]], json.loads(params["message"]))


def open_reporting(page: Any, url: str, cores: int, settings: dict[str, Any]) -> dict[str, Any]:
    """The page on a browser that reports ``cores`` cores, with these user settings; the
    engine it reports at ready."""
    ReportedCores(page, cores)
    page.add_init_script(
        f"localStorage.setItem('agent_py.settings', {json.dumps(json.dumps(settings))});"
    )
    page.add_init_script(KEEP_MODEL_TEXTS)
    page.goto(url)
    page.wait_for_function("document.body.dataset.status === 'ready'", timeout=GUARD_MS)
    reported = page.evaluate("navigator.hardwareConcurrency")
    assert reported == cores
    return dict(page.evaluate("window.agentApp.engine"))


def loaded_threads(page: Any) -> int:
    """The threads llama.cpp loaded the model with, as the engine reports them."""
    loaded = r" loaded \((\d+) threads?"  # the same in JavaScript
    page.wait_for_function(
        "pattern => window.modelTexts.some((t) => new RegExp(pattern).test(t))",
        arg=loaded,
        timeout=GUARD_MS,
    )
    texts = page.evaluate("window.modelTexts")
    return next(int(m.group(1)) for t in texts if (m := re.search(loaded, t)))


@pytest.mark.browser
@pytest.mark.slow
def test_a_page_that_reports_8_cores_runs_the_engine_on_7_threads(
    page: Any, page_url: Any, cpu_model: Path
) -> None:
    engine = open_reporting(page, page_url("index.html"), 8, {"engine": "cpu", "cpu_model": SMALL})
    assert engine["threads"] == {"used": 7, "automatic": 7, "most": 9, "cores": 8, "isolated": True}
    assert engine["label"] == "CPU engine (llama.cpp in WebAssembly, 7 threads)"
    # Settings says what 0 (automatic) gives here, and the most it takes.
    field = page.locator("#setting-cpu-threads")
    assert field.get_attribute("placeholder") == "automatic: 7 of 8 cores"
    assert field.get_attribute("max") == "9"
    assert "7 of the 8 cores" in page.locator("#cpu-threads-hint").text_content()
    assert loaded_threads(page) == 7


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize(("setting", "threads"), [(1, 1), (40, 9)])
def test_the_threads_setting_is_honoured_and_clamped_to_the_pool(
    page: Any, page_url: Any, cpu_model: Path, setting: int, threads: int
) -> None:
    settings = {"engine": "cpu", "cpu_model": SMALL, "cpu_threads": setting}
    engine = open_reporting(page, page_url("index.html"), 8, settings)
    assert engine["threads"]["used"] == threads
    assert engine["label"].endswith(f"{threads} thread{'s' if threads > 1 else ''})")
    assert loaded_threads(page) == threads
