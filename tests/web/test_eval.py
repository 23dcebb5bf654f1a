"""``python -m agent_py eval``: the real-task suite in the page, end to end.

The scripted engine plays a model that does every task right, so this checks the plumbing
the suite's score depends on: the page, the JavaScript sandbox, the suite's MCP server and the
MCP project's reference servers (behind mcp-proxy) on loopback, one page per set of servers,
the fixtures (``{{site}}`` pages, the ``{{repo}}`` repository), ``${s1}`` chains, the answer
checks (the clock's too), failed tasks with their reasons, the per-task JSONL and the summary.
The real models' scores are measured by the benchmark run (``--engine cpu``);
tests/web/test_cpu_agent.py asserts the answers of a CPU subset.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent_py import read_history_file
from agent_py.evals.suite import Split, Tier, load_suite, load_tasks

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def run_eval(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_py", "eval", "--out", str(out), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1200,  # a hang guard: the whole suite takes well under a minute
        check=False,
    )


# Scripts of the sealed held-out file (heldout-v2.json, never edited) that do not do their task
# right as the agent runs it: left out of the plumbing run, never "fixed" in the file.
HELD_OUT_SCRIPT_DEFECTS = {
    "time-tokyo-kolkata": "the answer is the tool's JSON, where 'T06:00' meets no \\b",
    "time-singapore-phoenix": "the answer is the tool's JSON, where 'T18:00' meets no \\b",
    "paste-phone": "its code only gives back text written into it",
    "fetch-quarter-sales": "its code leaves out the page that the step before it fetched",
    "git-last-author": "it has no reply for the answer call, which reads a remote tool's "
    "text of several lines (the commit log) rather than hand it over",
    "ja-days": "its code builds Dates from numbers where the task writes dates the months "
    "check does not read (2026年1月1日), which it refuses for a date as text",
}


def test_the_whole_suite_passes_with_a_model_that_does_every_task_right(
    vendored: Path, tmp_path: Path
) -> None:
    tasks = [
        task for task in load_suite("all", tier=Tier.FULL) if task.id not in HELD_OUT_SCRIPT_DEFECTS
    ]
    only = ",".join(task.id for task in tasks)
    done = run_eval(tmp_path, "--engine", "scripted", "--split", "all", "--only", only,
                    "--profile", "small")  # fmt: skip

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == f"{len(tasks)} passed, 0 failed"
    for task in tasks:
        assert any(line.startswith(f"PASS {task.id} ") for line in lines), task.id
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["tiers"]["small"]["passed"] == len(load_tasks(tier=Tier.SMALL))
    # Each split is scored apart, with its wrong answers reported completed.
    held_out = len(load_suite(Split.HELD_OUT)) - len(HELD_OUT_SCRIPT_DEFECTS)
    assert summary["splits"]["held-out"] == {
        "passed": held_out,
        "tasks": held_out,
        "errors": 0,
        "wrong_completed": 0,
        "median_seconds": summary["splits"]["held-out"]["median_seconds"],
    }
    assert any(line.startswith(f"score: held-out {held_out}/{held_out} (100%)") for line in lines)
    # Tasks that cannot be done ended failed, with the reason the run gave.
    assert summary["tasks"]["cannot-web"]["state"] == "failed"
    # (The script's plan fetches the page with code: a plan that reads a web page with only
    # the agent's own tools ends at its adoption, saying why.)
    assert "needs data from outside this page" in summary["tasks"]["cannot-web"]["error"]
    # The MCP task reached the loopback server, and the chain spliced the tool's value.
    assert summary["tasks"]["mcp-add"]["answer"] in ("43", "43.0")
    assert summary["tasks"]["full-mcp-chain"]["answer"] == "4"
    events = read_history_file(tmp_path / "full-mcp-chain.jsonl")
    actions = [e for e in events if e.type == "action"]
    assert [a.meta["tool"] for a in actions] == ["atlas__capital", "javascript_execute"]
    assert actions[1].meta["arguments"] == {"code": "return 'Lutz'.length;"}
    # The reference servers answered: each server set ran in a page of its own, the pages
    # and the repository were there, and their placeholders were filled in.
    for servers in ("atlas", "time", "fetch", "git"):
        assert any(line.startswith(f"servers: {servers} (") for line in lines), servers
    assert (tmp_path / "repo" / ".git").is_dir()
    assert {"time-server.log", "fetch-server.log", "git-server.log"} <= {
        path.name for path in tmp_path.iterdir()
    }
    fetched = next(
        e for e in read_history_file(tmp_path / "fetch-kettle-price.jsonl") if e.type == "action"
    )
    assert fetched.meta["tool"] == "fetch__fetch"
    assert re.fullmatch(
        r"http://127\.0\.0\.1:\d+/shop/kettle\.html", fetched.meta["arguments"]["url"]
    )
    logged = [
        e for e in read_history_file(tmp_path / "git-commit-count.jsonl") if e.type == "action"
    ]
    assert logged[0].meta["arguments"]["repo_path"] == str((tmp_path / "repo").resolve())
    assert summary["tasks"]["git-commit-count"]["answer"] == "4"
    assert summary["tasks"]["time-now-tokyo"]["passed"]  # the clock check, on the live server
    assert list(summary["tasks"]) == [task.id for task in tasks]  # the tasks' own order
    # Each task is a session of its own, from its session_start to its session_end, in its
    # own file; a two-turn task is one session of two turns.
    for task in tasks:
        events = read_history_file(tmp_path / f"{task.id}.jsonl")
        assert len({e.session for e in events}) == 1, task.id
        assert (events[0].type, events[-1].type) == ("session_start", "session_end"), task.id
        turns = [e.turn for e in events if e.type == "turn_start"]
        assert turns == ([1, 2] if task.follow_up else [1]), task.id


def test_a_wrong_answer_fails_its_task_and_the_exit_code_says_so(
    vendored: Path, tmp_path: Path
) -> None:
    suite = json.loads((ROOT / "agent_py" / "evals" / "tasks.json").read_text())
    task = next(t for t in suite["tasks"] if t["id"] == "js-multiply")
    task["script"]["plan"] = task["script"]["plan"].replace("6 * 7", "6 * 8")
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"tasks": [task]}))

    done = run_eval(
        tmp_path / "run", "--engine", "scripted", "--tasks", str(wrong), "--profile", "small"
    )

    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL js-multiply" in done.stdout and "no 42 in the answer" in done.stdout
    assert done.stdout.splitlines()[-1] == "0 passed, 1 failed"


def test_eval_adds_the_users_own_servers_and_shows_them(vendored: Path, tmp_path: Path) -> None:
    """``eval --mcp NAME=URL``: the server joins the suite's page and is printed as the MCP
    panel shows it, before the tasks run."""
    from agent_py.evals.runner import atlas_server

    with atlas_server(tmp_path / "calc.log") as url:
        done = run_eval(tmp_path / "run", "--engine", "scripted", "--only", "mcp-add",
                        "--profile", "small", "--mcp", f"calc={url}")  # fmt: skip

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    shown = next(line for line in lines if line.startswith("MCP server calc: MCP "))
    assert "calc__add" in shown
    assert lines.index(shown) < next(i for i, line in enumerate(lines) if line.startswith("PASS"))
    assert lines[-1] == "1 passed, 0 failed"
