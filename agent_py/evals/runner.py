"""``python -m agent_py eval``: the real-task suite, run in the page as a user runs it.

The MCP servers the chosen tasks name start once on loopback: the suite's own ("atlas") and
the MCP project's reference servers ("time", "fetch", "git", behind mcp-proxy), with the
fixtures their tasks use (the pages ``{{site}}`` names, the repository ``{{repo}}`` names).
Tasks that name the same servers run in one page, opened in Chromium with the chosen engine
(the scripted test engine, the CPU engine, or WebLLM in a browser with a GPU), whose MCP
panel holds those servers as a user would add them. Per task it prints pass or fail, the
model calls by purpose, tokens and time, and keeps the run's JSONL history; the summary ends
with the line ``N passed, M failed``. Server logs go beside the histories. CPython only.
"""

from __future__ import annotations

import json
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from agent_py.cli.mcp_servers import report_servers
from agent_py.cli.terminal import PageAgent, SetupError
from agent_py.cli.workspace_files import replace_workspace
from agent_py.core.events import Event
from agent_py.evals.reference_servers import (
    REFERENCE_SERVERS,
    make_repository,
    reference_server,
    site_server,
)
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

SUITE_SERVERS = ("atlas", *REFERENCE_SERVERS)
"""The MCP servers the suite starts, in the order a page's panel lists them."""


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
    extra_servers: list[dict[str, Any]] | None = None,
    out: TextIO = sys.stdout,
) -> SuiteReport:
    """Run ``tasks`` in the page; raises SetupError when the page, its engine, a server or a
    fixture cannot run.

    The servers the tasks name start once, and the fixtures they use are made once (pages on
    loopback, the git repository under ``artifacts``). Tasks that name the same servers run in
    one page, whose MCP panel holds those servers and ``extra_servers`` (the user's own,
    entries as the panel saves them); the summary keeps the tasks' order."""
    artifacts.mkdir(parents=True, exist_ok=True)
    extra = list(extra_servers or [])
    taken = sorted({str(server["name"]) for server in extra} & set(SUITE_SERVERS))
    if taken:
        raise SetupError(f"{taken[0]!r} is one of the suite's MCP servers: name yours apart")
    order = {task.id: index for index, task in enumerate(tasks)}
    report = SuiteReport(engine=engine, model="")
    with ExitStack() as running:
        values = _fixtures(tasks, artifacts, running)
        filled = [task.filled(values) for task in tasks]
        urls = _servers(filled, artifacts, running, repository=values.get("repo"))
        for number, (servers, group) in enumerate(_by_servers(filled).items()):
            panel = [{"name": name, "url": urls[name], "transport": "fetch"} for name in servers]
            with PageAgent(
                engine=engine,
                settings=settings,
                browser_path=browser_path,
                headed=headed,
                browser_args=browser_args or [],
                mcp_servers=panel + extra,
            ) as page:
                if not page.usable:
                    raise SetupError(f"no model engine can run: {page.why_unusable()}")
                if number == 0:
                    kind = str(page.engine.get("name"))
                    chosen = page.page.evaluate("window.agentApp.settings()") or {}
                    model = str(chosen.get(MODEL_SETTING.get(kind, "")) or "")
                    report = SuiteReport(engine=kind, model=model)
                    print(f"engine: {page.engine['label']}", file=out, flush=True)
                print(f"servers: {', '.join(servers)} ({len(group)} tasks)", file=out, flush=True)
                if extra and number == 0:  # the user's servers, as run --mcp shows them
                    unusable = report_servers(page, extra, out, sys.stderr)
                    if unusable:
                        raise SetupError(f"the MCP server {', '.join(unusable)} cannot be used")
                for task in group:
                    task_report = _run_task(task, page, engine, artifacts, task_timeout_s)
                    report.reports.append(task_report)
                    print(task_report.line(), file=out, flush=True)
    report.reports.sort(key=lambda r: order[r.task.id])
    (artifacts / "summary.json").write_text(json.dumps(report.summary(), indent=1) + "\n")
    return report


def _by_servers(tasks: list[EvalTask]) -> dict[tuple[str, ...], list[EvalTask]]:
    """The tasks by the set of servers they name, in the order the sets first appear."""
    groups: dict[tuple[str, ...], list[EvalTask]] = {}
    for task in tasks:
        servers = tuple(sorted(set(task.servers), key=SUITE_SERVERS.index))
        groups.setdefault(servers, []).append(task)
    return groups


