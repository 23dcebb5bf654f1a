#!/usr/bin/env python3
"""How fast the CPU engine (llama.cpp built to WebAssembly by scripts/cpu_engine/build.sh) is
on this machine, in headless Chromium, against native llama.cpp with the same GGUF, prompt and
thread count.

    python scripts/bench_cpu_engine.py [--models ID,...] [--threads 1,2] [--repeat 3]
                                       [--no-plan] [--no-native] [--build relaxed|threads]
                                       [--prompt-times N] [--dot i16|i32] [--browser-arg FLAG]
                                       [--native-without-amx]

For each bundled model present in web/models and each thread count, in a fresh browser
context of web/dev/cpu_engine_harness.html served with COOP/COEP: the first load (download
into the engine's cache included), a load from that cache, prompt (prefill) and decode tokens
per second as the engine measures them, time to the first token, and one schema-constrained
plan.

Native llama.cpp is node-llama-cpp's prebuilt CPU binary (NATIVE_PACKAGES, installed once
into .artifacts/bench-native/, never into the project's environment; the same command by hand:
`npm install --prefix .artifacts/bench-native --omit=optional --ignore-scripts --save-exact
node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1`: 13 s, 80 MB), driven by
scripts/bench_native_llama.mjs, one run after each engine run (so both see the same load from
other processes). The table at the end gives engine / native per model and thread count.
Native llama.cpp loads the best of its builds for this CPU, which on an Intel Xeon with AMX (a
matrix unit WebAssembly has nothing like) is the AMX one; --native-without-amx runs a copy of
the package without that build (.artifacts/bench-native-no-amx/), so ggml takes the next best
(AVX-512 with VNNI there): the same CPU's native speed without AMX, for the ratio on CPUs that
have none (most desktops and laptops, AMD's).

The engine's line names the dot product form its Q4_1 kernels use (the relaxed build picks the
faster for the CPU: `--dot` forces one, and on an x86 CPU with AVX-VNNI
`--browser-arg=--js-flags=--no-enable-avx-vnni` shows what a CPU without it would run).

Numbers only: it never fails on time. Each rate is the median of --repeat runs (the best run in
brackets: other processes on the machine pull medians down; the load average is printed).

One script, over 400 lines: one job (the engine against native llama.cpp), each part of the
report a function of it, run from one command.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent_py.cli.checkout import load_browser_config  # noqa: E402
from agent_py.cli.web_server import start_server  # noqa: E402
from agent_py.core.plan import PlanShape, plan_json_schema  # noqa: E402

HARNESS = "dev/cpu_engine_harness.html"
MODELS_DIR = ROOT / "web" / "models"
NATIVE_DIR = ROOT / ".artifacts" / "bench-native"
NATIVE_SCRIPT = ROOT / "scripts" / "bench_native_llama.mjs"
# Pinned: node-llama-cpp and its prebuilt llama.cpp for x86-64 Linux (CPU only, no CUDA or
# Vulkan packages: --omit=optional keeps npm from pulling those in).
NATIVE_PACKAGES = ["node-llama-cpp@3.22.1", "@node-llama-cpp/linux-x64@3.22.1"]
# The pinned package's ggml CPU builds that use AMX (ggml loads the best one the CPU runs).
NATIVE_AMX_BUILDS = ("libggml-cpu-sapphirerapids.so",)
NATIVE_NO_AMX_DIR = ROOT / ".artifacts" / "bench-native-no-amx"

# The prompt as the engine's chat template renders it for one user message
# (web/worker/engines/cpu-gguf.js, chatTemplateFor), so native llama.cpp prefills the same text.
CHATML = "<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
TEMPLATES = {
    "gemma3-270m-q4_k_m": "<bos><start_of_turn>user\n{text}<end_of_turn>\n<start_of_turn>model\n",
    "smollm2-135m-instruct-q4_1": CHATML,
    "qwen2.5-coder-0.5b-instruct-q4_k_m": CHATML,
    "qwen2.5-coder-1.5b-instruct-q4_k_m": CHATML,
}
CONTEXT_WINDOW = 4096  # the engine's default contextWindow
DECODE_TOKENS = 32
# About 150 prompt tokens: long enough for the prefill rate to mean something.
PREFILL_TEXT = " ".join(
    [
        "The harbour town wakes before dawn: fishing boats leave the quay, the bakery lights",
        "its ovens, and the ferry to the islands sounds its horn twice. Market stalls fill the",
        "square by seven, selling mackerel, bread, lemons, rope and postcards. By noon the",
        "tourists arrive on the coastal train, walk to the lighthouse, eat ice cream on the",
        "pier and leave on the four o'clock service. In the evening the boats return, the",
        "gulls follow them in, and the harbour master writes the day's catch in a ledger",
        "that his grandfather started. Summarise the town's day in one sentence.",
    ]
)
PLAN_MESSAGES = [
    {
        "role": "system",
        "content": "You plan work for an agent with the tools llm_generator and "
        "javascript_execute. Reply with the JSON plan only.",
    },
    {"role": "user", "content": "Compute 17 * 23 with JavaScript."},
]

_prompts = itertools.count()


def prompt_text(times: int = 1) -> str:
    """A different first sentence each time, so no run finds its prompt in the KV cache; the
    text `times` over (about 130 tokens each)."""
    return f"Run {next(_prompts)}. " + " ".join([PREFILL_TEXT] * times)


def plan_schema() -> dict[str, Any]:
    return plan_json_schema(
        ["llm_generator", "javascript_execute"],
        PlanShape(max_tasks=1, max_steps_per_task=1, max_text_chars=40, with_arguments=False),
    )


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "best": max(values)}


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# --- the CPU engine, as the app runs it --------------------------------------


def chat(page: Any, model: str, messages: list[dict[str, str]], **call: Any) -> dict[str, Any]:
    return page.evaluate(
        "([m, c]) => cpu.chat(m, c)", [messages, {"model": model, "purpose": "bench", **call}]
    )


def bench_engine(
    browser: Any,
    base_url: str,
    model: str,
    threads: int,
    repeat: int,
    plan: bool,
    native: NativeLlama | None,
    build: str | None = None,
    prompt_times: int = 1,
    dot: str | None = None,
) -> dict:
    """The engine's rates; with `native`, a native run after each engine run (before it, every
    other turn), and the median of the paired engine / native ratios."""
    context = browser.new_context()
    context.set_default_timeout(600_000)
    page = context.new_page()
    try:
        page.goto(base_url + HARNESS)
        page.wait_for_selector("body[data-status='ready']")
        info = page.evaluate("cpu.info()")
        options = {"threads": threads, "seed": 1, "build": build, "dot": dot}
        page.evaluate("o => cpu.create(o)", {k: v for k, v in options.items() if v is not None})
        loaded = page.evaluate("m => cpu.reload(m)", model)
        first = loaded["seconds"]
        cached = []
        for _ in range(repeat):
            page.evaluate("cpu.unload()")
            cached.append(page.evaluate("m => cpu.reload(m)", model)["seconds"])
        chat(page, model, [{"role": "user", "content": "Hello"}], max_tokens=2)  # first-call costs
        if native:
            native.run(threads)  # its first-call costs
        runs, native_runs, ttft, prompt_tokens = [], [], [], []
        for turn in range(repeat):
            if native and turn % 2:
                native_runs.append(native.run(threads))
            messages = [{"role": "user", "content": prompt_text(prompt_times)}]
            usage = chat(page, model, messages, max_tokens=DECODE_TOKENS)["usage"]
            runs.append({"prefill": usage["prefill_tokens_per_s"] or 0.0})
            runs[-1]["decode"] = usage["decode_tokens_per_s"] or 0.0
            ttft.append(usage["time_to_first_token_s"] or 0.0)
            prompt_tokens.append(usage["prompt_tokens"] - (usage.get("cached_prompt_tokens") or 0))
            if native and not turn % 2:
                native_runs.append(native.run(threads))
        result: dict[str, Any] = {
            "model": model,
            "threads": threads,
            "isolated": info["isolated"],
            "dot_form": loaded["dotForm"],
            "prompt_tokens": min(prompt_tokens),
            "first_load_s": first,
            "cached_load_s": statistics.median(cached),
            "prefill": summary([r["prefill"] for r in runs]),
            "decode": summary([r["decode"] for r in runs]),
            "ttft_s": statistics.median(ttft),
        }
        if native_runs:
            result["native"] = {
                "threads": native_runs[0]["threads"],
                "prompt_tokens": native_runs[0]["prompt_tokens"],
            }
            for phase in ("prefill", "decode"):
                theirs = [n[f"{phase}_tok_s"] for n in native_runs]
                result["native"][phase] = summary(theirs)
                ratios = [r[phase] / n for r, n in zip(runs, theirs, strict=True) if n]
                result[phase]["ratio"] = statistics.median(ratios) if ratios else 0.0
        if plan:
            reply = chat(
                page, model, PLAN_MESSAGES, max_tokens=200, schema=plan_schema(), purpose="plan"
            )
            result["plan_s"] = reply["seconds"]
            result["plan_tokens"] = reply["usage"]["completion_tokens"]
            result["plan_finish"] = reply["finish_reason"]
        return result
    finally:
        context.close()


def print_engine_row(row: dict) -> None:
    plan = (
        f", plan {row['plan_s']:.1f} s / {row['plan_tokens']} tokens ({row['plan_finish']})"
        if "plan_s" in row
        else ""
    )
    print(
        f"engine {row['model']}, {row['threads']} thread(s)"
        f"{'' if row['isolated'] else ' (not isolated)'}, dot product {row['dot_form']}: "
        f"load {row['first_load_s']:.1f} s first, {row['cached_load_s']:.1f} s cached; "
        f"prefill {rate(row['prefill'])} tok/s ({row['prompt_tokens']} tokens), "
        f"decode {rate(row['decode'])} tok/s, first token {row['ttft_s']:.2f} s"
        f"{plan} [{row['wall_s']:.0f} s, load {load_average()}]",
        flush=True,
    )
    if "native" in row:
        other = row["native"]
        print(
            f"native {row['model']}, {other['threads']} thread(s), in turns with it: "
            f"prefill {rate(other['prefill'])} tok/s ({other['prompt_tokens']} tokens), "
            f"decode {rate(other['decode'])} tok/s; engine / native "
            f"{row['prefill']['ratio']:.2f} prefill, {row['decode']['ratio']:.2f} decode",
            flush=True,
        )


def rate(value: dict[str, float]) -> str:
    return f"{value['median']:.1f} [{value['best']:.1f}]"


# --- native llama.cpp -----------------------------------------------------------------------


def native_runner() -> Path | None:
    """node_modules holding the pinned node-llama-cpp, installed on first use; None (with the
    reason printed) where it cannot be had."""
    modules = NATIVE_DIR / "node_modules"
    wanted = NATIVE_PACKAGES[0].rsplit("@", 1)[1]
    installed = modules / "node-llama-cpp" / "package.json"
    if installed.is_file() and json.loads(installed.read_text())["version"] == wanted:
        return modules
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        print("native llama.cpp: the pinned prebuilt binary is for x86-64 Linux; skipped")
        return None
    if not (shutil.which("node") and shutil.which("npm")):
        print("native llama.cpp: needs Node.js 20+ and npm on PATH; skipped")
        return None
    NATIVE_DIR.mkdir(parents=True, exist_ok=True)
    if not (NATIVE_DIR / "package.json").exists():
        (NATIVE_DIR / "package.json").write_text('{"private": true}\n')
    print(f"native llama.cpp: installing {' '.join(NATIVE_PACKAGES)} into {NATIVE_DIR} ...")
    started = time.perf_counter()
    # --ignore-scripts: node-llama-cpp's postinstall would look for (or build) other binaries.
    command = ["npm", "install", "--prefix", str(NATIVE_DIR), "--no-audit", "--no-fund"]
    command += ["--omit=optional", "--ignore-scripts", "--save-exact", "--loglevel=error"]
    command += NATIVE_PACKAGES
    env = {**os.environ, "NODE_LLAMA_CPP_SKIP_DOWNLOAD": "true"}
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        print(f"native llama.cpp: npm install failed; skipped:\n{proc.stderr.strip()[-1500:]}")
        return None
    size = sum(f.stat().st_size for f in modules.rglob("*") if f.is_file())
    print(
        f"native llama.cpp: installed in {time.perf_counter() - started:.0f} s, "
        f"{size / 1e6:.0f} MB on disk"
    )
    return modules


def without_amx(modules: Path) -> Path:
    """node_modules as native_runner's, less the CPU builds that use AMX (a copy, made once)."""
    copy = NATIVE_NO_AMX_DIR / "node_modules"
    stamp = NATIVE_NO_AMX_DIR / "made-from"
    wanted = " ".join(NATIVE_PACKAGES + list(NATIVE_AMX_BUILDS))
    if stamp.is_file() and stamp.read_text() == wanted:
        return copy
    shutil.rmtree(NATIVE_NO_AMX_DIR, ignore_errors=True)
    shutil.copytree(modules, copy, symlinks=True)
    removed = [path for path in copy.rglob("libggml-cpu-*.so") if path.name in NATIVE_AMX_BUILDS]
    if not removed:
        raise SystemExit(
            f"--native-without-amx: no {', '.join(NATIVE_AMX_BUILDS)} in {copy}: "
            "update NATIVE_AMX_BUILDS for this node-llama-cpp"
        )
    for path in removed:
        path.unlink()
    stamp.write_text(wanted)
    return copy


