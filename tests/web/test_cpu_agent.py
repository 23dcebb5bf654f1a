"""A real task, end to end, on the CPU engine with the real Gemma 3 270M GGUF, driven by
``python -m agent_py run`` (the page in headless Chromium, no GPU).

A base model this small says little worth asserting, so the test asserts structure: the plan
came from the model under the plan schema and validates; every step ran with arguments the
model produced under that tool's schema; a final answer arrived; the engine reported speed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from agent_py import read_history_file
from agent_py.plan import PlanShape, plan_json_schema
from agent_py.tools import JavascriptExecutor, LLMGenerator

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TOOL_SCHEMAS = {
    LLMGenerator.name: LLMGenerator.input_schema,
    JavascriptExecutor.name: JavascriptExecutor.input_schema,
}


def test_a_real_task_runs_on_the_cpu_engine_from_the_terminal(
    cpu_model: Path, tmp_path: Path
) -> None:
    history = tmp_path / "cpu.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent_py",
            "run",
            "Use JavaScript to compute 6 times 7.",
            "--engine",
            "auto",
            "--history",
            str(history),
            "--timeout",
            "1500",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1800,
        check=False,
    )

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "engine: CPU engine" in done.stdout
    assert "no WebGPU adapter" in done.stdout  # why the CPU engine was chosen
    events = read_history_file(history)

    plan_events = [e for e in events if e.type == "plan_started"]
    assert len(plan_events) == 1
    shape = PlanShape(max_tasks=2, max_steps_per_task=2, max_text_chars=80, with_arguments=False)
    schema = plan_json_schema(list(TOOL_SCHEMAS), shape)
    jsonschema.validate(plan_events[0].meta["plan"], schema)
    plan_call = next(e for e in events if e.type == "assistant" and e.meta["purpose"] == "plan")
    assert plan_call.meta["usage"]["decode_tokens_per_s"] > 0

    started = [e.step for e in events if e.type == "step_started"]
    actions = {e.step: e for e in events if e.type == "action"}
    assert started and set(started) == set(actions)
    for action in actions.values():
        jsonschema.validate(action.meta["arguments"], TOOL_SCHEMAS[action.meta["tool"]])
    argument_calls = [
        e for e in events if e.type == "assistant" and e.meta["purpose"] == "arguments"
    ]
    assert len(argument_calls) >= len(started)  # the model wrote every step's arguments

    final = [e for e in events if e.type == "final"]
    assert len(final) == 1 and final[0].meta["state"] == "completed"
    assert final[0].content.strip()