def _fixtures(tasks: list[EvalTask], artifacts: Path, running: ExitStack) -> dict[str, str]:
    """The placeholders' values: the pages served (``site``) and the repository made
    (``repo``), for the tasks that use them; one of each a run, the pages of every task file
    served together."""
    values: dict[str, str] = {}
    sites = {_key(t, "site") for t in tasks if "site" in t.placeholders()}
    if sites:
        pages = all_pages([json.loads(site) for site in sorted(sites)])
        log = artifacts / "site-server.log"
        values["site"] = running.enter_context(site_server(pages, log=log))
    repos = {_key(t, "repo") for t in tasks if "repo" in t.placeholders()}
    if repos:
        where = artifacts / "repo"
        if where.exists():
            shutil.rmtree(where)  # a repository an earlier run left in the same folder
        values["repo"] = str(make_repository(json.loads(_only(repos, "repo")), where))
    return values


def _key(task: EvalTask, name: str) -> str:
    """The task's fixture ``name`` as JSON: tasks whose fixtures are equal share one."""
    return json.dumps(task.fixtures.model_dump(mode="json")[name], sort_keys=True)


def all_pages(sites: list[dict[str, Any]]) -> dict[str, Any]:
    """The pages of every task file's ``site``, served together: a path two files give
    different pages is a setup error."""
    pages: dict[str, Any] = {}
    for site in sites:
        for path, page in site.items():
            if pages.setdefault(path, page) != page:
                raise SetupError(f"two task files give different pages at {path!r}")
    return pages


def _only(found: set[str], name: str) -> str:
    if len(found) > 1:
        raise SetupError(f"the tasks chosen come with different {name!r} fixtures: run them apart")
    return next(iter(found))


def _servers(
    tasks: list[EvalTask], artifacts: Path, running: ExitStack, *, repository: str | None
) -> dict[str, str]:
    """The URL of each server the tasks name, started for the rest of the run."""
    named = {name for task in tasks for name in task.servers}
    urls: dict[str, str] = {}
    for name in (name for name in SUITE_SERVERS if name in named):
        if name == "atlas":
            urls[name] = running.enter_context(atlas_server(artifacts / "atlas-server.log"))
            continue
        if name == "git" and repository is None:
            raise SetupError("the git server needs a repository: no task chosen uses {{repo}}")
        where = Path(repository) if name == "git" and repository else None
        urls[name] = running.enter_context(reference_server(name, artifacts, repository=where))
    return urls


def _run_task(
    task: EvalTask, page: PageAgent, engine: str, artifacts: Path, timeout_s: float
) -> TaskReport:
    """Run ``task`` (its placeholders filled) as a session of its own; its JSONL history
    goes to ``artifacts/ID.jsonl``."""
    history = artifacts / f"{task.id}.jsonl"
    with history.open("w", encoding="utf-8") as file:

        def record(raw: dict[str, Any]) -> None:
            file.write(Event.model_validate(raw).to_json() + "\n")
            file.flush()

        page.on_event = record
        # The task's files and no others: an earlier task's files (and what it wrote) are gone.
        replace_workspace(page.page, [(n, text.encode()) for n, text in task.files.items()])
        began = datetime.now(UTC)
        started = time.perf_counter()
        script = task.script if engine == "scripted" else None
        # Every task is a session of its own: no task sees another's turns.
        result = page.run(task.question, script=script, timeout_s=timeout_s, session=[])
        if task.follow_up is not None and result is not None:
            first = result
            script = task.follow_up.script if engine == "scripted" else None
            result = page.run(task.follow_up.question, script=script, timeout_s=timeout_s)
            result = _both_turns(first, result)
        seconds = time.perf_counter() - started
        during = (began, datetime.now(UTC))
        if result is not None:
            page.end_session()  # its session_end goes into this task's file
    return _report(task, result, seconds, page, during)


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
    task: EvalTask,
    result: dict[str, Any] | None,
    seconds: float,
    page: PageAgent,
    during: tuple[datetime, datetime] | None = None,
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
        verdict=check(task, state, answer, error, failure, during=during),
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
