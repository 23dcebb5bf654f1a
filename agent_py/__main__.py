"""The agent from the terminal (CPython).

``python -m agent_py demo "task"`` runs a task with the scripted demo model and the real
built-in tools (JavaScript through Node), printing progress as it happens.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from agent_py.agent import Agent, AgentConfig
from agent_py.demo import DEMO_LABEL, demo_llm
from agent_py.events import AgentState, Event, EventType
from agent_py.history import FileSink
from agent_py.tools import JavascriptExecutor, LLMGenerator
from agent_py.tools.node_runner import NodeRunner


def describe(event: Event) -> str | None:
    """One line for the terminal, or None for events not worth a line."""
    where = f"[{event.step}] " if event.step else ""
    match event.type:
        case EventType.STATE:
            return f"· {event.content}"
        case EventType.PLAN_STARTED:
            lines = [f"plan: {event.content}"]
            for task in event.meta["plan"]["tasks"]:
                lines.append(f"  {task['task_id']}: {task['task_goal']}")
                lines += [
                    f"    {s['step_id']} {s['tool_name']}: {s['step_goal']}" for s in task["steps"]
                ]
            return "\n".join(lines)
        case EventType.STEP_STARTED:
            return f"{where}started ({event.meta['tool']}): {event.content}"
        case EventType.THINKING:
            return f"{where}thinking: {event.content[:200]}"
        case EventType.STEP_COMPLETED | EventType.STEP_FAILED:
            status = "done" if event.type is EventType.STEP_COMPLETED else "FAILED"
            return f"{where}{status} in {event.meta['seconds']:.2f} s: {event.content[:300]}"
        case EventType.REFLECTION:
            return f"rethink: {event.meta['status']}"
        case _:
            return None


async def run_demo(task: str, history: Path) -> int:
    print(f"model: {DEMO_LABEL}")

    def show(event: Event) -> None:
        line = describe(event)
        if line:
            print(line, flush=True)

    agent = Agent(
        llm=demo_llm(),
        tools=[LLMGenerator(), JavascriptExecutor(NodeRunner())],
        on_event=show,
        config=AgentConfig(),
        sinks=[FileSink(history)],
    )
    result = await agent.task(task)
    await agent.close()
    print()
    if result.state is not AgentState.COMPLETED:
        print(f"failed: {result.error}", file=sys.stderr)
        return 1
    print(result.answer)
    stats = result.stats
    print(
        f"\n{stats.total_model_calls} model calls {stats.model_calls}, "
        f"{stats.steps_run} steps, {stats.wall_time_s:.2f} s; history: {history}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent_py", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run a task with the scripted demo model")
    demo.add_argument("task", help="the task, in words")
    demo.add_argument(
        "--history", type=Path, default=Path(".artifacts/history/demo.jsonl"), help="JSONL file"
    )
    args = parser.parse_args(argv)
    return asyncio.run(run_demo(args.task, args.history))


if __name__ == "__main__":
    sys.exit(main())
