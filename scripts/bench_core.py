"""Benchmark of the agent core in CPython with a scripted model.

Prints, for a few scripted tasks:
- model calls per task by purpose, next to what the original design makes
  (1 plan + 1 per step + 1 rethink per task);
- reloads and unloads per task under each residency policy;
- orchestration overhead per step: wall time minus model and tool time, per step;
- the largest prompt sent per purpose, next to what the window leaves for it, in a long
  run with big results and in a run with 40 MCP-sized tools.

Numbers only; it never fails on time. Run: ``.venv/bin/python scripts/bench_core.py``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import dataclass
from typing import Any

from agent_py import (
    Agent,
    AgentConfig,
    LLMGenerator,
    ModelRoles,
    ResidencyPolicy,
    ScriptedLLM,
    ToolBase,
    ToolContext,
    ToolResult,
)
from agent_py.core.budget import prompt_tokens
from agent_py.core.llm import CallPurpose

REPEATS = 30


class Compute(ToolBase):
    """An instant tool, so the timing is the agent's own work."""

    name = "compute"
    description = "Adds numbers."
    input_schema = {
        "type": "object",
        "properties": {"numbers": {"type": "array", "items": {"type": "number"}}},
        "required": ["numbers"],
    }

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(str(sum(arguments["numbers"])), data=sum(arguments["numbers"]))


@dataclass
class Scenario:
    name: str
    tasks: list[list[tuple[str, bool]]]  # per task: (tool, literal arguments?)


SCENARIOS = [
    Scenario("1 task, 1 literal step", [[("compute", True)]]),
    Scenario("2 tasks, 2 steps each", [[("compute", True), ("compute", False)]] * 2),
    Scenario(
        "3 tasks, mixed tools",
        [
            [("compute", True), ("compute", True), ("llm_generator", True)],
            [("llm_generator", False), ("compute", False)],
            [("llm_generator", True)],
        ],
    ),
]


def build_llm(scenario: Scenario) -> ScriptedLLM:
    tasks, n = [], 0
    for t, steps in enumerate(scenario.tasks, start=1):
        planned = []
        for tool, literal in steps:
            n += 1
            step: dict[str, Any] = {
                "step_id": f"s{n}",
                "step_goal": f"step {n}",
                "tool_name": tool,
                "tool_intent": "bench",
                "expected_output": "x",
            }
            if literal:
                step["arguments"] = (
                    {"numbers": [n, 1]} if tool == "compute" else {"prompt": f"write {n}"}
                )
            planned.append(step)
        tasks.append({"task_id": f"t{t}", "task_goal": f"task {t}", "steps": planned})
    plan = f"<plan>{json.dumps({'tasks': tasks})}</plan>"

    def arguments(messages: Any, call: Any) -> str:
        return '{"numbers": [1, 2]}' if call.tool == "compute" else '{"prompt": "write"}'

    def rethink(messages: Any, call: Any) -> str:
        # As a model following the prompt would: the last rethink gives the final answer.
        if "(none: this was the last task)" in messages[-1]["content"]:
            return "<status>done</status><final>the answer</final>"
        return "<status>continue</status>"

    return ScriptedLLM.replaying(
        {"plan": plan, "arguments": arguments, "generate": "generated text", "rethink": rethink}
    )


async def run_once(
    scenario: Scenario, policy: ResidencyPolicy, executor: str | None = None
) -> tuple[Any, float]:
    config = AgentConfig(models=ModelRoles(planner="m1", executor=executor), residency=policy)
    agent = Agent(llm=build_llm(scenario), tools=[Compute(), LLMGenerator()], config=config)
    started = time.perf_counter()
    result = await agent.task("bench")
    wall = time.perf_counter() - started
    await agent.close()
    assert result.state.value == "completed", result.error
    return result.stats, wall


