"""``python -m agent_py eval``: the real-task suite, run in the page as a user runs it.

The page is opened once in Chromium with the chosen engine (the scripted test engine, the
CPU engine, or WebLLM in a browser with a GPU); the suite's MCP server ("atlas") runs on
loopback and is added as the panel would add it; then each task runs in turn. Per task it
prints pass or fail, the model calls by purpose, tokens and time, and keeps the run's
JSONL history; the summary ends with the line ``N passed, M failed``. CPython only.
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from agent_py.cli.terminal import PageAgent, SetupError
from agent_py.core.events import Event
from agent_py.evals.suite import EvalTask, Split, Tier, Verdict, check

SERVER_START_S = 60.0  # a hang guard: the server starts in about a second


@dataclass
class TaskReport:
    task: EvalTask
    verdict: Verdict
    state: str
    answer: str
    error: str | None
    failure: str | None
    model_calls: dict[str, int]
    prompt_tokens: int
    completion_tokens: int
    seconds: float

    @property
    def wrong_completed(self) -> bool:
        """Reported completed, and wrong: what a user would take for an answer."""
        return self.state == "completed" and not self.verdict.passed

    def line(self) -> str:
        mark = "PASS" if self.verdict.passed else "ERROR" if self.verdict.errored else "FAIL"
        calls = " ".join(f"{k}={v}" for k, v in sorted(self.model_calls.items())) or "none"
        shown = self.answer if self.state == "completed" else f"[{self.state}] {self.error}"
        shown = " ".join((shown or "").split())[:120]
        why = f"  ({self.verdict.why})" if not self.verdict.passed else ""
        return (
            f"{mark} {self.task.id:<20} {self.seconds:6.1f} s  calls {calls}  "
            f"tokens {self.prompt_tokens}+{self.completion_tokens}  → {shown}{why}"
        )


@dataclass
class SuiteReport:
    engine: str
    model: str
    reports: list[TaskReport] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(r.verdict.passed for r in self.reports)

    def summary(self) -> dict[str, Any]:
        calls: Counter[str] = Counter()
        for report in self.reports:
            calls.update(report.model_calls)
        tuning = [r for r in self.reports if r.task.split is Split.TUNING]
        tiers = {}
        ran_full = any(r.task.tier is Tier.FULL for r in tuning)
        for tier in Tier:
            of_tier = [r for r in tuning if tier is Tier.FULL or r.task.tier is tier]
            if of_tier and (tier is not Tier.FULL or ran_full):
                tiers[tier.value] = _score(of_tier)
        splits = {
            split.value: _score(of_split)
            for split in Split
            if (of_split := [r for r in self.reports if r.task.split is split])
        }
        return {
            "engine": self.engine,
            "model": self.model,
            "passed": self.passed,
            "failed": len(self.reports) - self.passed,
            "errors": sum(r.verdict.errored for r in self.reports),
            "wrong_completed": sum(r.wrong_completed for r in self.reports),
            "tiers": tiers,
            "splits": splits,
            "model_calls": dict(calls),
            "prompt_tokens": sum(r.prompt_tokens for r in self.reports),
            "completion_tokens": sum(r.completion_tokens for r in self.reports),
            "seconds": round(sum(r.seconds for r in self.reports), 1),
            "tasks": {
                r.task.id: {
                    "split": r.task.split.value,
                    "passed": r.verdict.passed,
                    "errored": r.verdict.errored,
                    "why": r.verdict.why,
                    "state": r.state,
                    "failure": r.failure,
                    "answer": r.answer,
                    "error": r.error,
                    "model_calls": r.model_calls,
                    "seconds": round(r.seconds, 1),
                }
                for r in self.reports
            },
        }


def _score(reports: list[TaskReport]) -> dict[str, Any]:
    """Passed, errors and wrong answers reported completed, of ``reports``; the median time."""
    return {
        "passed": sum(r.verdict.passed for r in reports),
        "tasks": len(reports),
        "errors": sum(r.verdict.errored for r in reports),
        "wrong_completed": sum(r.wrong_completed for r in reports),
        "median_seconds": round(statistics.median(r.seconds for r in reports), 1),
    }


MODEL_SETTING = {"cpu": "cpu_model", "webllm": "model", "openai": "openai_model"}
"""The setting that names the model, per engine."""


def run_suite(
    tasks: list[EvalTask],
    *,
    engine: str,
    artifacts: Path,
    settings: dict[str, Any] | None = None,
    task_timeout_s: float = 900,
    browser_path: str | None = None,
    headed: bool = False,
    browser_args: list[str] | None = None,
    out: TextIO = sys.stdout,
) -> SuiteReport:
    """Run ``tasks`` in the page; raises SetupError when the page or its engine cannot run."""
    artifacts.mkdir(parents=True, exist_ok=True)
    with (
        atlas_server(artifacts / "atlas-server.log") as mcp_url,
        PageAgent(
            engine=engine,
            settings=settings,
            browser_path=browser_path,
            headed=headed,
            browser_args=browser_args or [],
            mcp_servers=[{"name": "atlas", "url": mcp_url, "transport": "fetch"}],
        ) as page,
    ):
        if not page.usable:
            raise SetupError(f"no model engine can run: {page.why_unusable()}")
        kind = str(page.engine.get("name"))
        values = page.page.evaluate("window.agentApp.settings()") or {}
        model = str(values.get(MODEL_SETTING.get(kind, "")) or "")
        print(f"engine: {page.engine['label']}", file=out, flush=True)
        report = SuiteReport(engine=kind, model=model)
        for task in tasks:
            history = artifacts / f"{task.id}.jsonl"
            with history.open("w", encoding="utf-8") as file:

                def record(raw: dict[str, Any], file: TextIO = file) -> None:
                    file.write(Event.model_validate(raw).to_json() + "\n")
                    file.flush()

                page.on_event = record
                started = time.perf_counter()
                script = task.script if engine == "scripted" else None
                # Every task is a session of its own: no task sees another's turns.
                result = page.run(
                    task.question, script=script, timeout_s=task_timeout_s, session=[]
                )
                if task.follow_up is not None and result is not None:
                    first = result
                    script = task.follow_up.script if engine == "scripted" else None
                    result = page.run(
                        task.follow_up.question, script=script, timeout_s=task_timeout_s
                    )
                    result = _both_turns(first, result)
                seconds = time.perf_counter() - started
                if result is not None:
                    page.end_session()  # its session_end goes into this task's file
            task_report = _report(task, result, seconds, page)
            report.reports.append(task_report)
            print(task_report.line(), file=out, flush=True)
    (artifacts / "summary.json").write_text(json.dumps(report.summary(), indent=1) + "\n")
    return report


def _both_turns(first: dict[str, Any], second: dict[str, Any] | None) -> dict[str, Any] | None:
    """A two-turn task's outcome: the follow-up's, with the model's work of both turns."""
    if second is None:
        return None
    one, two = first.get("stats") or {}, second.get("stats") or {}
    calls = dict(one.get("model_calls") or {})
    for purpose, count in (two.get("model_calls") or {}).items():
        calls[purpose] = calls.get(purpose, 0) + count
    stats = {
        "model_calls": calls,
        "prompt_tokens": int(one.get("prompt_tokens") or 0) + int(two.get("prompt_tokens") or 0),
        "completion_tokens": int(one.get("completion_tokens") or 0)
        + int(two.get("completion_tokens") or 0),
    }
    return {**second, "stats": stats}


