"""Benchmark of the page in headless Chromium (numbers only; never fails on time). One
script, over 400 lines: each measurement below is a function of it, run from one command.

Prints, in one run:
- time to a bare Pyodide (web/dev/bare_pyodide.html: loadPyodide() alone in a worker, with the
  stock standard library, and with the compiled one the page uses) versus time to "agent
  ready" on the page (packages loaded, agent_py imported, engine and bridge up), cold (a
  fresh browser profile) and cached (a second visit, files from the service worker), and the
  ratios; each cold visit in its own profile, so none warms another's cache;
- where the agent's boot goes, phase by phase (web/worker/agent.js measures them);
- the longest main-thread stall while the page boots (long tasks and the largest gap between
  animation frames), showing what moving Pyodide into a worker buys;
- the per-step orchestration overhead inside Pyodide with the scripted engine: the run's time
  outside the engine per step, one sample per step, taken per task since a task's steps run
  together (web/worker/agent.js, stepClock): p50 and p95, of all runs and of those after the first
  five (the first runs after a boot pay for code that runs for the first time, JIT tiers
  included), and of the first task's steps (they carry the planning) against the later
  tasks'; next to the average per step in CPython.
- with ``--threads``: where the CPU goes while runs go on, from a CDP trace of a few runs
  after RUNS: the worker's CPU time against its busy time (the rest it spent waiting for a
  core), and the CPU time of the busiest other threads of the browser.

- with ``--soak N`` only: N scripted runs in one page, and what grows per run (the DOM's nodes,
  the memory of the page and its workers, IndexedDB's size).

Run: ``.venv/bin/python scripts/bench_page.py [--rounds N] [--steps-only] [--threads]
[--soak N]``
(after ``bash scripts/setup.sh --browser``). With several rounds, each number is the median.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# This checkout's page and package, not whichever agent_py the environment installed (a git
# worktree shares the main checkout's virtual environment and its editable install).
sys.path.insert(0, str(ROOT))

from agent_py.cli.checkout import load_browser_config  # noqa: E402
from agent_py.cli.web_server import start_server  # noqa: E402

STEPS = 9  # three tasks of three generator steps
RUNS = 20
WARM_UP_RUNS = 5  # the first runs after boot, when much of the code runs for the first time
TASK_STEPS = 3  # each task of the scripted plan; a run's first task carries the planning
TRACED_RUNS = 5


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
  if (window.agentApp?.state() !== "ready") requestAnimationFrame(frame);
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
    page.wait_for_function("window.agentApp?.state() === 'ready'", timeout=config.BOOT_TIMEOUT_MS)
    wall_ms = (time.perf_counter() - started) * 1000
    stalls = page.evaluate("window.__stalls")  # the boot's, not what follows it
    page.wait_for_function(
        "window.agentApp.timings.warm_after_ready_ms !== undefined",
        timeout=config.BOOT_TIMEOUT_MS,
    )
    timings = page.evaluate("window.agentApp.timings")
    return {"wall_ms": wall_ms, **timings, **(stalls or {})}


def bare_boot(page: Any, url: str) -> float:
    page.goto(url)
    page.wait_for_function(
        "document.body.dataset.status !== 'booting'", timeout=config.BOOT_TIMEOUT_MS
    )
    report = page.evaluate("window.bareBoot")
    if "error" in report:
        raise RuntimeError(f"bare Pyodide failed: {report['error']}")
    return float(report["pyodide_ms"])


def wait_offline_copy(page: Any) -> None:
    """Let the service worker finish precaching, so the next visit is the cached one."""
    page.wait_for_function(
        "document.body.dataset.offline === 'ready'", timeout=config.BOOT_TIMEOUT_MS
    )


REPLIES = {
    "plan": plan_reply(),
    "generate": "text",
    "rethink": "<status>continue</status>",
    "answer": "done",
}


def run_once(page: Any) -> dict[str, Any]:
    """One scripted run of STEPS steps in the page; its result."""
    page.evaluate("r => window.agentApp.setScript(r)", REPLIES)
    result: dict[str, Any] | None = page.evaluate("window.agentApp.run('bench')")
    if result is None or result["stats"]["steps_run"] != STEPS:
        raise RuntimeError(f"the scripted run did not run {STEPS} steps: {result}")
    return result


def in_page_overhead(page: Any) -> tuple[list[float], list[float], list[int]]:
    """Per-step orchestration overhead samples (ms) of RUNS runs of STEPS steps, each run's
    average per step as Python measures it (the engine bridge counts as model time), and the
    drains of each run's event loop (agent_py/page/loop.py)."""
    samples: list[float] = []
    averages: list[float] = []  # per run, as Python sees it (wall less model time, per step)
    drains: list[int] = []
    for _ in range(RUNS):
        result = run_once(page)
        overhead = page.evaluate("window.agentApp.lastOverhead")
        if overhead["drains"] is None:
            raise RuntimeError("the page's event loop is not agent_py's BatchedWebLoop")
        samples += overhead["step_ms"]
        drains.append(overhead["drains"])
        stats = result["stats"]
        averages.append((stats["wall_time_s"] - stats["model_time_s"]) / STEPS * 1000)
    return samples, averages, drains


