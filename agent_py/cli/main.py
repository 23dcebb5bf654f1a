"""The agent from the terminal (CPython).

``python -m agent_py run "task"`` runs a task in the page, in headless Chromium, with the best
engine the browser offers (WebLLM on WebGPU, else the CPU engine).
``python -m agent_py demo "task"`` runs a task in-process with the scripted demo model.
``python -m agent_py eval`` runs the real-task suite in the page and prints its score.
Exit codes: 0 the task completed (eval: the score reached --min-score), 1 it failed or was
stopped (eval: the score fell short), 2 a usage or set-up problem.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Literal

from agent_py.cli.browser_launch import NETWORK_VARIABLE as NETWORK_VARIABLE
from agent_py.cli.demo import DEMO_LABEL, demo_llm
from agent_py.cli.mcp_servers import collect_servers, off_this_machine
from agent_py.cli.run_command import run_in_browser
from agent_py.cli.run_report import EXIT_FAILED, EXIT_OK, EXIT_SETUP, describe
from agent_py.cli.terminal import SetupError, WaitTimedOut
from agent_py.core.agent import Agent, AgentConfig
from agent_py.core.events import AgentState, Event
from agent_py.core.history import FileSink
from agent_py.tools import JavascriptExecutor, LLMGenerator, PythonExecutor
from agent_py.tools.node_runner import NodeRunner
from agent_py.tools.python_runner import SubprocessPyRunner


async def run_demo(task: str, history: Path) -> int:
    print(f"model: {DEMO_LABEL}")

    def show(event: Event) -> None:
        line = describe(event)
        if line:
            print(line, flush=True)

    agent = Agent(
        llm=demo_llm(),
        tools=[
            LLMGenerator(),
            JavascriptExecutor(NodeRunner()),
            PythonExecutor(SubprocessPyRunner()),
        ],
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
        "--session",
        type=Path,
        help="a session's JSONL history: the task continues it (a follow-up that may use its "
        "answers) and is appended to it; a new file starts the session. Replaces --history",
    )
    run.add_argument(
        "--engine",
        choices=["auto", "webllm", "cpu", "openai", "scripted"],
        default="auto",
        help="auto: WebLLM with WebGPU, else the CPU engine; openai: a model server "
        "(--base-url, --model); scripted: tests only",
    )
    add_model_server_options(run)
    run.add_argument(
        "--model",
        help="the model: for the CPU engine a bundled id (web/models.json) or a .gguf URL; for "
        "WebLLM a model id; for a model server (--engine openai) one of its models",
    )
    add_mcp_options(run, "join the page")
    run.add_argument(
        "--file",
        type=Path,
        action="append",
        default=[],
        dest="files",
        help="a file for the task (repeatable): the run's workspace holds these files, which "
        "its steps read (read_file, list_files, python_execute's open(), javascript_execute's "
        "readFile()) by their names",
    )
    run.add_argument(
        "--outputs",
        type=Path,
        default=Path(".artifacts/outputs"),
        help="where the files the run's steps write are saved, in a folder of the run's own",
    )
    run.add_argument("--script", type=Path, help="replies for the scripted engine (JSON file)")
    run.add_argument("--settings", help="page settings as JSON, e.g. '{\"max_tokens\": 256}'")
    run.add_argument("--timeout", type=float, default=1800, help="seconds for the whole task")
    run.add_argument(
        "--browser-profile",
        type=Path,
        default=Path(".artifacts/browser-profile"),
        help="the browser's storage, kept between runs: the model's file and its prefilled "
        "state, so the next run starts warm",
    )
    run.add_argument(
        "--fresh-browser", action="store_true", help="a fresh browser profile for this run only"
    )

    demo = commands.add_parser("demo", help="run a task with the scripted demo model")
    demo.add_argument("task", help="the task, in words")
    demo.add_argument(
        "--history", type=Path, default=Path(".artifacts/history/demo.jsonl"), help="JSONL file"
    )
    add_eval_command(commands)
    args = parser.parse_args(argv)
    if getattr(args, "engine", None) == "webllm":
        allow_weights_download()

    if args.command == "eval":
        return run_eval(args)
    if args.command == "demo":
        return asyncio.run(run_demo(args.task, args.history))
    if (args.engine == "scripted") != (args.script is not None):
        parser.error("--script goes with --engine scripted, and the scripted engine needs it")
    try:
        script = json.loads(args.script.read_text()) if args.script else None
        settings = json.loads(args.settings) if args.settings else None
        server = model_server_settings(args)
        mcp_servers = mcp_server_options(args)
    except (OSError, ValueError) as exc:
        print(f"cannot read the options: {exc}", file=sys.stderr)
        return EXIT_SETUP
    if server:
        settings = {**(settings or {}), **server}
    elif args.model:
        settings = {**(settings or {}), **model_setting(args.engine, args.model)}
    return run_in_browser(
        args.task,
        history=args.session or args.history,
        continue_session=args.session is not None,
        engine=args.engine,
        script=script,
        settings=settings,
        timeout_s=args.timeout,
        profile=None if args.fresh_browser else args.browser_profile,
        mcp_servers=mcp_servers,
        files=args.files,
        outputs=args.outputs,
    )


def model_setting(engine: str, model: str) -> dict[str, str]:
    """The page setting that picks ``model`` on ``engine`` (not a model server's: see
    model_server_settings). With ``auto``, a bundled CPU model's id or a .gguf file is the CPU
    engine's; any other name is WebLLM's."""
    from agent_py.cli.checkout import bundled_cpu_models

    cpu = engine == "cpu" or (
        engine == "auto" and (model.endswith(".gguf") or model in bundled_cpu_models())
    )
    return {"cpu_model": model} if cpu else {"model": model}


def add_model_server_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--base-url", help="the model server's OpenAI API, e.g. http://127.0.0.1:8080/v1"
    )
    command.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="the environment variable that holds the model server's API key "
        "(default OPENAI_API_KEY; none needed for a local server)",
    )


def model_server_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The page settings for ``--engine openai``; {} for other engines. Raises ValueError
    when a model server option is missing or given without it."""
    if args.engine != "openai":
        if args.base_url:
            raise ValueError("--base-url goes with --engine openai")
        return {}
    if not args.base_url or not args.model:
        raise ValueError("--engine openai needs --base-url and --model")
    settings = {"engine": "openai", "openai_base_url": args.base_url, "openai_model": args.model}
    key = os.environ.get(args.api_key_env, "")
    if key:
        settings["openai_api_key"] = key
    return settings


