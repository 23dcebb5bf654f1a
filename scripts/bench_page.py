"""Benchmark of the page in headless Chromium (numbers only; never fails on time).

Prints, in one run:
- time to a bare Pyodide (loadPyodide done) versus time to "agent ready" (wheels loaded,
  agent_py imported, bridge up), cold (empty browser cache) and cached (second visit);
- the longest main-thread stall while the page boots (long tasks and the largest gap between
  animation frames), showing what moving Pyodide into a worker buys;
- the per-step orchestration overhead inside Pyodide with the scripted engine (wall time minus
  model time, per step), next to the same in CPython.

Run: ``.venv/bin/python scripts/bench_page.py`` (after ``bash scripts/setup.sh --browser``).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agent_py.terminal import load_browser_config
from agent_py.web_server import start_server

ROOT = Path(__file__).resolve().parents[1]
STEPS = 9  # three tasks of three generator steps
RUNS = 3


config = load_browser_config()

# Installed before any page script: records long tasks and the largest frame gap until ready.
STALL_PROBE = """
window.__stalls = {longest_task_ms: 0, longest_frame_gap_ms: 0};
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    window.__stalls.longest_task_ms = Math.max(window.__stalls.longest_task_ms, entry.duration);
  }
}).observe({type: "longtask", buffered: true});
let last = performance.now();
const frame = (now) => {
  window.__stalls.longest_frame_gap_ms = Math.max(window.__stalls.longest_frame_gap_ms, now - last);
  last = now;
  if (document.body?.dataset.status !== "ready") requestAnimationFrame(frame);
};
requestAnimationFrame(frame);
"""


def plan_reply() -> str:
    tasks = []
    for t in range(3):
        steps = [
            {
                "step_id": f"s{t * 3 + i + 1}",
                "step_goal": "write",
                "tool_name": "llm_generator",
                "tool_intent": "bench",
                "expected_output": "text",
                "arguments": {"prompt": f"write {t * 3 + i}"},
            }
            for i in range(3)
        ]
        tasks.append({"task_id": f"t{t + 1}", "task_goal": "bench", "steps": steps})
    return f"<plan>{json.dumps({'tasks': tasks})}</plan>"


def boot(page: Any, url: str) -> dict[str, Any]:
    started = time.perf_counter()
    page.goto(url)
    page.wait_for_function(
        "document.body.dataset.status === 'ready'", timeout=config.BOOT_TIMEOUT_MS
    )
    wall_ms = (time.perf_counter() - started) * 1000
    timings = page.evaluate("window.agentApp.timings")
    stalls = page.evaluate("window.__stalls")
    return {"wall_ms": wall_ms, **timings, **stalls}


def in_page_overhead(page: Any) -> list[float]:
    replies = {
        "plan": plan_reply(),
        "generate": "text",
        "rethink": "<status>continue</status>",
        "answer": "done",
    }
    samples = []
    for _ in range(RUNS):
        page.evaluate("r => window.agentApp.setScript(r)", replies)
        page.evaluate("window.agentApp.lastResult = undefined; window.agentApp.run('bench')")
        page.wait_for_function("window.agentApp.lastResult !== undefined", timeout=120_000)
        stats = page.evaluate("window.agentApp.lastResult.stats")
        samples.append((stats["wall_time_s"] - stats["model_time_s"]) / stats["steps_run"] * 1000)
    return samples


def cpython_overhead() -> float:
    from agent_py import Agent, AgentConfig, LLMGenerator, ResidencyPolicy, ScriptedLLM

    async def once() -> float:
        llm = ScriptedLLM.replaying(
            {
                "plan": plan_reply(),
                "generate": "text",
                "rethink": "<status>continue</status>",
                "answer": "done",
            }
        )
        config = AgentConfig(residency=ResidencyPolicy.KEEP_WARM)
        result = await Agent(llm=llm, tools=[LLMGenerator()], config=config).task("bench")
        return (result.stats.wall_time_s - result.stats.model_time_s) / STEPS * 1000

    return statistics.median(asyncio.run(once()) for _ in range(RUNS))


def main() -> None:
    from playwright.sync_api import sync_playwright

    server, base = start_server(port=0)
    url = f"{base}index.html?engine=scripted"
    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as profile:
        context = playwright.chromium.launch_persistent_context(profile, **config.launch_options())
        context.add_init_script(STALL_PROBE)
        page = context.new_page()
        cold = boot(page, url)
        # Let the service worker finish precaching so the second visit is the cached one.
        page.wait_for_function(
            "document.body.dataset.offline === 'ready'", timeout=config.BOOT_TIMEOUT_MS
        )
        cached = boot(page, url)
        overhead = in_page_overhead(page)
        context.close()
    server.shutdown()

    print("agent_py page benchmark (headless Chromium, scripted engine)\n")
    print(f"{'':22s}{'cold':>10s}{'cached':>10s}")
    for label, key in [
        ("bare Pyodide (ms)", "pyodide_ms"),
        ("agent ready (ms)", "agent_ready_ms"),
        ("page to ready (ms)", "wall_ms"),
        ("longest task (ms)", "longest_task_ms"),
        ("longest frame gap", "longest_frame_gap_ms"),
    ]:
        print(f"{label:22s}{cold[key]:10.0f}{cached[key]:10.0f}")
    print(
        f"\norchestration overhead per step, model time excluded ({STEPS} steps, {RUNS} runs):"
        f"\n  Pyodide (page)  median {statistics.median(overhead):7.2f} ms/step "
        f"(min {min(overhead):.2f}, max {max(overhead):.2f})"
        f"\n  CPython         median {cpython_overhead():7.2f} ms/step"
    )


if __name__ == "__main__":
    main()