def cpython_overhead() -> float:
    from agent_py import Agent, AgentConfig, LLMGenerator, ResidencyPolicy, ScriptedLLM

    async def once() -> float:
        llm = ScriptedLLM.replaying(REPLIES)
        config = AgentConfig(residency=ResidencyPolicy.KEEP_WARM)
        result = await Agent(llm=llm, tools=[LLMGenerator()], config=config).task("bench")
        return (result.stats.wall_time_s - result.stats.model_time_s) / STEPS * 1000

    return statistics.median(asyncio.run(once()) for _ in range(RUNS))


def after_warm_up(steps: list[float]) -> list[float]:
    """The samples of the runs after the first WARM_UP_RUNS."""
    return steps[WARM_UP_RUNS * STEPS :]


def first_task_and_later(steps: list[float]) -> tuple[list[float], list[float]]:
    """The samples of the runs' first tasks (planning included) and of their later tasks."""
    first = [s for i, s in enumerate(steps) if i % STEPS < TASK_STEPS]
    later = [s for i, s in enumerate(steps) if i % STEPS >= TASK_STEPS]
    return first, later


def steady_figures(steps: list[float]) -> str:
    """The runs after the warm-up: p50 and p95 of all their steps, and the p50 of their first
    tasks' steps (planning included) and of the later tasks'."""
    steady = after_warm_up(steps)
    first, later = first_task_and_later(steady)
    return (
        f"p50 {percentile(steady, 0.5):.2f} ms, p95 {percentile(steady, 0.95):.2f} ms"
        f" (first task, planning included: p50 {percentile(first, 0.5):.2f} ms;"
        f" later tasks: p50 {percentile(later, 0.5):.2f} ms)"
    )


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def one_round(playwright: Any, base: str, overhead: bool) -> dict[str, Any]:
    """Bare Pyodide (stock and compiled standard library) and the agent page, cold then
    cached, each cold visit in a fresh profile."""
    agent_url = f"{base}index.html?engine=scripted"
    bare_url = f"{base}dev/bare_pyodide.html"
    compiled_url = f"{bare_url}?stdlib=compiled"
    measured: dict[str, Any] = {}
    profiles: list[str] = []

    def fresh_page() -> tuple[Any, Any]:
        profiles.append(tempfile.mkdtemp())
        context = playwright.chromium.launch_persistent_context(
            profiles[-1], **config.launch_options()
        )
        return context, context.new_page()

    context, page = fresh_page()
    measured["bare_cold"] = bare_boot(page, bare_url)
    boot(page, agent_url)  # installs the service worker, as the agent page's visit does
    wait_offline_copy(page)
    measured["bare_cached"] = bare_boot(page, bare_url)
    measured["compiled_cached"] = bare_boot(page, compiled_url)
    context.close()
    context, page = fresh_page()
    measured["compiled_cold"] = bare_boot(page, compiled_url)
    context.close()
    context, page = fresh_page()
    context.add_init_script(STALL_PROBE)
    measured["cold"] = boot(page, agent_url)
    wait_offline_copy(page)
    measured["cached"] = boot(page, agent_url)
    measured["steps"], measured["run_averages"], measured["drains"] = (
        in_page_overhead(page) if overhead else ([], [], [])
    )
    context.close()
    for profile in profiles:
        shutil.rmtree(profile, ignore_errors=True)
    return measured


