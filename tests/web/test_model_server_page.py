"""The model server engine in the page (headless Chromium), against a real server: llama.cpp's
own llama-server (native) serving SmolLM2 on loopback (tests/model_server.py). The scripted
server of tests/fake_model_server.py plays one that ignores the reply format.

Without the server (scripts/setup_model_server.sh) these fail in CI and skip elsewhere."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_model_server import CORS, CorsFakeModelServer, chunk, stream, threaded
from tests.fake_model_server import MODEL as FAKE_MODEL
from tests.mcp.scripted_server import Reply, Request, sse_reply
from tests.model_server import MODEL, ServerProcess, llama_server, require_server
from tests.web.extension_support import activity, launch_with_extension, set_lists

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SIX_TIMES_SEVEN = "Use JavaScript to compute 6 times 7."
# A reply long enough to stop or break in the middle of: the text budget is raised, and the
# small model writes until it runs out.
LONG_TEXT = {
    "budgets": {"plan": 448, "arguments": 160, "generate": 1500, "rethink": 96, "answer": 192}
}
LONG_TASK = "Write a very long story about a lighthouse keeper and the sea, at least 1000 words."
GUARD_MS = 300_000  # a hang guard only: every wait below ends on an event


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with llama_server(tmp_path_factory.mktemp("model-server") / "server.log") as running:
        yield running


def model_server_settings(base_url: str, **more: Any) -> dict[str, Any]:
    return {"engine": "openai", "openai_base_url": base_url, "openai_model": MODEL, **more}


def open_app(page: Any, url: str, settings: dict[str, Any]) -> None:
    page.add_init_script(
        f"localStorage.setItem('agent_py.settings', {json.dumps(json.dumps(settings))});"
    )
    page.goto(url)
    page.wait_for_function("document.body.dataset.status === 'ready'", timeout=GUARD_MS)


def run(page: Any, question: str) -> None:
    page.get_by_role("textbox", name="Task").fill(question)
    page.get_by_role("button", name="Run").click()


def result(page: Any) -> dict[str, Any]:
    page.wait_for_function("window.agentApp.lastResult !== undefined", timeout=GUARD_MS)
    return dict(page.evaluate("window.agentApp.lastResult"))


def wait_streaming(page: Any, chars: int) -> None:
    """Until the live view shows ``chars`` characters of the step's streamed reply."""
    page.wait_for_function(
        f"document.getElementById('live').textContent.length >= {chars}", timeout=GUARD_MS
    )


def test_a_task_runs_on_the_server_reached_directly(
    page: Any, page_url: Any, server: ServerProcess, request_log: Any
) -> None:
    open_app(page, page_url("index.html"), model_server_settings(server.base_url))
    engine = page.evaluate("window.agentApp.engine")
    assert engine["name"] == "openai" and server.base_url in engine["label"]
    assert page.evaluate("window.agentApp.settingsInfo().profile.name") == "tiny"
    page.wait_for_function("window.agentApp.prepared !== undefined", timeout=GUARD_MS)
    assert page.evaluate("window.agentApp.prepared.server_models") == [MODEL]
    assert page.locator("#openai-models option").get_attribute("value") == MODEL

    run(page, SIX_TIMES_SEVEN)
    outcome = result(page)

    assert outcome["state"] == "completed", outcome.get("error")
    assert outcome["answer"].strip() == "42"
    server_origin = server.base_url.removesuffix("/v1")
    chats = [u for u in request_log.urls if u == f"{server.base_url}/chat/completions"]
    assert chats, "the page's own fetch reached the server"
    assert {u.split("/")[2] for u in request_log.urls} <= {
        request_log.origin.split("/")[2],
        server_origin.split("/")[2],
    }


def test_a_task_runs_on_the_server_through_the_extension(
    playwright: Any,
    tmp_path_factory: pytest.TempPathFactory,
    browser_settings: Any,
    page_url: Any,
    base_url: str,
    server: ServerProcess,
) -> None:
    context, worker = launch_with_extension(
        playwright, tmp_path_factory.mktemp("profile"), browser_settings.launch_options()
    )
    context.set_default_timeout(browser_settings.DEFAULT_TIMEOUT_MS)
    page_origin = base_url.rstrip("/")
    server_origin = server.base_url.removesuffix("/v1")
    try:
        set_lists((context, worker), pages=[page_origin], targets=[server_origin])
        page = context.new_page()
        settings = model_server_settings(server.base_url, openai_transport="bridge")
        open_app(page, page_url("index.html"), settings)

        run(page, SIX_TIMES_SEVEN)
        outcome = result(page)

        assert outcome["state"] == "completed", outcome.get("error")
        assert outcome["answer"].strip() == "42"
        chats = [
            entry
            for entry in activity(worker)
            if entry["method"] == "POST"
            and entry["target"] == f"{server.base_url}/chat/completions"
        ]
        assert chats and all(entry["page"] == page_origin for entry in chats)
    finally:
        context.close()


