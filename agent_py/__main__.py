"""The agent from the terminal (CPython).

``python -m agent_py run "task"`` runs a task in the page, in headless Chromium, with the best
engine the browser offers (WebLLM on WebGPU, else the CPU engine).
``python -m agent_py demo "task"`` runs a task in-process with the scripted demo model.
Exit codes: 0 the task completed, 1 it failed or was stopped, 2 a usage or set-up problem.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from agent_py.agent import Agent, AgentConfig
from agent_py.demo import DEMO_LABEL, demo_llm
from agent_py.events import AgentState, Event
from agent_py.history import FileSink
from agent_py.terminal import EXIT_FAILED, EXIT_OK, EXIT_SETUP, describe, run_in_browser
from agent_py.tools import JavascriptExecutor, LLMGenerator
from agent_py.tools.node_runner import NodeRunner


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
        return EXIT_FAILED
    print(result.answer)
    stats = result.stats
    print(
        f"\n{stats.total_model_calls} model calls {stats.model_calls}, "
        f"{stats.steps_run} steps, {stats.wall_time_s:.2f} s; history: {history}"
    )
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent_py", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run a task in the page, in headless Chromium")
    run.add_argument("task", help="the task, in words")
    run.add_argument(
        "--history", type=Path, default=Path(".artifacts/history/run.jsonl"), help="JSONL file"
    )
    run.add_argument(
        "--engine",
        choices=["auto", "webllm", "cpu", "scripted"],
        default="auto",
        help="auto: WebLLM with WebGPU, else the CPU engine; scripted: tests only",
    )
    run.add_argument("--script", type=Path, help="replies for the scripted engine (JSON file)")
    run.add_argument("--settings", help="page settings as JSON, e.g. '{\"max_tokens\": 256}'")
    run.add_argument("--timeout", type=float, default=1800, help="seconds for the whole task")

    demo = commands.add_parser("demo", help="run a task with the scripted demo model")
    demo.add_argument("task", help="the task, in words")
    demo.add_argument(
        "--history", type=Path, default=Path(".artifacts/history/demo.jsonl"), help="JSONL file"
    )
    args = parser.parse_args(argv)

    if args.command == "demo":
        return asyncio.run(run_demo(args.task, args.history))
    if (args.engine == "scripted") != (args.script is not None):
        parser.error("--script goes with --engine scripted, and the scripted engine needs it")
    try:
        script = json.loads(args.script.read_text()) if args.script else None
        settings = json.loads(args.settings) if args.settings else None
    except (OSError, ValueError) as exc:
        print(f"cannot read the options: {exc}", file=sys.stderr)
        return EXIT_SETUP
    return run_in_browser(
        args.task,
        history=args.history,
        engine=args.engine,
        script=script,
        settings=settings,
        timeout_s=args.timeout,
    )


if __name__ == "__main__":
    sys.exit(main())
