"""``python -m agent_py run``: the page driven from the terminal, and its exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_py import read_history_file

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]

PLAN = {
    "tasks": [
        {
            "task_id": "t1",
            "task_goal": "compute",
            "steps": [
                {
                    "step_id": "s1",
                    "step_goal": "multiply",
                    "tool_name": "javascript_execute",
                    "tool_intent": "exact arithmetic",
                    "expected_output": "42",
                    "arguments": {"code": "return 6 * 7"},
                }
            ],
        }
    ]
}


def agent_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_py", "run", "--fresh-browser", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )


def script_file(tmp_path: Path, replies: dict[str, object]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(replies))
    return str(path)


def test_a_completed_task_prints_progress_and_the_answer_and_exits_0(
    vendored: Path, tmp_path: Path
) -> None:
    history = tmp_path / "run.jsonl"
    script = script_file(
        tmp_path,
        {
            "plan": f"<plan>{json.dumps(PLAN)}</plan>",
            "rethink": "<status>done</status><final>**42**</final>",
        },
    )
    done = agent_run(
        tmp_path,
        "What is six times seven?",
        "--engine",
        "scripted",
        "--script",
        script,
        "--history",
        str(history),
    )

    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "engine: Scripted test engine" in out
    assert "s1 javascript_execute: multiply" in out
    assert "[s1] done in" in out and "result: 42" in out
    assert "**42**" in out
    assert "model prepared before the task in" in out  # the planner's prompt, prefilled at ready
    events = read_history_file(history)
    assert [e.type for e in events][:2] == ["session_start", "turn_start"]
    assert any(e.type == "final" and e.meta["state"] == "completed" for e in events)


def test_a_failed_task_exits_1_with_the_reason(vendored: Path, tmp_path: Path) -> None:
    script = script_file(tmp_path, {"plan": ["no plan", "still no plan"]})
    done = agent_run(
        tmp_path,
        "anything",
        "--engine",
        "scripted",
        "--script",
        script,
        "--history",
        str(tmp_path / "h.jsonl"),
    )
    assert done.returncode == 1
    assert "failed: no usable plan after one repair" in done.stderr


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    done = agent_run(tmp_path, "task", "--engine", "scripted")
    assert done.returncode == 2
    assert "--script goes with --engine scripted" in done.stderr