def test_stop_ends_a_streaming_reply_at_once_and_aborts_the_request(
    page: Any, page_url: Any, server: ServerProcess
) -> None:
    open_app(page, page_url("index.html"), model_server_settings(server.base_url, **LONG_TEXT))
    page.wait_for_function("window.agentApp.prepared !== undefined", timeout=GUARD_MS)
    cancels = server.log.read_text(errors="replace").count("cancel task")

    run(page, LONG_TASK)
    wait_streaming(page, 200)
    page.get_by_role("button", name="Stop").click()
    outcome = result(page)

    assert outcome["state"] == "cancelled", outcome
    # The server saw the request go away (llama-server cancels the task when the client leaves).
    server.wait_log("cancel task", seen=cancels)


def test_a_server_killed_mid_reply_fails_the_run_clearly_and_loses_no_history(
    page: Any, page_url: Any, tmp_path: Path
) -> None:
    with llama_server(tmp_path / "server.log") as doomed:
        open_app(page, page_url("index.html"), model_server_settings(doomed.base_url, **LONG_TEXT))
        run(page, LONG_TASK)
        # In the middle of the step's reply (not between two calls): its step is running and
        # its text is streaming.
        page.wait_for_selector('#run-view [data-step][data-status="running"]', timeout=GUARD_MS)
        wait_streaming(
            page, page.evaluate("document.getElementById('live').textContent.length") + 100
        )
        doomed.kill()
        outcome = result(page)

    # The step whose reply was cut says so; the run then fails on the server's absence (a
    # re-plan cannot reach it), naming the server.
    assert outcome["state"] == "failed"
    broken = [s for s in outcome["steps"] if "broke in the middle of a reply" in s["output"]]
    assert broken and not broken[0]["ok"], outcome["steps"]
    assert doomed.base_url in outcome["error"], outcome["error"]
    page.reload()
    page.wait_for_function("document.body.dataset.status === 'ready'", timeout=GUARD_MS)
    assert f"{LONG_TASK} — failed" in page.locator("#sessions").inner_text()
    page.get_by_role("button", name=f"Open session {LONG_TASK}").click()
    turn = page.locator('#run-view .turn[data-state="failed"]')
    assert turn.locator(".turn-question").text_content() == LONG_TASK
    assert "broke in the middle of a reply" in (turn.text_content() or "")
    failure = turn.locator(".outcome .failure")
    failure.wait_for()
    assert doomed.base_url in (failure.text_content() or "")


def test_a_wrong_model_and_an_unreachable_server_fail_with_what_to_change(
    page: Any, page_url: Any, server: ServerProcess
) -> None:
    open_app(
        page,
        page_url("index.html"),
        {**model_server_settings(server.base_url), "openai_model": "nope"},
    )
    run(page, SIX_TIMES_SEVEN)
    wrong = result(page)
    assert wrong["state"] == "failed"
    assert f"no model called 'nope'; it serves: {MODEL}" in wrong["error"]

    page.goto("about:blank")
    open_app(page, page_url("index.html"), model_server_settings("http://127.0.0.1:9/v1"))
    run(page, SIX_TIMES_SEVEN)
    unreachable = result(page)
    assert unreachable["state"] == "failed"
    assert "cannot be reached" in unreachable["error"] or "not running" in unreachable["error"]
    assert "OLLAMA_ORIGINS" in unreachable["error"]


def test_a_server_that_ignores_the_reply_format_meets_the_repair(page: Any, page_url: Any) -> None:
    """The plan comes back as prose (the format was ignored); the one repair call gets a plan,
    and the run goes on to the answer."""
    plan = {
        "tasks": [
            {
                "task_id": "t1",
                "task_goal": "multiply",
                "steps": [
                    {
                        "step_id": "s1",
                        "step_goal": "6 times 7",
                        "tool_name": "javascript_execute",
                        "expected_output": "the product",
                        "input": "return 6 * 7;",
                    }
                ],
            }
        ]
    }
    fake = CorsFakeModelServer(
        stream("I would multiply the numbers."),
        stream(json.dumps(plan)),
        stream("42"),
    )
    with threaded(fake) as base_url:
        open_app(
            page,
            page_url("index.html"),
            model_server_settings(base_url, openai_model=FAKE_MODEL, profile="tiny"),
        )
        run(page, SIX_TIMES_SEVEN)
        outcome = result(page)

    plans = [chat for chat in fake.chats if "grammar" in chat or "response_format" in chat]
    assert plans, "the plan call asked for a format, which the server ignored"
    assert any(
        "I would multiply the numbers." in message["content"]
        for chat in fake.chats[1:]
        for message in chat["messages"]
    ), "a repair call showed the model its unreadable plan"
    assert outcome["state"] == "completed", outcome.get("error")
    assert outcome["answer"].strip() == "42"


