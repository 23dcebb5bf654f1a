"""Real tasks, end to end, on the CPU engine with the default bundled model, in headless
Chromium (no GPU): the README's task through ``python -m agent_py run``, and a subset of the
real-task suite's small tier through ``python -m agent_py eval``. Both assert the answers.

The model is a 0.5B-parameter model on two CPU cores, so these take minutes. Every wait is
bounded by the run's own end (a process exit); the deadlines are hang guards sized for a
machine whose cores are busy with other work, never a measure of speed (the benchmarks and
``python -m agent_py eval`` print the times).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_py import read_history_file
from agent_py.core.grammar import compact_grammar
from agent_py.core.plan import plan_json_schema
from agent_py.core.profiles import DEFAULT_CPU_MODEL, profile_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 3600
# Small-tier tasks the default model solves with the default engine (docs/benchmarks.md), one
# of each kind: arithmetic, a string, a follow-up turn that needs the first turn's result, an
# MCP tool (its arguments from a second call), and a task that cannot be done (it must end
# failed, with the reason).
SUBSET = ["js-divide", "js-upper", "turn-double", "mcp-add", "cannot-file"]


def agent_py(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_py", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=HANG_GUARD_S,
        check=False,
    )


def readme_task(history: Path, profile: Path) -> subprocess.CompletedProcess[str]:
    return agent_py(
        "run",
        "Use JavaScript to compute 6 times 7.",
        "--history",
        str(history),
        "--browser-profile",
        str(profile),
        "--timeout",
        "1800",
    )


def test_the_readme_task_gives_42_on_the_cpu_engine(cpu_model: Path, tmp_path: Path) -> None:
    history = tmp_path / "cpu.jsonl"
    done = readme_task(history, tmp_path / "profile")

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # A fresh profile: the planner prompt's state comes from the page, where set-up shipped
    # it (scripts/ship_prompt_states.py), instead of being computed.
    shipped = "prompt restored from the state set-up shipped with the page"
    assert shipped in done.stdout, "run 'bash scripts/setup.sh --browser' (it ships the state)"
    assert "engine: CPU engine" in done.stdout
    assert "no WebGPU adapter" in done.stdout  # why the CPU engine was chosen
    events = read_history_file(history)
    # The model wrote the plan under its profile's compact grammar, with the code inline:
    # one model call in all, and the answer is the step's value.
    plan_call = next(e for e in events if e.type == "assistant" and e.meta["purpose"] == "plan")
    assert plan_call.meta["usage"]["decode_tokens_per_s"] > 0
    # The planner's fixed prompt was prefilled once the page was ready: the plan call
    # computed only the task's own words.
    assert plan_call.meta["usage"]["cached_prompt_tokens"] >= 500
    assert "\n" not in plan_call.content  # no whitespace between JSON tokens
    final = next(e for e in events if e.type == "final")
    assert final.meta["state"] == "completed" and "42" in final.content
    assert f"\n{final.content}\n" in done.stdout  # the answer the terminal printed
    assert final.meta["stats"]["model_calls"] == {"plan": 1}
    actions = [e for e in events if e.type == "action"]
    assert [a.meta["tool"] for a in actions] == ["javascript_execute"]
    shape = profile_for("cpu", DEFAULT_CPU_MODEL).plan_shape
    schema = plan_json_schema(["llm_generator", "javascript_execute"], shape)
    assert compact_grammar(schema) is not None

    # The second run in the same browser profile restores the state from the browser's
    # storage, where the first run kept it, and answers the same.
    again = readme_task(tmp_path / "again.jsonl", tmp_path / "profile")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "restored from the saved state" in again.stdout
    events = read_history_file(tmp_path / "again.jsonl")
    final = next(e for e in events if e.type == "final")
    assert final.meta["state"] == "completed" and "42" in final.content
    plan_call = next(e for e in events if e.type == "assistant" and e.meta["purpose"] == "plan")
    assert plan_call.meta["usage"]["cached_prompt_tokens"] >= 500


def test_a_small_tier_subset_answers_right_on_the_cpu_engine(
    cpu_model: Path, tmp_path: Path
) -> None:
    done = agent_py("eval", "--engine", "cpu", "--only", ",".join(SUBSET), "--out", str(tmp_path))

    summary_file = tmp_path / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == f"{len(SUBSET)} passed, 0 failed"
    tasks = summary["tasks"]
    assert "12" in tasks["js-divide"]["answer"]
    assert "HELLO" in tasks["js-upper"]["answer"]
    assert tasks["js-upper"]["model_calls"] == {"plan": 1}  # the code inline in the plan
    assert "48" in tasks["turn-double"]["answer"]  # 15 plus 9, then doubled
    assert "43" in tasks["mcp-add"]["answer"]  # the atlas server's add tool
    assert tasks["mcp-add"]["model_calls"] == {"plan": 1, "arguments": 1}
    assert tasks["cannot-file"]["state"] == "failed" and tasks["cannot-file"]["error"]
