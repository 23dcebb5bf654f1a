"""Benchmark: one whole short task in the page (headless Chromium), on the CPU engine with its
default model, next to the same task shape on the scripted engine. (The real-task suite,
``python -m agent_py eval``, measures answers over many tasks.)

Prints, for each engine: the time from start to "agent ready" plus the task, the task's own
wall time, the model's share, model calls by purpose, and tokens. Then, on the CPU engine, the
task as a person types it: Run pressed N seconds after "ready" (``--typed-after 0,30``; the
page prepares the model meanwhile), with the time from Run to the answer and what the
preparation had done by then. Numbers only; never fails on time. Run:
``.venv/bin/python scripts/bench_task.py`` (after ``bash scripts/setup.sh --browser``).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_py import read_history_file  # noqa: E402
from agent_py.cli.run_command import run_in_browser  # noqa: E402
from agent_py.cli.terminal import PageAgent  # noqa: E402

TASK = "Use JavaScript to compute 6 times 7."
SCRIPT = {
    "plan": "<plan>"
    + json.dumps(
        {
            "tasks": [
                {
                    "task_id": "t1",
                    "task_goal": "compute",
                    "steps": [
                        {
                            "step_id": "s1",
                            "step_goal": "compute 6 times 7",
                            "tool_name": "javascript_execute",
                            "tool_intent": "exact arithmetic",
                            "expected_output": "42",
                        }
                    ],
                }
            ]
        }
    )
    + "</plan>",
    "arguments": '{"code": "return 6 * 7"}',
    "rethink": "<status>continue</status>",
    "answer": "6 times 7 is 42.",
}


def measure(engine: str, history: Path) -> dict[str, object]:
    started = time.perf_counter()
    code = run_in_browser(
        TASK,
        history=history,
        engine=engine,
        script=SCRIPT if engine == "scripted" else None,
        out=io.StringIO(),
        err=io.StringIO(),
    )
    total = time.perf_counter() - started
    final = next((e for e in read_history_file(history) if e.type == "final"), None)
    stats = final.meta["stats"] if final else {}
    return {"exit": code, "total_s": total, **stats}


def typed_after(delay_s: float) -> dict[str, object]:
    """Run pressed ``delay_s`` after "ready" on the CPU engine (a person typing meanwhile)."""
    with PageAgent(engine="cpu") as agent:
        time.sleep(delay_s)  # the person's typing time: the page prepares the model meanwhile
        prepared = agent.page.evaluate("window.agentApp.prepared ?? null")
        model_text = agent.page.locator("#progress-model-text").inner_text()
        started = time.perf_counter()
        result = agent.run(TASK) or {}
        return {
            "run_to_answer_s": time.perf_counter() - started,
            "answer": result.get("answer") or result.get("error"),
            "prepared_before_run": prepared,
            "model_bar_at_run": model_text,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--typed-after", default="0,30", help="seconds after ready, comma-separated ('' skips)"
    )
    parser.add_argument("--skip-engines", action="store_true", help="only --typed-after")
    args = parser.parse_args()
    if not args.skip_engines:
        engines()
    for delay in [float(d) for d in args.typed_after.split(",") if d]:
        row = typed_after(delay)
        prepared = row["prepared_before_run"]
        state = (
            f"prepared in {prepared['ms'] / 1000:.1f} s ({prepared.get('prompt_tokens')} tokens)"
            if prepared
            else f"still preparing ({row['model_bar_at_run']})"
        )
        print(
            f"Run pressed {delay:g} s after ready: answer in {row['run_to_answer_s']:.1f} s "
            f"({row['answer']!r}); at Run the model was {state}"
        )


def engines() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = {
            "cpu (default model)": measure("cpu", Path(tmp) / "cpu.jsonl"),
            "scripted": measure("scripted", Path(tmp) / "scripted.jsonl"),
        }
    print(f"one short task in the page: {TASK!r}\n")
    print(
        f"{'engine':20s}{'exit':>5s}{'boot+task s':>12s}{'task s':>9s}{'model s':>9s}"
        "  calls, tokens"
    )
    for name, row in rows.items():
        calls = ", ".join(f"{k}={v}" for k, v in sorted(dict(row.get("model_calls", {})).items()))
        print(
            f"{name:20s}{row['exit']!s:>5s}{row['total_s']:12.1f}"
            f"{float(row.get('wall_time_s', 0)):9.1f}{float(row.get('model_time_s', 0)):9.1f}"
            f"  {calls}; prompt {row.get('prompt_tokens', 0)}, "
            f"reply {row.get('completion_tokens', 0)}"
        )


if __name__ == "__main__":
    main()