def terminal(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_py", "run", "--fresh-browser", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=GUARD_MS / 1000,
    )


def test_the_terminal_runs_a_task_on_the_server_and_exits_1_on_a_bad_one(
    server: ServerProcess, tmp_path: Path
) -> None:
    require_server()
    history = str(tmp_path / "run.jsonl")
    ok = terminal(
        "--engine",
        "openai",
        "--base-url",
        server.base_url,
        "--model",
        MODEL,
        "--history",
        history,
        SIX_TIMES_SEVEN,
    )
    assert ok.returncode == 0, ok.stderr
    lines = ok.stdout.splitlines()
    assert "42" in lines
    assert any(
        line.startswith("total ") and line.split()[1].replace(".", "").isdigit() for line in lines
    )

    wrong = terminal(
        "--engine",
        "openai",
        "--base-url",
        server.base_url,
        "--model",
        "nope",
        "--history",
        history,
        SIX_TIMES_SEVEN,
    )
    assert wrong.returncode == 1
    assert "no model called 'nope'" in wrong.stderr

    gone = terminal(
        "--engine",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        MODEL,
        "--history",
        history,
        SIX_TIMES_SEVEN,
    )
    assert gone.returncode == 1
    assert "127.0.0.1:9" in gone.stderr

    usage = terminal("--engine", "openai", "--model", MODEL, SIX_TIMES_SEVEN)
    assert usage.returncode == 2 and "--base-url" in usage.stderr


def test_the_servers_own_tokenizer_counts_the_prompt(server: ServerProcess) -> None:
    """llama-server's /tokenize, as the agent's prompt budget uses it: the messages' counts
    and the chat template's few tokens a message make the prompt the server reports."""
    import asyncio
    import concurrent.futures

    from agent_py.core.llm import CallInfo, CallPurpose
    from agent_py.engines.model_server import ModelServerLLM
    from agent_py.mcp.httpx_transport import HttpxTransport

    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Count from one to ten."},
    ]

    async def measure() -> tuple[list[int] | None, int]:
        llm = ModelServerLLM(HttpxTransport(), server.base_url)
        await llm.reload(MODEL)
        counts = await llm.count_tokens_exact([m["content"] for m in messages])
        call = CallInfo(purpose=CallPurpose.GENERATE, model=MODEL, max_tokens=1)
        reply = await llm.chat(messages, call)
        return counts, reply.usage.prompt_tokens

    # In a thread of its own: Playwright's sync API keeps an event loop in this one.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        counts, prompt_tokens = pool.submit(asyncio.run, measure()).result()
    assert counts is not None and all(n > 0 for n in counts), counts
    assert 3 * len(messages) <= prompt_tokens - sum(counts) <= 6 * len(messages) + 3


class StallingServer(CorsFakeModelServer):
    """Accepts every chat request, sends its headers and one empty chunk, then nothing."""

    def __init__(self) -> None:
        super().__init__(stream("unused"))
        self.stalled = 0
        self.never = asyncio.Event()  # never set: the reply stays open

        self.loop: asyncio.AbstractEventLoop | None = None

    def __call__(self, request: Request) -> Reply:
        if request.method == "POST" and request.path.endswith("/chat/completions"):
            self.stalled += 1
            self.loop = asyncio.get_running_loop()
            return sse_reply(chunk(""), self.never, headers=dict(CORS))
        return super().__call__(request)

    def release(self) -> None:
        """Let the held replies end (from another thread), so none outlives the server."""

        async def release() -> None:
            self.never.set()
            await asyncio.sleep(0.2)  # the held replies finish

        if self.loop is not None:
            asyncio.run_coroutine_threadsafe(release(), self.loop).result(30)