def steps_only(playwright: Any, base: str, rounds: int) -> None:
    """The per-step overhead of ``rounds`` rounds of RUNS runs, each round on a fresh page."""
    p50s: list[float] = []
    p95s: list[float] = []
    steady_p95s: list[float] = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as profile:
            context = playwright.chromium.launch_persistent_context(
                profile, **config.launch_options()
            )
            page = context.new_page()
            boot(page, f"{base}index.html?engine=scripted")
            steps, averages, drains = in_page_overhead(page)
            context.close()
        p50s.append(percentile(steps, 0.5))
        p95s.append(percentile(steps, 0.95))
        steady_p95s.append(percentile(after_warm_up(steps), 0.95))
        print(
            f"Pyodide (page)  p50 {p50s[-1]:6.2f} ms  p95 {p95s[-1]:6.2f} ms"
            f"  (max {max(steps):.2f}; Python's view {statistics.median(averages):.2f} ms/step;"
            f" {statistics.median(drains):.0f} loop drains a run)"
            f"\n  after {WARM_UP_RUNS} runs: {steady_figures(steps)}"
        )
    print(
        f"median of {rounds} round(s) of {RUNS} runs of {STEPS} steps:"
        f" p50 {statistics.median(p50s):.2f} ms, p95 {statistics.median(p95s):.2f} ms"
        f" (after {WARM_UP_RUNS} runs: p95 {statistics.median(steady_p95s):.2f});"
        " target p95 <= 2"
    )


