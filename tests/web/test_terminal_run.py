"""``python -m agent_py run``: the page driven from the terminal, and its exit codes."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from extension_support import start_sdk_server

from agent_py import read_history_file
from agent_py.cli import terminal
from agent_py.cli.terminal import PageAgent, WaitTimedOut
from agent_py.evals.reference_servers import SETUP, missing_install, reference_server
from agent_py.evals.runner import atlas_server
from tests.needs import need

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


def test_a_session_file_carries_a_follow_up_to_the_earlier_result(
    vendored: Path, tmp_path: Path
) -> None:
    """--session FILE: the second run is the session's next turn (its plan prompt holds the
    first turn's result), appended to the same file; a file of something else is refused."""
    session = tmp_path / "s.jsonl"
    follow = json.loads(json.dumps(PLAN))
    follow["tasks"][0]["steps"][0]["arguments"]["code"] = "return $1 + 8"
    fresh = json.loads(json.dumps(PLAN))
    fresh["tasks"][0]["steps"][0]["arguments"]["code"] = "return 'no earlier result'"
    replies = {
        "plan": {
            "text": f"<plan>{json.dumps(follow)}</plan>",
            "match": r"Result: (\d+)",
            "otherwise": f"<plan>{json.dumps(fresh)}</plan>",
        },
        "rethink": "<status>continue</status>",
        "answer": {"text": "$1", "match": r"result: (\w+)"},
    }
    first = agent_run(
        tmp_path, "Use JavaScript to compute 6 times 7.", "--engine", "scripted",
        "--script", script_file(tmp_path, {**replies, "plan": f"<plan>{json.dumps(PLAN)}</plan>"}),
        "--session", str(session),
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert first.stdout.split("\n\n")[1].strip() == "42", first.stdout
    second = agent_run(
        tmp_path, "Add 8 to that result.", "--engine", "scripted",
        "--script", script_file(tmp_path, replies), "--session", str(session),
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert second.stdout.split("\n\n")[1].strip() == "50", second.stdout

    events = read_history_file(session)
    assert len({e.session for e in events}) == 1
    assert [e.content for e in events if e.type == "turn_start"] == [
        "Use JavaScript to compute 6 times 7.",
        "Add 8 to that result.",
    ]
    assert [e.turn for e in events if e.type == "final"] == [1, 2]

    other = tmp_path / "other.txt"
    other.write_text("not a history\n")
    refused = agent_run(
        tmp_path, "anything", "--engine", "scripted",
        "--script", script_file(tmp_path, replies), "--session", str(other),
    )  # fmt: skip
    assert refused.returncode == 2
    assert "is not a session's history" in refused.stderr


def one_step_plan(tool: str, arguments: dict[str, object]) -> str:
    step = {
        "step_id": "s1",
        "step_goal": "ask the server",
        "tool_name": tool,
        "tool_intent": "the server's tool",
        "expected_output": "its result",
        "arguments": arguments,
    }
    plan = {"tasks": [{"task_id": "t1", "task_goal": "use the server", "steps": [step]}]}
    return f"<plan>{json.dumps(plan)}</plan>"


def test_an_mcp_server_given_with_mcp_is_shown_and_its_tool_answers_the_task(
    vendored: Path, tmp_path: Path
) -> None:
    """--mcp NAME=URL: the server joins the page as the panel adds it, its line (revision,
    tools) is printed before the plan, and the plan's call of atlas__add gives the answer."""
    replies = {
        "plan": one_step_plan("atlas__add", {"a": 19, "b": 24}),
        "rethink": "<status>continue</status>",
        "answer": {"text": "$1", "match": r"\[s1\] atlas__add \(ok\): (.+)"},
    }
    script = script_file(tmp_path, replies)
    with atlas_server(tmp_path / "atlas.log") as url:
        done = agent_run(
            tmp_path, "Use the add tool of the atlas server to add 19 and 24.",
            "--engine", "scripted", "--script", script, "--mcp", f"atlas={url}",
            "--history", str(tmp_path / "h.jsonl"),
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    shown = [line for line in lines if line.startswith("MCP server atlas: MCP ")]
    assert len(shown) == 1, done.stdout
    assert shown[0].endswith(" 3 tools (atlas__add, atlas__multiply, atlas__capital)"), shown
    assert lines.index(shown[0]) < next(i for i, x in enumerate(lines) if x.startswith("plan:"))
    assert "s1 atlas__add: ask the server" in done.stdout
    assert done.stdout.split("\n\n")[1].strip() == "43.0", done.stdout


def test_the_time_reference_server_behind_mcp_proxy_converts_a_time(
    vendored: Path, tmp_path: Path
) -> None:
    """The MCP project's stdio server mcp-server-time, put on Streamable HTTP by mcp-proxy as
    docs/running.md shows, answers the plan's time__convert_time call: 09:30 in Tokyo is
    06:00 in Kolkata."""
    need(missing_install(), SETUP)
    arguments = {
        "source_timezone": "Asia/Tokyo",
        "time": "09:30",
        "target_timezone": "Asia/Kolkata",
    }
    replies = {
        "plan": one_step_plan("time__convert_time", arguments),
        "rethink": "<status>continue</status>",
        # The target's time of day, read from the step's result as the user would.
        "answer": {"text": "$1 in Kolkata", "match": r"T(\d\d:\d\d):\d\d\+05:30"},
    }
    with reference_server("time", tmp_path) as url:
        done = agent_run(
            tmp_path, "It is 09:30 in Tokyo: what time is it in Kolkata?",
            "--engine", "scripted", "--script", script_file(tmp_path, replies),
            "--mcp", f"time={url}", "--history", str(tmp_path / "h.jsonl"),
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    shown = [line for line in done.stdout.splitlines() if line.startswith("MCP server time: ")]
    assert len(shown) == 1 and "time__convert_time" in shown[0], done.stdout
    assert shown[0].startswith("MCP server time: MCP 20"), shown  # the revision it speaks
    assert "[s1] done in" in done.stdout
    assert done.stdout.split("\n\n")[1].strip() == "06:00 in Kolkata", done.stdout


def test_an_mcp_server_without_cors_headers_is_refused_saying_why(
    vendored: Path, tmp_path: Path
) -> None:
    """The terminal's browser has no bridge extension: a server without CORS headers cannot
    be used, and the run says so, before any plan, with exit code 2."""
    script = script_file(tmp_path, {"plan": one_step_plan("plain__add", {"a": 2, "b": 3})})
    with start_sdk_server(tmp_path) as url:
        done = agent_run(
            tmp_path, "Add 2 and 3.", "--engine", "scripted", "--script", script,
            "--mcp", f"plain={url}", "--history", str(tmp_path / "h.jsonl"),
        )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "MCP server plain: error: " in done.stdout
    assert f"MCP server plain: {url} answers, but sends no CORS headers" in done.stderr
    assert "bridge extension" in done.stderr
    assert "the task was not run: the MCP server plain cannot be used" in done.stderr
    assert "plan:" not in done.stdout


def test_a_wait_past_its_guard_gives_up_says_what_it_waited_for_and_meets_the_deadline(
    browser: Any,
) -> None:
    """The terminal's waits on the page (its start 180 s, MCP servers 60 s, the preparation
    900 s) end at their guard, said on the way; the run's deadline ends any of them first."""
    page = browser.new_page()
    notices = io.StringIO()
    try:
        agent = PageAgent(notices=notices)
        agent.page = page
        with patch.object(terminal, "NOTICE_AFTER_S", 0.2):
            assert agent._wait("false", "the page to start", guard_s=1.0) is False
        assert notices.getvalue().startswith("waiting for the page to start (")

        agent.deadline = time.monotonic() + 0.5
        with pytest.raises(WaitTimedOut) as caught:
            agent._wait("false", "the MCP server calc to connect", guard_s=60)
        assert caught.value.message(20) == (
            "no answer within 20 s: still waiting for the MCP server calc to connect"
        )
    finally:
        page.close()
    assert WaitTimedOut("the page to start", guard_s=180).message(1800) == (
        "no answer within 180 s: still waiting for the page to start"
    )


def _read_and_sum_plan() -> str:
    # Python: while the workspace holds files, code steps run where the files are.
    code = "sum(int(line.split(',')[1]) for line in ${s1}.strip().split('\\n')[1:])"
    plan = {
        "tasks": [
            {
                "task_id": "t1",
                "task_goal": "read the file",
                "steps": [
                    {
                        "step_id": "s1",
                        "step_goal": "read sales.csv",
                        "tool_name": "read_file",
                        "tool_intent": "the user's file",
                        "expected_output": "its text",
                        "arguments": {"path": "sales.csv"},
                    }
                ],
            },
            {
                "task_id": "t2",
                "task_goal": "sum it",
                "steps": [
                    {
                        "step_id": "s2",
                        "step_goal": "sum the sales",
                        "tool_name": "python_execute",
                        "tool_intent": "exact arithmetic",
                        "expected_output": "the total",
                        "arguments": {"code": code},
                    }
                ],
            },
        ]
    }
    return f"<plan>{json.dumps(plan)}</plan>"


def test_a_file_given_to_a_run_is_read_by_its_steps_and_gone_from_the_next_run(
    vendored: Path, tmp_path: Path
) -> None:
    sales = tmp_path / "sales.csv"
    sales.write_text("month,sales\nJanuary,1200\nFebruary,950\nMarch,1340\n")
    script = script_file(
        tmp_path,
        {
            "plan": _read_and_sum_plan(),
            "rethink": "<status>continue</status>",
            "answer": "The sales add up to 3490.",
        },
    )
    profile = tmp_path / "profile"

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "agent_py",
                "run",
                "Add up the sales in sales.csv.",
                "--engine",
                "scripted",
                "--script",
                script,
                "--browser-profile",
                str(profile),
                "--history",
                str(tmp_path / "h.jsonl"),
                *extra,
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
            check=False,
        )

    done = run("--file", str(sales))

    assert done.returncode == 0, done.stdout + done.stderr
    assert f"file: sales.csv ({sales.stat().st_size} bytes)" in done.stdout
    assert "result: 3490" in done.stdout and "The sales add up to 3490." in done.stdout
    # The same browser profile, no --file: the workspace is empty and read_file not offered.
    again = run()
    assert again.returncode == 1
    assert "unknown tool read_file" in again.stdout + again.stderr


def test_a_file_that_cannot_be_given_stops_the_run_before_the_browser(tmp_path: Path) -> None:
    done = agent_run(tmp_path, "sum it", "--engine", "cpu", "--file", str(tmp_path / "nope.csv"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"--file {tmp_path / 'nope.csv'}: no such file" in done.stderr


def test_python_reads_a_given_file_and_what_it_writes_is_saved_for_the_user(
    vendored: Path, tmp_path: Path
) -> None:
    """run --file: python_execute opens the file by name in the page's Python sandbox, the file
    it writes under out/ is recorded in the history (name, size, sha256) and saved into the
    run's own folder under --outputs."""
    orders = tmp_path / "orders.csv"
    orders.write_text("order,amount\nA-1,12.50\nA-2,7.25\nA-3,30\n")
    code = (
        "import csv\n"
        "total = sum(float(r['amount']) for r in csv.DictReader(open('orders.csv')))\n"
        "open('out/total.txt', 'w').write(f'{total:.2f}\\n')\n"
        "total"
    )
    script = script_file(
        tmp_path,
        {
            "plan": one_step_plan("python_execute", {"code": code}),
            "rethink": "<status>continue</status>",
            "answer": "The amounts add up to 49.75.",
        },
    )
    history = tmp_path / "h.jsonl"
    outputs = tmp_path / "outputs"
    done = agent_run(
        tmp_path,
        "What is the total of the amount column?",
        "--engine", "scripted", "--script", script,
        "--file", str(orders), "--outputs", str(outputs), "--history", str(history),
    )  # fmt: skip

    assert done.returncode == 0, done.stdout + done.stderr
    assert "The amounts add up to 49.75." in done.stdout
    saved = list(outputs.glob("*/total.txt"))
    assert len(saved) == 1 and saved[0].read_text() == "49.75\n"
    assert f"wrote: {saved[0]}" in done.stdout
    final = [e for e in read_history_file(history) if e.type == "final"][-1]
    digest = hashlib.sha256(b"49.75\n").hexdigest()
    assert final.meta["files"] == [{"name": "out/total.txt", "size": 6, "sha256": digest}]
