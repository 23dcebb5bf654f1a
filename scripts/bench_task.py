"""Benchmark: one whole short task in the page (headless Chromium), on the CPU engine with its
default model, next to the same task shape on the scripted engine. (The real-task suite,
``python -m agent_py eval``, measures answers over many tasks.)

Prints, for each engine: the time from start to "agent ready" plus the task, the task's own
wall time, the model's share, model calls by purpose, and tokens. Numbers only; never fails on
time. Run: ``.venv/bin/python scripts/bench_task.py`` (after ``bash scripts/setup.sh --browser``).
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_py import read_history_file  # noqa: E402
from agent_py.terminal import run_in_browser  # noqa: E402

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


def main() -> None:
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
