#!/usr/bin/env python3
"""How fast the CPU engine (wllama + Gemma 3 270M) is on this machine, in headless Chromium.

    python scripts/bench_cpu_engine.py [--threads 1,2] [--repeat 2] [--no-plan]

For each thread count, in a fresh browser context of web/dev/cpu_engine_harness.html served
with COOP/COEP: the first load (download into wllama's cache included), a load from that
cache, prompt (prefill) and decode tokens per second as llama.cpp reports them, time to the
first token, and one schema-constrained plan (time and tokens). Numbers only: it never
fails on time. Other processes on the machine skew the numbers; the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent_py.plan import PlanShape, plan_json_schema  # noqa: E402
from agent_py.terminal import load_browser_config  # noqa: E402
from agent_py.web_server import start_server  # noqa: E402

HARNESS = "dev/cpu_engine_harness.html"
MODEL = "gemma3-270m-q4_k_m"
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


def plan_schema() -> dict[str, Any]:
    return plan_json_schema(
        ["llm_generator", "javascript_execute"],
        PlanShape(max_tasks=1, max_steps_per_task=1, max_text_chars=40, with_arguments=False),
    )


def chat(page: Any, messages: list[dict[str, str]], **call: Any) -> dict[str, Any]:
    return page.evaluate(
        "([m, c]) => cpu.chat(m, c)", [messages, {"model": MODEL, "purpose": "bench", **call}]
    )


def bench_threads(browser: Any, base_url: str, threads: int, repeat: int, plan: bool) -> dict:
    context = browser.new_context()
    context.set_default_timeout(600_000)
    page = context.new_page()
    try:
        page.goto(base_url + HARNESS)
        page.wait_for_selector("body[data-status='ready']")
        info = page.evaluate("cpu.info()")
        page.evaluate("t => cpu.create({threads: t, seed: 1})", threads)
        first = page.evaluate("cpu.reload()")["seconds"]
        page.evaluate("cpu.unload()")
        cached = [page.evaluate("cpu.reload()")["seconds"]]
        for _ in range(repeat - 1):
            page.evaluate("cpu.unload()")
            cached.append(page.evaluate("cpu.reload()")["seconds"])
        chat(page, [{"role": "user", "content": "Hello"}], max_tokens=2)  # first-call costs
        prefill, decode, ttft = [], [], []
        for _ in range(repeat):
            reply = chat(page, [{"role": "user", "content": PREFILL_TEXT}], max_tokens=32)
            usage = reply["usage"]
            prefill.append(usage["prefill_tokens_per_s"] or 0.0)
            decode.append(usage["decode_tokens_per_s"] or 0.0)
            ttft.append(usage["time_to_first_token_s"] or 0.0)
        result = {
            "threads": threads,
            "isolated": info["isolated"],
            "prompt_tokens": usage["prompt_tokens"],
            "first_load_s": first,
            "cached_load_s": statistics.median(cached),
            "prefill_tok_s": statistics.median(prefill),
            "decode_tok_s": statistics.median(decode),
            "ttft_s": statistics.median(ttft),
        }
        if plan:
            reply = chat(page, PLAN_MESSAGES, max_tokens=200, schema=plan_schema(), purpose="plan")
            result["plan_s"] = reply["seconds"]
            result["plan_tokens"] = reply["usage"]["completion_tokens"]
            result["plan_finish"] = reply["finish_reason"]
        return result
    finally:
        context.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--repeat", type=int, default=2, help="runs per measurement (median)")
    parser.add_argument("--no-plan", action="store_true", help="skip the constrained plan")
    args = parser.parse_args(argv)
    thread_counts = [int(t) for t in args.threads.split(",") if t.strip()]

    fetched = subprocess.run([sys.executable, str(ROOT / "scripts" / "fetch_model.py")])
    if fetched.returncode != 0:
        return fetched.returncode
    if not (ROOT / "web" / "vendor" / "wllama" / "wllama.wasm").is_file():
        print("web/vendor is missing: run `python scripts/vendor.py` first", file=sys.stderr)
        return 1
    browser_config = load_browser_config()
    from playwright.sync_api import sync_playwright

    server, base_url = start_server(port=0)
    rows = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(**browser_config.launch_options())
            try:
                for threads in thread_counts:
                    started = time.perf_counter()
                    row = bench_threads(browser, base_url, threads, args.repeat, not args.no_plan)
                    row["wall_s"] = time.perf_counter() - started
                    rows.append(row)
                    print_row(row)
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    return 0


def print_row(row: dict) -> None:
    plan = (
        f", plan {row['plan_s']:.1f} s / {row['plan_tokens']} tokens ({row['plan_finish']})"
        if "plan_s" in row
        else ""
    )
    print(
        f"{row['threads']} thread(s){'' if row['isolated'] else ' (not isolated)'}: "
        f"load {row['first_load_s']:.1f} s first, {row['cached_load_s']:.1f} s cached; "
        f"prefill {row['prefill_tok_s']:.1f} tok/s ({row['prompt_tokens']} tokens), "
        f"decode {row['decode_tok_s']:.1f} tok/s, first token {row['ttft_s']:.2f} s"
        f"{plan} [{row['wall_s']:.0f} s]",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
