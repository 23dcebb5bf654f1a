"""WebLLM on a real GPU: what a user of the page gets with Qwen3-4B.

For a maintainer with a GPU, Google Chrome (or Chromium) with WebGPU, and internet for the
first download of the model (about 2.3 GB into the browser profile's cache; each of the two
browser sessions below starts from a fresh profile, so it downloads once per session):

    .venv/bin/python scripts/webllm_check.py --browser /usr/bin/google-chrome
    .venv/bin/python scripts/webllm_check.py --browser /usr/bin/google-chrome --headed \\
        --browser-arg=--enable-features=Vulkan --tier full

It opens the page with the WebLLM engine and prints:
1. the adapter and what the page decided about it (a software adapter is refused);
2. per residency policy (keep_warm, auto, per_step), one short task: reloads and the time
   each took, model calls, decode tokens/s (median over the calls), the task's time, and GPU
   memory (nvidia-smi, whole GPU, sampled twice a second; "not measured" without it);
3. the real-task suite (`python -m agent_py eval --engine webllm`) with its score per tier.

It prints numbers and never fails on time: exit 0 when everything ran, 1 when WebLLM cannot
run in this browser (the page's reason is printed), 2 on a set-up problem.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from agent_py.cli.main import allow_weights_download
from agent_py.cli.terminal import PageAgent, SetupError

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_MODEL = "Qwen3-4B-q4f16_1-MLC"
POLICIES = ("keep_warm", "auto", "per_step")
# Two model calls at least (a plan, then a rethink or an answer) and one JavaScript step.
TASK = "Use JavaScript to compute the sum of the squares of 1 to 10, then say the result."


class GpuMemory:
    """Whole-GPU memory in MiB from nvidia-smi, sampled in a thread while a run goes on."""

    def __init__(self) -> None:
        self.tool = shutil.which("nvidia-smi")
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def now(self) -> int | None:
        if not self.tool:
            return None
        try:
            out = subprocess.run(
                [self.tool, "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout
            return sum(int(line) for line in out.split() if line.strip().isdigit())
        except (OSError, subprocess.SubprocessError, ValueError):
            return None

    def __enter__(self) -> GpuMemory:
        self.samples = []
        self._stop.clear()

        def sample() -> None:
            while not self._stop.wait(0.5):
                value = self.now()
                if value is not None:
                    self.samples.append(value)

        if self.tool:
            self._thread = threading.Thread(target=sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()

    def peak(self) -> str:
        return f"{max(self.samples)} MiB" if self.samples else "not measured"


def set_residency(agent: PageAgent, policy: str) -> None:
    """Choose the policy in the settings form, as a user would."""
    page = agent.page
    page.locator("#settings-details").evaluate("details => { details.open = true; }")
    page.select_option("#setting-residency", policy)
    page.get_by_role("button", name="Save settings").click()
    page.wait_for_function(
        "document.getElementById('settings-saved').textContent.startsWith('Saved')"
    )
    page.evaluate("document.getElementById('settings-saved').textContent = ''")


def run_policy(agent: PageAgent, policy: str, gpu: GpuMemory, timeout_s: float) -> dict[str, Any]:
    set_residency(agent, policy)
    decode: list[float] = []

    def on_event(raw: dict[str, Any]) -> None:
        usage = (raw.get("meta") or {}).get("usage") or {}
        if raw.get("type") == "assistant" and usage.get("decode_tokens_per_s"):
            decode.append(float(usage["decode_tokens_per_s"]))

    agent.on_event = on_event
    before = agent.page.evaluate("window.agentApp.engineCounts()")
    started = time.perf_counter()
    with gpu:
        result = agent.run(TASK, timeout_s=timeout_s) or {}
    seconds = time.perf_counter() - started
    after = agent.page.evaluate("window.agentApp.engineCounts()")
    reload_ms = after["reload_ms"][len(before["reload_ms"]) :]
    stats = result.get("stats") or {}
    return {
        "policy": policy,
        "state": result.get("state", "no result"),
        "answer": " ".join(str(result.get("answer") or result.get("error") or "").split())[:80],
        "reloads": after["reloads"] - before["reloads"],
        "unloads": after["unloads"] - before["unloads"],
        "reload_s": [round(ms / 1000, 1) for ms in reload_ms],
        "model_calls": sum((stats.get("model_calls") or {}).values()),
        "decode_tok_s": round(statistics.median(decode), 1) if decode else None,
        "seconds": round(seconds, 1),
        "gpu_peak": gpu.peak(),
        "gpu_after": f"{gpu.now()} MiB" if gpu.tool else "not measured",
    }


def check_residency(args: argparse.Namespace) -> int:
    gpu = GpuMemory()
    browser_args = ["--enable-unsafe-webgpu", *args.browser_arg]
    print(f"GPU memory before the browser starts: {gpu.now() if gpu.tool else 'not measured'}")
    with PageAgent(
        engine="webllm",
        settings={"model": args.model, "residency": "keep_warm"},
        browser_path=args.browser,
        headed=args.headed,
        browser_args=browser_args,
    ) as agent:
        detected = agent.page.evaluate(
            "import('./worker/engines/gpu.js').then((gpu) => gpu.detectWebGPU())"
        )
        print(f"adapter: {detected.get('adapter') or 'none'}; shader-f16: {detected.get('f16')}")
        print(f"engine: {agent.engine.get('label')}; usable: {agent.usable}")
        if agent.engine.get("reason"):
            print(f"note: {agent.engine['reason']}")
        if detected.get("software"):
            print(f"WebLLM cannot be measured here: {detected['reason']}", file=sys.stderr)
            return 1
        if not agent.usable:
            print(f"WebLLM cannot run here: {agent.why_unusable()}", file=sys.stderr)
            return 1
        vram = agent.page.evaluate(
            """model => import('./worker/engines/webllm.js').then(
                (m) => m.PREBUILT_MODELS.find((p) => p.id === model)?.vram_mb ?? null)""",
            args.model,
        )
        print(f"WebLLM's estimate of GPU memory for {args.model}: {vram} MB")

        print("\nwarm-up (the first load downloads the model unless the profile has it)…")
        warm = run_policy(agent, "keep_warm", gpu, args.timeout)
        print(f"  {warm['state']} in {warm['seconds']} s; first load {warm['reload_s']} s")

        rows = [run_policy(agent, policy, gpu, args.timeout) for policy in POLICIES]
    print(
        f"\n{'residency':<10} {'state':<10} {'reloads':>7} {'reload s each':<22} "
        f"{'calls':>5} {'decode tok/s':>12} {'task s':>7} {'GPU peak':>12} {'GPU after':>12}"
    )
    for row in rows:
        each = ", ".join(f"{s:g}" for s in row["reload_s"][:6]) or "-"
        if len(row["reload_s"]) > 6:
            each += ", …"
        print(
            f"{row['policy']:<10} {row['state']:<10} {row['reloads']:>7} {each:<22} "
            f"{row['model_calls']:>5} {row['decode_tok_s'] or '-':>12} {row['seconds']:>7} "
            f"{row['gpu_peak']:>12} {row['gpu_after']:>12}"
        )
    for row in rows:
        print(f"  {row['policy']}: {row['answer']}")
    out = ROOT / ".artifacts" / "webllm_check.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"model": args.model, "warm_up": warm, "policies": rows}, indent=1))
    print(f"numbers kept in {out}")
    return 0


def run_suite(args: argparse.Namespace) -> int:
    command = [
        sys.executable,
        "-m",
        "agent_py",
        "eval",
        "--engine",
        "webllm",
        "--tier",
        args.tier,
        "--settings",
        json.dumps({"model": args.model}),
        "--timeout",
        str(args.timeout),
        "--min-score",
        "0",
    ]
    if args.browser:
        command += ["--browser", args.browser]
    if args.headed:
        command.append("--headed")
    command += [f"--browser-arg={flag}" for flag in args.browser_arg]
    print(f"\nthe real-task suite: {' '.join(command[1:])}", flush=True)
    return subprocess.run(command, cwd=ROOT).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--browser", help="Chrome or Chromium with WebGPU (default: Chromium)")
    parser.add_argument("--browser-arg", action="append", default=[], help="extra browser flag")
    parser.add_argument("--headed", action="store_true", help="show the browser window")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="WebLLM model id")
    parser.add_argument("--tier", choices=["small", "full"], default="full")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per task (guard)")
    parser.add_argument("--skip-suite", action="store_true", help="only the residency part")
    args = parser.parse_args(argv)
    allow_weights_download()  # the first run downloads Qwen3-4B from the internet
    try:
        code = check_residency(args)
    except SetupError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if code != 0 or args.skip_suite:
        return code
    return 0 if run_suite(args) in (0, 1) else 2


if __name__ == "__main__":
    sys.exit(main())