def threads_cpu(trace: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """CPU and busy time (ms) of each thread in a Chrome trace, by "process/thread" name:
    the sums over its outermost slices of their thread time and wall time."""
    names: dict[tuple[int, int], str] = {}
    processes: dict[int, str] = {}
    slices: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for event in trace:
        where = (event.get("pid", 0), event.get("tid", 0))
        if event.get("ph") == "M" and event.get("name") == "thread_name":
            names[where] = event["args"]["name"]
        elif event.get("ph") == "M" and event.get("name") == "process_name":
            processes[where[0]] = event["args"]["name"]
        elif event.get("ph") == "X" and "dur" in event:
            slices[where].append(event)
    totals: dict[str, tuple[float, float]] = {}
    for where, events in slices.items():
        events.sort(key=lambda e: (e["ts"], -e["dur"]))
        end, cpu, busy = -1.0, 0.0, 0.0
        for event in events:
            if event["ts"] >= end:  # not inside the slice before
                cpu += event.get("tdur", 0)
                busy += event["dur"]
                end = event["ts"] + event["dur"]
        name = f"{processes.get(where[0], where[0])}/{names.get(where, where[1])}"
        was_cpu, was_busy = totals.get(name, (0.0, 0.0))  # a pool's threads add up
        totals[name] = (was_cpu + cpu / 1000, was_busy + busy / 1000)
    return totals


def threads(playwright: Any, base: str) -> list[str]:
    """Where the CPU goes while the page runs, from a CDP trace of TRACED_RUNS runs after RUNS:
    the lines to print."""
    browser = playwright.chromium.launch(**config.launch_options())
    try:
        page = browser.new_context().new_page()
        boot(page, f"{base}index.html?engine=scripted")
        for _ in range(RUNS):  # the code paths and the JIT warm first
            run_once(page)
        cdp = browser.new_browser_cdp_session()
        trace: list[dict[str, Any]] = []
        complete: list[bool] = []
        cdp.on("Tracing.dataCollected", lambda data: trace.extend(data["value"]))
        cdp.on("Tracing.tracingComplete", lambda _: complete.append(True))
        categories = ["toplevel", "v8", "devtools.timeline", "disabled-by-default-v8.gc"]
        cdp.send(
            "Tracing.start",
            {"traceConfig": {"includedCategories": categories}, "transferMode": "ReportEvents"},
        )
        for _ in range(TRACED_RUNS):
            run_once(page)
        cdp.send("Tracing.end")
        while not complete:  # the trace arrives in events; only a guard against a hang
            page.wait_for_timeout(50)
    finally:
        browser.close()
    totals = threads_cpu(trace)
    workers = [name for name in totals if name.endswith("/DedicatedWorker thread")]
    agent = max(workers, key=lambda name: totals[name][0])  # the busiest: the agent's
    cpu, busy = totals[agent]
    lines = [
        f"CPU per run during {TRACED_RUNS} scripted runs after {RUNS} (CDP trace):",
        f"  agent worker  {cpu / TRACED_RUNS:6.1f} ms of CPU in {busy / TRACED_RUNS:.1f} ms busy"
        f" ({1 - cpu / max(busy, 1e-9):.0%} of it waiting for a core)",
    ]
    others = sorted(((t[0], name) for name, t in totals.items() if name != agent), reverse=True)
    lines += [f"  {cpu / TRACED_RUNS:6.1f} ms  {name}" for cpu, name in others[:6]]
    return lines


def median_of(rounds: list[dict[str, Any]], *path: str) -> float:
    values = []
    for measured in rounds:
        value: Any = measured
        for key in path:
            value = value.get(key, 0) if isinstance(value, dict) else 0
        values.append(float(value or 0))
    return statistics.median(values)


SOAK_PROBE = """async () => {
    const estimate = await navigator.storage.estimate();
    let memory = null;
    const by = {};
    if (self.crossOriginIsolated && performance.measureUserAgentSpecificMemory) {
        const measured = await performance.measureUserAgentSpecificMemory();
        memory = measured.bytes;
        for (const part of measured.breakdown) {
            const where = part.attribution.map((a) => a.scope + " " +
                (a.url || "").split("/").slice(-1)[0]).join(", ") || "shared";
            const kind = part.types.join("+") || "?";
            by[`${where} (${kind})`] = (by[`${where} (${kind})`] || 0) + part.bytes;
        }
    }
    return {
        dom_nodes: document.getElementsByTagName("*").length,
        js_heap: performance.memory ? performance.memory.usedJSHeapSize : null,
        memory,  // the page and its workers (Pyodide's wasm memory included)
        indexeddb: (estimate.usageDetails || {}).indexedDB ?? null,
        by,
    };
}"""


def soak(playwright: Any, base: str, runs: int, every: int) -> list[str]:
    """``runs`` scripted runs in one page: the DOM's nodes, the memory of the page and its
    workers, and IndexedDB's size every ``every`` runs, and their growth per run."""
    lines = []
    with tempfile.TemporaryDirectory() as profile:
        context = playwright.chromium.launch_persistent_context(profile, **config.launch_options())
        page = context.new_page()
        boot(page, f"{base}index.html?engine=scripted")
        samples = [(0, page.evaluate(SOAK_PROBE))]
        for run in range(1, runs + 1):
            run_once(page)
            if run % every == 0 or run == runs:
                samples.append((run, page.evaluate(SOAK_PROBE)))
                shown = {k: v for k, v in samples[-1][1].items() if k != "by"}
                lines.append(f"  after {run:4d} runs: {shown}")
        page.reload()
        page.wait_for_function(
            "window.agentApp?.state() === 'ready'", timeout=config.BOOT_TIMEOUT_MS
        )
        sessions = page.locator("#sessions").inner_text()
        context.close()
    (first_run, first), (last_run, last) = samples[1], samples[-1]
    span = max(last_run - first_run, 1)
    lines.append(f"growth per run, runs {first_run}-{last_run}:")
    for key in ("dom_nodes", "js_heap", "memory", "indexeddb"):
        if first[key] is None or last[key] is None:
            lines.append(f"  {key:10s} not measured here")
            continue
        lines.append(
            f"  {key:10s} {(last[key] - first[key]) / span:12.1f} (at the end {last[key]})"
        )
    lines.append("memory by where it is (growth per run, at the end):")
    for where in sorted(last["by"], key=lambda w: -last["by"][w]):
        grown = (last["by"][where] - first["by"].get(where, 0)) / span
        lines.append(f"  {where:60s} {grown:10.1f} {last['by'][where]:12d}")
    lines.append(f"after a reload, the sessions list: {sessions!r}")
    return lines


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1, help="rounds to take the median of")
    parser.add_argument(
        "--steps-only",
        action="store_true",
        help="only the per-step overhead, after one boot (a quick check of a change to it)",
    )
    parser.add_argument(
        "--threads",
        action="store_true",
        help="also trace a few runs: the worker's CPU time and the busiest other threads",
    )
    parser.add_argument(
        "--soak",
        type=int,
        metavar="N",
        help="only N scripted runs in one page: what grows per run (DOM, memory, IndexedDB)",
    )
    args = parser.parse_args()

    server, base = start_server(port=0)
    if args.soak:
        with sync_playwright() as playwright:
            report = soak(playwright, base, args.soak, every=max(args.soak // 10, 1))
        server.shutdown()
        print(f"{args.soak} scripted runs of {STEPS} steps in one page (headless Chromium)")
        print("\n".join(report))
        return
    if args.steps_only:
        with sync_playwright() as playwright:
            steps_only(playwright, base, args.rounds)
            traced = threads(playwright, base) if args.threads else []
        server.shutdown()
        print("\n".join(traced))
        print(f"CPython {cpython_overhead():.2f} ms/step")
        return
    with sync_playwright() as playwright:
        # A warm-up visit, not measured: the first browser start of a run pays for disk reads.
        with tempfile.TemporaryDirectory() as profile:
            context = playwright.chromium.launch_persistent_context(
                profile, **config.launch_options()
            )
            bare_boot(context.new_page(), f"{base}dev/bare_pyodide.html")
            context.close()
        rounds = [
            one_round(playwright, base, overhead=(i == args.rounds - 1)) for i in range(args.rounds)
        ]
        traced = threads(playwright, base) if args.threads else []
    server.shutdown()

    print(f"agent_py page benchmark (headless Chromium, scripted engine, {args.rounds} round(s))\n")
    print(f"{'':30s}{'cold':>10s}{'cached':>10s}")
    bare = {v: median_of(rounds, f"bare_{v}") for v in ("cold", "cached")}
    compiled = {v: median_of(rounds, f"compiled_{v}") for v in ("cold", "cached")}
    ready = {v: median_of(rounds, v, "agent_ready_ms") for v in ("cold", "cached")}
    print(f"{'bare Pyodide (ms)':30s}{bare['cold']:10.0f}{bare['cached']:10.0f}")
    print(f"{'  compiled stdlib (ms)':30s}{compiled['cold']:10.0f}{compiled['cached']:10.0f}")
    print(f"{'agent ready (ms)':30s}{ready['cold']:10.0f}{ready['cached']:10.0f}")
    ratio = {v: ready[v] / bare[v] for v in ("cold", "cached")}
    added = {v: ready[v] / compiled[v] for v in ("cold", "cached")}
    print(f"{'ratio to bare (<= 1.25)':30s}{ratio['cold']:10.2f}{ratio['cached']:10.2f}")
    print(f"{'ratio to compiled stdlib':30s}{added['cold']:10.2f}{added['cached']:10.2f}")
    for label, key in [
        ("page to ready (ms)", "wall_ms"),
        ("longest task (ms)", "longest_task_ms"),
        ("longest frame gap", "longest_frame_gap_ms"),
    ]:
        print(
            f"{label:30s}{median_of(rounds, 'cold', key):10.0f}"
            f"{median_of(rounds, 'cached', key):10.0f}"
        )
    print("\nagent boot phases (ms; *_at: since the boot's start, overlapping the phases)")
    for name in rounds[0]["cold"].get("phases", {}):
        print(
            f"  {name:22s}{median_of(rounds, 'cold', 'phases', name):10.0f}"
            f"{median_of(rounds, 'cached', 'phases', name):10.0f}"
        )
    warm = {v: median_of(rounds, v, "warm_after_ready_ms") for v in ("cold", "cached")}
    print(f"  {'warm-up after ready':22s}{warm['cold']:10.0f}{warm['cached']:10.0f}")
    steps = rounds[-1]["steps"]
    p50, p95 = percentile(steps, 0.5), percentile(steps, 0.95)
    print(
        f"\norchestration overhead per step, engine time excluded "
        f"({len(steps)} steps of {RUNS} runs):"
        f"\n  Pyodide (page)  p50 {p50:6.2f} ms  p95 {p95:6.2f} ms"
        f"  (max {max(steps):.2f}; target p95 <= 2)"
        f"\n  after {WARM_UP_RUNS} runs   {steady_figures(steps)}"
        f"\n  Pyodide (page)  {statistics.median(rounds[-1]['run_averages']):6.2f} ms/step "
        "(median run average, as Python sees it: model time and bridge excluded)"
        f"\n  event loop      {statistics.median(rounds[-1]['drains']):6.0f} drains"
        " a run (agent_py/page/loop.py)"
        f"\n  CPython         {cpython_overhead():6.2f} ms/step (the same)"
    )
    if traced:
        print("\n" + "\n".join(traced))


if __name__ == "__main__":
    main()