def add_mcp_options(command: argparse.ArgumentParser, joined: str) -> None:
    command.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="NAME=URL",
        help=f"an MCP server (Streamable HTTP, with CORS headers) whose tools {joined}, as "
        "name__tool; repeatable. A stdio server goes behind mcp-proxy: "
        "mcp-proxy --port 8931 --allow-origin '*' -- mcp-server-time",
    )
    command.add_argument(
        "--mcp-config",
        type=Path,
        metavar="FILE",
        help='MCP servers from a JSON file: {"mcpServers": {"NAME": {"url": "...", '
        '"headers": {"Authorization": "Bearer ..."}}}}',
    )


def mcp_server_options(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The servers of ``--mcp`` and ``--mcp-config``, as the page's servers list holds them.
    A server off this machine lets the browser leave loopback, unless the user said not to."""
    servers = collect_servers(args.mcp, args.mcp_config)
    remote = off_this_machine(servers)
    if remote:
        allow_internet(f"the MCP server at {remote[0]} is not on this machine")
    return servers


def add_eval_command(commands: Any) -> None:
    from agent_py.evals.suite import HELD_OUT_FILE, HELD_OUT_FILES_FILE, TASKS_FILE

    evaluate = commands.add_parser(
        "eval",
        help="run the real-task suite in the page and print the score",
        description="Runs the real-task suite in the page (headless Chromium) with one engine. "
        "For WebLLM, use a Chrome with a GPU: --engine webllm --browser "
        "/usr/bin/google-chrome --headed (see docs/suite.md).",
    )
    evaluate.add_argument(
        "--engine", choices=["scripted", "cpu", "webllm", "openai"], default="cpu"
    )
    add_model_server_options(evaluate)
    evaluate.add_argument(
        "--split",
        choices=["tuning", "held-out", "held-out-files", "all"],
        default="tuning",
        help="tuning (tasks.json, by --tier), held-out (heldout-v2.json: the sealed split, never "
        "used for tuning), held-out-files (heldout-files.json: sealed, on files and pages) or "
        "all; each split is scored apart",
    )
    evaluate.add_argument(
        "--tasks", type=Path, default=TASKS_FILE, help="the tuning split's file (JSON)"
    )
    evaluate.add_argument(
        "--held-out", type=Path, default=HELD_OUT_FILE, help="the held-out split's file (JSON)"
    )
    evaluate.add_argument(
        "--held-out-files",
        type=Path,
        default=HELD_OUT_FILES_FILE,
        help="the files-and-pages held-out split's file (JSON)",
    )
    evaluate.add_argument("--tier", choices=["small", "full"], default="small")
    evaluate.add_argument("--only", help="comma-separated task ids (overrides --tier)")
    evaluate.add_argument(
        "--model", help="CPU engine: a model id or .gguf URL; openai: the server's model"
    )
    add_mcp_options(evaluate, "join every task's page, besides the suite's own")
    evaluate.add_argument("--profile", choices=["auto", "tiny", "small", "full"], default="auto")
    evaluate.add_argument("--settings", help="more page settings as JSON (overrides)")
    evaluate.add_argument("--timeout", type=float, default=900, help="seconds per task (guard)")
    evaluate.add_argument("--out", type=Path, help="folder for the runs")
    evaluate.add_argument("--browser", help="browser executable (default: Debian's Chromium)")
    evaluate.add_argument("--browser-arg", action="append", default=[], help="extra browser flag")
    evaluate.add_argument("--headed", action="store_true", help="show the browser window")
    evaluate.add_argument(
        "--min-score", type=float, default=1.0, help="fraction of tasks that must pass for exit 0"
    )


def allow_weights_download() -> None:
    """WebLLM fetches its weights from the internet on first use, so a browser started for
    ``--engine webllm`` may leave loopback unless the user said otherwise."""
    allow_internet("WebLLM downloads its weights on first use")


def allow_internet(why: str) -> None:
    """Let the browser leave loopback, for ``why``, unless the user said otherwise."""
    if os.environ.setdefault(NETWORK_VARIABLE, "open") == "open":
        print(
            f"{why[:1].upper()}{why[1:]}: the browser may reach the internet "
            f"({NETWORK_VARIABLE}=loopback keeps it on this machine).",
            file=sys.stderr,
        )


def run_eval(args: argparse.Namespace) -> int:
    from agent_py.evals.runner import print_summary, run_suite
    from agent_py.evals.suite import Split, Tier, load_suite

    try:
        only = [t.strip() for t in args.only.split(",") if t.strip()] if args.only else None
        split: Split | Literal["all"] = "all" if args.split == "all" else Split(args.split)
        tasks = load_suite(
            split,
            tier=Tier(args.tier),
            only=only,
            tasks_file=args.tasks,
            held_out_file=args.held_out,
            held_out_files_file=args.held_out_files,
        )
        settings: dict[str, Any] = json.loads(args.settings) if args.settings else {}
        settings.update(model_server_settings(args))
        extra_servers = mcp_server_options(args)
    except (OSError, ValueError) as exc:
        print(f"cannot read the suite or the options: {exc}", file=sys.stderr)
        return EXIT_SETUP
    if args.model and args.engine in ("cpu", "webllm"):
        settings.update(model_setting(args.engine, args.model))
    if args.profile != "auto":
        settings["profile"] = args.profile
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = args.out or Path(".artifacts/eval") / f"{args.engine}-{stamp}"
    browser_args = list(args.browser_arg)
    if args.engine == "webllm" and "--enable-unsafe-webgpu" not in browser_args:
        browser_args.append("--enable-unsafe-webgpu")
    chosen = "chosen" if only else args.split if args.split.startswith("held-out") else args.tier
    print(f"{len(tasks)} tasks ({chosen}), engine {args.engine}")
    try:
        report = run_suite(
            tasks,
            engine=args.engine,
            artifacts=out,
            settings=settings or None,
            task_timeout_s=args.timeout,
            browser_path=args.browser,
            headed=args.headed,
            browser_args=browser_args,
            extra_servers=extra_servers,
        )
    except SetupError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_SETUP
    except WaitTimedOut as exc:  # the page never started: no task could run
        print(exc.message(args.timeout), file=sys.stderr)
        return EXIT_FAILED
    print_summary(report, out)
    score = report.passed / len(tasks) if tasks else 0.0
    return EXIT_OK if score >= args.min_score else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
