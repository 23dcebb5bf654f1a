"""``python -m agent_py demo``: the scripted demo from the terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_webllm_opens_the_browser_network_for_its_weights_unless_told_not_to(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_py.cli.main import NETWORK_VARIABLE, allow_weights_download

    # Set, then removed, through monkeypatch: so it is put back as it was after the test,
    # even though allow_weights_download() sets it behind monkeypatch's back.
    monkeypatch.setenv(NETWORK_VARIABLE, "placeholder")
    monkeypatch.delenv(NETWORK_VARIABLE)
    allow_weights_download()
    assert os.environ[NETWORK_VARIABLE] == "open"
    assert "downloads its weights" in capsys.readouterr().err

    monkeypatch.setenv(NETWORK_VARIABLE, "loopback")
    allow_weights_download()
    assert os.environ[NETWORK_VARIABLE] == "loopback"
    assert capsys.readouterr().err == ""


def test_sources_newer_than_the_page_bundle_are_found(tmp_path: Path) -> None:
    from agent_py.cli.checkout import stale_sources

    manifest = tmp_path / "web" / "vendor" / "manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text("{}")
    source = tmp_path / "agent_py" / "planner.py"
    source.parent.mkdir()
    source.write_text("")
    built = manifest.stat().st_mtime
    os.utime(source, (built - 10, built - 10))
    assert stale_sources(tmp_path) == []
    os.utime(source, (built + 10, built + 10))  # edited after the bundle was built
    assert stale_sources(tmp_path) == [source]
