"""``python -m agent_py demo``: the scripted demo from the terminal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agent_py import read_history_file


def test_demo_runs_a_task_with_real_tools_and_writes_history(tmp_path: Path) -> None:
    history = tmp_path / "demo.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent_py",
            "demo",
            "Count these five words please",
            "--history",
            str(history),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "scripted demo model" in done.stdout
    assert "The task has 5 words and 29 characters" in done.stdout
    events = read_history_file(history)
    assert [e.type for e in events][-1] == "session_end"
    assert any(e.type == "step_completed" and e.step == "s1" for e in events)


def test_demo_without_a_task_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent_py", "demo"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "the following arguments are required: task" in done.stderr