def test_a_server_that_stalls_ends_the_terminal_run_at_its_timeout(tmp_path: Path) -> None:
    """The whole run is bounded by --timeout, the model's preparation included, and the
    terminal says what it is waiting for while it waits, then exits 1 naming the server and
    the phase."""
    stalling = StallingServer()
    timeout_s = 60
    with threaded(stalling) as base_url:
        started = time.monotonic()
        stalled = terminal(
            "--engine", "openai", "--base-url", base_url, "--model", FAKE_MODEL,
            "--history", str(tmp_path / "run.jsonl"), "--timeout", str(timeout_s),
            SIX_TIMES_SEVEN,
        )  # fmt: skip
        took = time.monotonic() - started
        stalling.release()
    assert stalled.returncode == 1, stalled.stderr
    waiting = f"the model server at {base_url} to answer the planner's prompt"
    assert (
        f"failed: no answer within {timeout_s} s: still waiting for {waiting} "
        "(the model's preparation)" in stalled.stderr
    )
    notices = re.findall(rf"^waiting for {re.escape(waiting)} .*\((\d+) s\)$", stalled.stderr, re.M)
    assert notices and int(notices[0]) >= 5  # said while it waited, not only at the end
    assert stalling.stalled >= 1  # the server did get the request, and held it
    assert took < timeout_s + 40  # a hang guard: the browser's start and close on top


def model_bar_shows(page: Any, line: str) -> None:
    """Until the model bar's line starts with ``line``."""
    page.wait_for_function(
        "line => document.getElementById('progress-model-text').textContent.startsWith(line)",
        arg=line,
        timeout=GUARD_MS,
    )


def test_a_silent_server_shows_its_wait_in_the_model_bar_and_stop_ends_it(
    page: Any, page_url: Any
) -> None:
    """A server that sends nothing holds the model's preparation, then a run's plan request:
    the model bar says which wait, and for how long, and Stop ends either."""
    stalling = StallingServer()
    with threaded(stalling) as base_url:
        try:
            open_app(
                page,
                page_url("index.html"),
                model_server_settings(base_url, openai_model=FAKE_MODEL),
            )
            server = f"the model server at {base_url}"
            preparing = f"{server} to answer the planner's prompt (the model's preparation)"
            model_bar_shows(page, f"Waiting for {preparing} (")
            stop = page.get_by_role("button", name="Stop")
            assert stop.is_enabled()  # no run yet: Stop ends the preparation
            stop.click()
            page.wait_for_function("window.agentApp.prepared !== undefined", timeout=GUARD_MS)
            prepared = page.evaluate("window.agentApp.prepared")
            assert (
                not prepared["prefilled"] and "the preparation was stopped" in prepared["skipped"]
            )
            assert page.evaluate("document.body.dataset.status") == "ready"
            assert stop.is_disabled()

            run(page, SIX_TIMES_SEVEN)
            planning = f"{server} to answer the request for a plan"
            model_bar_shows(page, f"Waiting for {planning} (")
            stop.click()
            outcome = result(page)
            assert outcome["state"] == "cancelled", outcome.get("error")
            waits = page.evaluate("window.agentApp.waits()")
            assert [wait["what"] for wait in waits] == [preparing, planning]
            assert all(wait["shown"] for wait in waits)
            assert stalling.stalled == 2  # each request reached the server, and was held
        finally:
            stalling.release()


def test_a_silent_server_fails_the_preparation_and_the_run_at_the_silence_limit(
    page: Any, page_url: Any
) -> None:
    """With the silence limit set (Settings), a server that sends nothing fails the model's
    preparation and then the run's plan request, each naming the server, the limit and the
    call it was answering; the run ends failed, not hung."""
    stalling = StallingServer()
    with threaded(stalling) as base_url:
        try:
            settings = model_server_settings(base_url, openai_model=FAKE_MODEL, openai_silence_s=2)
            open_app(page, page_url("index.html"), settings)
            page.wait_for_function("window.agentApp.prepared !== undefined", timeout=GUARD_MS)
            error = page.evaluate("window.agentApp.prepared.error")
            assert (
                f"the model server at {base_url} sent nothing for 2 s while answering the "
                "planner's prompt (the model's preparation)" in error
            )
            assert (
                "The model could not be prepared"
                in page.locator("#progress-model-text").inner_text()
            )

            run(page, SIX_TIMES_SEVEN)
            outcome = result(page)
            assert outcome["state"] == "failed"
            assert (
                f"the model server at {base_url} sent nothing for 2 s while answering the "
                "request for a plan" in outcome["error"]
            )
            assert "Silence limit" in outcome["error"]
        finally:
            stalling.release()