async def main() -> None:
    print("agent_py core benchmark (CPython, scripted model)\n")
    print("model calls per task: ours vs the original design (1 plan + 1/step + 1 rethink/task)")
    for scenario in SCENARIOS:
        stats, _ = await run_once(scenario, ResidencyPolicy.KEEP_WARM)
        steps = sum(len(t) for t in scenario.tasks)
        original = 1 + steps + len(scenario.tasks)
        by_purpose = ", ".join(f"{k}={v}" for k, v in sorted(stats.model_calls.items()))
        print(
            f"  {scenario.name:28s} ours {stats.total_model_calls:2d} ({by_purpose}); "
            f"original {original:2d}"
        )

    print("\nreloads / unloads per task (keep_warm unloads once more when the agent closes)")
    policies: list[tuple[str, ResidencyPolicy, str | None]] = [
        ("per_step", ResidencyPolicy.PER_STEP, None),
        ("keep_warm", ResidencyPolicy.KEEP_WARM, None),
        ("auto, one model", ResidencyPolicy.AUTO, None),
        ("auto, two models", ResidencyPolicy.AUTO, "m2"),
    ]
    for scenario in SCENARIOS:
        cells = []
        for label, policy, executor in policies:
            stats, _ = await run_once(scenario, policy, executor)
            cells.append(f"{label}: {stats.reloads}/{stats.unloads}")
        print(f"  {scenario.name:28s} " + "; ".join(cells))

    print(f"\norchestration overhead per step (median of {REPEATS} runs, model time excluded)")
    for scenario in SCENARIOS:
        steps = sum(len(t) for t in scenario.tasks)
        samples = []
        for _ in range(REPEATS):
            stats, wall = await run_once(scenario, ResidencyPolicy.KEEP_WARM)
            samples.append((wall - stats.model_time_s) / steps * 1000)
        print(
            f"  {scenario.name:28s} {statistics.median(samples):6.3f} ms/step "
            f"(min {min(samples):.3f}, max {max(samples):.3f})"
        )

    print("\nlargest prompt per purpose, estimated tokens / tokens the window leaves for it")
    long_run = [
        {
            "task_id": f"t{n}",
            "task_goal": f"report {n}",
            "steps": [
                {
                    "step_id": f"s{n}",
                    "step_goal": f"report {n}",
                    "tool_name": "report",
                    "arguments": {"topic": f"topic {n}"},
                }
            ],
        }
        for n in range(1, 41)
    ]
    await largest_prompts("40 tasks, 3 KB results", [Report()], long_run)
    one_remote = [
        {
            "task_id": "t1",
            "task_goal": "call op 7",
            "steps": [
                {
                    "step_id": "s1",
                    "step_goal": "call op 7",
                    "tool_name": "svc7__op7",
                    "arguments": {"f0": "x"},
                }
            ],
        }
    ]
    await largest_prompts("40 MCP-sized tools", [remote_tool(i) for i in range(40)], one_remote)


class Report(ToolBase):
    """A verbose result, as a JavaScript step that prints a table would give."""

    name = "report"
    description = "Returns a long report for a topic."
    input_schema = {
        "type": "object",
        "properties": {"topic": {"type": "string"}},
        "required": ["topic"],
    }

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(f"{arguments['topic']}: a measured value.\n" * 120)


def remote_tool(index: int) -> ToolBase:
    """A tool with a schema the size of a typical MCP server's (about 240 tokens)."""

    class Remote(ToolBase):
        name = f"svc{index}__op{index}"
        description = f"Runs operation {index} of service {index}. " + "Details. " * 8
        input_schema = {
            "type": "object",
            "properties": {
                f"f{n}": {"type": "string", "description": f"value {n}"} for n in range(12)
            },
            "required": ["f0"],
        }

        async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
            return ToolResult(f"op {index} done")

    return Remote()


async def largest_prompts(label: str, tools: list[ToolBase], plan_tasks: list[Any]) -> None:
    plan = f"<plan>{json.dumps({'tasks': plan_tasks})}</plan>"
    llm = ScriptedLLM.replaying(
        {"plan": plan, "rethink": "<status>continue</status>", "answer": "the answer"}
    )
    config = AgentConfig()
    agent = Agent(llm=llm, tools=tools, config=config)
    result = await agent.task(f"bench: {label}")
    largest: dict[str, int] = {}
    for messages, call in llm.calls:
        used = prompt_tokens(messages, llm.count_tokens)
        largest[call.purpose.value] = max(largest.get(call.purpose.value, 0), used)
    window = config.context_window
    cells = ", ".join(
        f"{purpose} {tokens}/{window - config.budgets.for_purpose(CallPurpose(purpose))}"
        for purpose, tokens in largest.items()
    )
    print(f"  {label:28s} {result.state.value}: {cells} (window {window})")


if __name__ == "__main__":
    asyncio.run(main())