def _report(
    task: EvalTask, result: dict[str, Any] | None, seconds: float, page: PageAgent
) -> TaskReport:
    if result is None:
        why = f"the page could not run the task: {page.page_error()}"
        verdict = Verdict(passed=False, errored=True, why=why)
        return TaskReport(task, verdict, "failed", "", why, "internal", {}, 0, 0, 0)
    state, answer = str(result["state"]), str(result.get("answer") or "")
    error: str | None = result.get("error")
    failure: str | None = result.get("failure")
    stats = result.get("stats") or {}
    return TaskReport(
        task=task,
        verdict=check(task, state, answer, error, failure),
        state=state,
        answer=answer,
        error=error,
        failure=failure,
        model_calls=dict(stats.get("model_calls") or {}),
        prompt_tokens=int(stats.get("prompt_tokens") or 0),
        completion_tokens=int(stats.get("completion_tokens") or 0),
        seconds=seconds,
    )


def print_summary(report: SuiteReport, artifacts: Path, out: TextIO = sys.stdout) -> None:
    summary = report.summary()
    parts = [
        (f"{name} tier" if name in summary["tiers"] else name, score)
        for name, score in [*summary["tiers"].items(), *summary["splits"].items()]
        if name != Split.TUNING.value
    ]
    calls = " ".join(f"{k}={v}" for k, v in sorted(summary["model_calls"].items()))
    print(file=out)
    for name, score in parts:
        print(
            f"score: {name} {score['passed']}/{score['tasks']} "
            f"({100 * score['passed'] / score['tasks']:.0f}%); wrong answers reported completed "
            f"{score['wrong_completed']}; engine errors {score['errors']}; "
            f"median {score['median_seconds']} s a task",
            file=out,
        )
    print(
        f"model calls: {calls or 'none'}; tokens {summary['prompt_tokens']}+"
        f"{summary['completion_tokens']}; {summary['seconds']} s in tasks; runs: {artifacts}",
        file=out,
    )
    errors = f" ({summary['errors']} of them engine errors)" if summary["errors"] else ""
    print(f"{summary['passed']} passed, {summary['failed']} failed{errors}", file=out, flush=True)


@contextmanager
def atlas_server(log: Path) -> Iterator[str]:
    """The suite's MCP server on a free loopback port; yields its endpoint URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "agent_py.evals.atlas_server", str(port)],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if process.poll() is not None:
                raise SetupError(f"the suite's MCP server exited:\n{log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise SetupError("the suite's MCP server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