class NativeLlama:
    """One model in native llama.cpp (scripts/bench_native_llama.mjs), run on request."""

    def __init__(self, modules: Path, model: str, prompt_times: int = 1) -> None:
        config = {
            "model": str(MODELS_DIR / f"{model}.gguf"),
            "prompt": TEMPLATES[model].format(text=prompt_text(prompt_times)),
            "max_tokens": DECODE_TOKENS,
            "context": CONTEXT_WINDOW,
        }
        self.process = subprocess.Popen(
            ["node", str(NATIVE_SCRIPT), json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "NODE_PATH": str(modules)},
        )
        self.info = self.answer()

    def answer(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"native llama.cpp exited ({self.process.wait()}); see above")
        return json.loads(line)

    def run(self, threads: int) -> dict:
        self.process.stdin.write(json.dumps({"threads": threads}) + "\n")
        self.process.stdin.flush()
        return self.answer()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def print_ratios(rows: list[dict], native_without_amx: bool = False) -> None:
    native = "native llama.cpp without its AMX build" if native_without_amx else "native llama.cpp"
    print(f"\nCPU engine vs {native}, tok/s: median [best] of runs taken in turns;")
    print("ratio = median of the paired engine / native ratios")
    print(f"{'model':<28} {'threads':>7}  {'phase':<8} {'engine':>13} {'native':>13} {'ratio':>6}")
    for row in rows:
        for phase in ("prefill", "decode") if "native" in row else ():
            print(
                f"{row['model']:<28} {row['threads']:>7}  {phase:<8} {rate(row[phase]):>13} "
                f"{rate(row['native'][phase]):>13} {row[phase]['ratio']:>6.2f}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="", help="comma-separated model ids (default: all)")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--no-plan", action="store_true", help="skip the constrained plan")
    parser.add_argument("--no-native", action="store_true", help="skip native llama.cpp")
    parser.add_argument("--no-engine", action="store_true", help="skip the engine rows")
    parser.add_argument(
        "--native-without-amx",
        action="store_true",
        help="native llama.cpp without its AMX build (the next best for this CPU), as on CPUs "
        "without AMX",
    )
    parser.add_argument(
        "--build",
        choices=["relaxed", "threads", "single"],
        help="the engine build to run (default: the one the browser picks, relaxed in Chromium)",
    )
    parser.add_argument(
        "--prompt-times",
        type=int,
        default=1,
        help="the prompt text this many times over (8: about 1,050 tokens, the planner's length)",
    )
    parser.add_argument(
        "--dot",
        choices=["i16", "i32"],
        help="the relaxed build's dot product form (default: the faster for this CPU, which the "
        "engine tells from how the browser lowers it)",
    )
    parser.add_argument(
        "--browser-arg",
        action="append",
        default=[],
        help="an extra Chromium flag (repeatable); --browser-arg=--js-flags=--no-enable-avx-vnni "
        "runs the engine as on an x86 CPU without AVX-VNNI",
    )
    args = parser.parse_args(argv)
    thread_counts = [int(t) for t in args.threads.split(",") if t.strip()]
    models = [m for m in args.models.split(",") if m] or list(TEMPLATES)
    unknown = [m for m in models if m not in TEMPLATES]
    if unknown:
        known = ", ".join(TEMPLATES)
        print(f"unknown model id {', '.join(unknown)}: one of {known}", file=sys.stderr)
        return 2

    chosen = [arg for model in models for arg in ("--model", model)]
    fetched = subprocess.run([sys.executable, str(ROOT / "scripts" / "fetch_model.py"), *chosen])
    if fetched.returncode != 0:
        return fetched.returncode
    if not (ROOT / "web" / "vendor" / "llama" / "agent-llama.wasm").is_file():
        print("the CPU engine is not built: run `bash scripts/setup.sh` first", file=sys.stderr)
        return 1
    models = [m for m in models if (MODELS_DIR / f"{m}.gguf").is_file()]
    print(f"models: {', '.join(models)}; load average {load_average()} on {os.cpu_count()} CPUs")
    print(f"engine build: {args.build or 'the browser picks (relaxed SIMD in Chromium)'}")

    modules = None if args.no_native or args.no_engine else native_runner()
    if modules and args.native_without_amx:
        modules = without_amx(modules)
    rows: list[dict] = []
    browser_config = load_browser_config()
    from playwright.sync_api import sync_playwright

    server, base_url = start_server(port=0)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                **browser_config.launch_options(extra_args=args.browser_arg)
            )
            try:
                for model in models if not args.no_engine else []:
                    native = native_for(modules, model, args.prompt_times)
                    try:
                        for threads in thread_counts:
                            started = time.perf_counter()
                            row = bench_engine(
                                browser,
                                base_url,
                                model,
                                threads,
                                args.repeat,
                                not args.no_plan,
                                native,
                                args.build,
                                args.prompt_times,
                                args.dot,
                            )
                            row["wall_s"] = time.perf_counter() - started
                            rows.append(row)
                            print_engine_row(row)
                    finally:
                        if native:
                            native.close()
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
    print_ratios(rows, args.native_without_amx)
    print(f"load average: {load_average()} on {os.cpu_count()} CPUs")
    return 0


def native_for(modules: Path | None, model: str, prompt_times: int = 1) -> NativeLlama | None:
    if not modules:
        return None
    try:
        native = NativeLlama(modules, model, prompt_times)
    except (OSError, RuntimeError, json.JSONDecodeError) as error:
        print(f"native llama.cpp could not load {model}: {error}; no ratio for it")
        return None
    info = native.info
    print(f"native llama.cpp {info['llama_cpp']['release']} ({info['build']}): {info['system']}")
    if modules.parent == NATIVE_NO_AMX_DIR and "AMX" in info["system"]:
        native.close()
        raise SystemExit(
            "--native-without-amx: native llama.cpp still runs an AMX build: "
            "update NATIVE_AMX_BUILDS for this node-llama-cpp"
        )
    return native


if __name__ == "__main__":
    sys.exit(main())
