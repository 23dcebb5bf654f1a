"""The page (web/index.html) in headless Chromium: boot, runs with the scripted test engine,
Stop, the JavaScript sandbox through the agent, residency counts, history across reloads."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from agent_py.cli.web_server import start_server

pytestmark = pytest.mark.browser


def step(step_id: str, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "step_id": step_id,
        "step_goal": f"goal of {step_id}",
        "tool_name": tool,
        "tool_intent": "test",
        "expected_output": "something",
    }
    if arguments is not None:
        data["arguments"] = arguments
    return data


def plan(*tasks: list[dict[str, Any]]) -> str:
    body = {
        "tasks": [
            {"task_id": f"t{i}", "task_goal": f"task {i}", "steps": steps}
            for i, steps in enumerate(tasks, start=1)
        ]
    }
    return f"<plan>{json.dumps(body)}</plan>"


def done(answer: str) -> str:
    return f"<status>done</status><final>{answer}</final>"


def open_app(
    page: Any, url: str, settings: dict[str, Any] | None = None, timeout: int = 90_000
) -> None:
    if settings is not None:
        page.add_init_script(
            f"localStorage.setItem('agent_py.settings', {json.dumps(json.dumps(settings))});"
        )
    page.goto(url)
    page.wait_for_function("document.body.dataset.status === 'ready'", timeout=timeout)


def run_task(page: Any, question: str, replies: dict[str, Any]) -> None:
    page.evaluate("replies => window.agentApp.setScript(replies)", replies)
    page.get_by_role("textbox", name="Task").fill(question)
    page.get_by_role("button", name="Run").click()


def start_generation(page: Any, question: str, generate: dict[str, Any]) -> None:
    """Runs a one-step plan whose llm_generator step's reply is ``generate`` (a slow or a
    wedged one), and returns once that step runs."""
    run_task(
        page,
        question,
        {
            "plan": plan([step("s1", "llm_generator", {"prompt": question})]),
            "generate": generate,
            "rethink": done("never"),
        },
    )
    page.wait_for_selector('[data-step="s1"][data-status="running"]')


def wait_final(page: Any, timeout: int = 60_000) -> str:
    page.wait_for_function(
        "document.querySelector('.turn:last-of-type')?.dataset.state", timeout=timeout
    )
    return str(page.evaluate("document.querySelector('.turn:last-of-type').dataset.state"))


@pytest.fixture
def scripted(page_url: Any) -> str:
    return str(page_url("index.html?engine=scripted"))


def test_boots_to_ready_offline_from_our_origin_and_says_webgpu_is_missing(
    page: Any, page_url: Any, request_log: Any
) -> None:
    open_app(page, page_url("index.html"))

    assert request_log.foreign() == []
    notice = page.locator("#engine-notice")
    assert notice.is_visible()
    assert "no WebGPU adapter" in notice.inner_text()
    assert "Using the CPU engine instead" in notice.inner_text()
    assert page.locator("#status").inner_text() == "Ready"
    assert page.locator("#test-banner").is_hidden()  # the scripted engine is never a default


def test_scripted_run_renders_plan_statuses_thinking_and_a_safe_markdown_answer(
    page: Any, scripted: str, request_log: Any
) -> None:
    open_app(page, scripted)
    assert "TEST MODE" in page.locator("#test-banner").inner_text()
    hostile = (
        "**Forty-two**\n\n- first\n- second\n\n<script>window.__pwned = 1</script>"
        '<img src="x" onerror="window.__pwned = 42">'
    )
    run_task(
        page,
        "What is six times seven?",
        {
            "plan": plan(
                [
                    step(
                        "s1", "javascript_execute", {"code": "console.log('from js'); return 6 * 7"}
                    )
                ],
                [step("s2", "llm_generator", {"prompt": "Explain ${s1}"})],
            ),
            "generate": "<think>The product is 42.</think>It is 42.",
            "rethink": ["<status>continue</status>", done(hostile)],
        },
    )

    assert wait_final(page) == "completed"
    steps = page.locator(".step")
    assert steps.count() == 2
    assert [s.get_attribute("data-status") for s in steps.all()] == ["completed", "completed"]
    s1_output = page.locator('[data-step="s1"] .output pre').text_content() or ""
    assert "result: 42" in s1_output and "from js" in s1_output
    thinking = page.locator('[data-step="s2"] .thinking pre')
    assert thinking.text_content() == "The product is 42."
    answer = page.get_by_label("Answer")
    assert answer.locator("strong").inner_text() == "Forty-two"
    assert answer.locator("li").count() == 2
    assert answer.locator("script").count() == 0
    assert answer.locator("img[onerror]").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert request_log.foreign() == []
    # The run's tasks ran on agent_py's event loop (agent_py/page/loop.py), which counts
    # its drains; on Pyodide's own loop the worker has no count to report.
    page.wait_for_function("window.agentApp.lastOverhead !== undefined", timeout=60_000)
    overhead = page.evaluate("window.agentApp.lastOverhead")
    assert isinstance(overhead["drains"], int) and overhead["drains"] > 0
    assert len(overhead["step_ms"]) == 2


def test_stop_ends_a_running_task_and_the_ui_says_so(page: Any, scripted: str) -> None:
    open_app(page, scripted)
    start_generation(page, "write slowly", {"text": "word " * 200, "delay_ms": 30_000})

    started = time.monotonic()
    page.get_by_role("button", name="Stop").click()

    # Stopped, not finished: the reply would have taken 30 s (the wait is only a hang guard).
    assert wait_final(page, timeout=90_000) == "cancelled"
    assert time.monotonic() - started < 25
    assert page.locator("#status").inner_text() == "Stopped by the user"
    assert page.get_by_text("Stopped by the user.").is_visible()
    assert page.get_by_role("button", name="Run").is_enabled()
    assert page.get_by_role("button", name="Stop").is_disabled()


def test_the_page_api_gives_its_drivers_states_and_each_run_as_a_promise_of_its_result(
    page: Any, scripted: str
) -> None:
    """What the terminal and the suite drive the page by (window.agentApp): the page's state,
    run() settling with the core's RunResult, and finished(ms) saying whether the run under
    way has ended; never the status line's words or the DOM."""
    from agent_py.core.agent import RunResult

    assert page.evaluate("window.agentApp?.state()") in (None, "starting")
    open_app(page, scripted)
    assert page.evaluate("window.agentApp.state()") == "ready"
    assert page.evaluate("window.agentApp.serverStates()") == []

    page.evaluate(
        "replies => window.agentApp.setScript(replies)",
        {
            "plan": plan([step("s1", "llm_generator", {"prompt": "say 42"})]),
            "generate": {"text": "42", "busy_ms": 1500},
            "rethink": done("42"),
        },
    )
    # (The task holds the writer's 42: a number no code or task gave would be made up.)
    page.evaluate("() => { window.__run = window.agentApp.run('Say 42.'); }")
    page.wait_for_selector('[data-step="s1"][data-status="running"]')
    assert page.evaluate("window.agentApp.finished(0)") == {"done": False}
    result = page.evaluate("window.__run")
    assert RunResult.model_validate(result).answer == "42"
    assert result["state"] == "completed"
    assert page.evaluate("window.agentApp.finished(0)") == {"done": True, "result": result}
    # A run that cannot start (an empty task) settles at once, with no result.
    assert page.evaluate("window.agentApp.run('   ')") is None
    assert page.evaluate("window.agentApp.finished(0)") == {"done": True, "result": None}


def test_a_stop_the_wedged_agent_cannot_honour_restarts_it_and_the_next_run_works(
    page: Any, scripted: str
) -> None:
    """An engine that holds the worker's thread (as a wedged WebAssembly call would) never
    sees the Stop: after the grace the page replaces the worker, says so, marks the turn,
    and the agent takes the next task."""
    open_app(page, scripted)
    start_generation(page, "write", {"text": "never", "busy_ms": 600_000})
    page.get_by_role("button", name="Stop").click()

    page.wait_for_function(
        "document.body.dataset.status === 'stopped'"
        " && document.querySelector('#status').textContent.includes('restarted')",
        timeout=120_000,
    )
    assert page.locator("#error").inner_text() == (
        "The agent did not stop in time, so it was restarted."
    )
    turn = page.locator(".turn:last-of-type")
    assert turn.get_attribute("data-state") == "interrupted"
    assert "did not stop in time and was restarted" in turn.inner_text()
    assert page.get_by_role("button", name="Stop").is_disabled()

    page.wait_for_function("document.body.dataset.status === 'ready'", timeout=120_000)
    run_task(
        page,
        "Say 42.",
        {
            "plan": plan([step("s1", "llm_generator", {"prompt": "say 42"})]),
            "generate": "42",
            "rethink": done("42"),
        },
    )
    page.wait_for_function("document.querySelectorAll('.turn').length === 2")
    assert wait_final(page, timeout=120_000) == "completed"


# Records every token message the worker sends the UI, before the page's own scripts run.
COUNT_TOKEN_MESSAGES = """
window.__tokenMessages = [];
const PageWorker = window.Worker;
window.Worker = class extends PageWorker {
  constructor(...args) {
    super(...args);
    this.addEventListener("message", ({ data }) => {
      if (data?.type === "token") window.__tokenMessages.push(data);
    });
  }
};
"""


def test_streamed_text_reaches_the_live_output_whole_in_order_and_in_few_messages(
    page: Any, scripted: str
) -> None:
    page.add_init_script(COUNT_TOKEN_MESSAGES)
    open_app(page, scripted)
    the_plan = plan([step("s1", "llm_generator", {"prompt": "write"})])
    # 25 pieces, streamed at once; words that differ, as one word over and over fails its step
    written = "".join(f"w{n:03d} " for n in range(120))
    said = done("slowly said")  # 2 pieces, half a second apart
    run_task(
        page,
        "write",
        {"plan": the_plan, "generate": written, "rethink": {"text": said, "delay_ms": 1000}},
    )
    assert wait_final(page) == "completed"

    page.wait_for_function(
        f"document.getElementById('live').textContent.length >= {len(the_plan + written + said)}"
    )
    assert page.locator("#live").text_content() == the_plan + written + said
    messages = page.evaluate("window.__tokenMessages")
    by_purpose = {
        purpose: [m["text"] for m in messages if m["purpose"] == purpose]
        for purpose in ("plan", "generate", "rethink")
    }
    # Text streamed in one go is one message; text that comes slowly still shows as it comes.
    assert by_purpose["plan"] == [the_plan]
    assert by_purpose["generate"] == [written]
    assert len(by_purpose["rethink"]) == 2 and "".join(by_purpose["rethink"]) == said


def test_an_infinite_loop_is_killed_at_its_timeout_while_the_ui_answers(
    page: Any, scripted: str
) -> None:
    open_app(page, scripted, settings={"js_timeout_s": 2, "residency": "keep_warm"})
    run_task(
        page,
        "loop forever",
        {
            "plan": plan([step("s1", "javascript_execute", {"code": "while (true) {}"})]),
            # The failed code is written again in a code call, and shown its error once more:
            # the model loops again each time.
            "arguments": "```javascript\nwhile (true) {}\n```",
            "rethink": done("the loop was stopped"),
        },
    )
    page.wait_for_selector('[data-step="s1"][data-status="running"]')
    started = time.monotonic()

    # The page keeps answering while the loop spins in its sandbox worker.
    page.locator("#settings-details summary").click()
    assert page.locator("#settings-details").get_attribute("open") is not None
    assert page.evaluate("1 + 1") == 2

    # Killed at its 2 s limit: an endless loop never ends by itself (the wait is a hang guard,
    # the bound leaves a busy machine room).
    assert wait_final(page) == "failed"  # its only step failed: the run did not do the task
    # Each loop was stopped at its 2 s limit: the plan's code and the code call's.
    assert time.monotonic() - started < 2 * 2 + 20
    output = page.locator('[data-step="s1"] .output pre').text_content() or ""
    assert "longer than 2 s" in output and "wrote the same code again" in output


def test_a_sandbox_frame_that_never_loads_fails_the_step_and_the_next_run_loads_it_again(
    browser: Any, scripted: str
) -> None:
    """The sandbox frame's document is held by the server (never answered) through the first
    run: the step fails within its bound with what did not load, and so does its code written
    again in a code call (each sandbox run makes the frame again); the next run's frame loads."""
    context = browser.new_context(service_workers="block")  # every fetch meets the route
    held: list[Any] = []
    holding = [True]

    def hold_first(route: Any) -> None:
        if holding[0]:
            held.append(route)  # never answered while the test runs
        else:
            route.continue_()

    context.route(re.compile(r".*/sandbox\.html$"), hold_first)
    page = context.new_page()
    try:
        open_app(page, scripted)
        run_task(
            page,
            "compute",
            {
                "plan": plan([step("s1", "javascript_execute", {"code": "return 6 * 7"})]),
                "arguments": "```javascript\nreturn 6 * 7\n```",
                "rethink": done("no sandbox"),
            },
        )
        assert wait_final(page, timeout=120_000) == "failed"
        said = page.locator('[data-step="s1"] .output pre').text_content() or ""
        assert "JavaScript sandbox (/sandbox.html) did not load in 10000 ms" in said
        # The first frame, and one made again after each of the two failed runs (the plan's
        # code and the code call's).
        assert len(held) == 3
        holding[0] = False
        held[-1].continue_()  # the frame made after the last failure loads now

        run_task(
            page,
            "compute again",
            {
                "plan": plan([step("s1", "javascript_execute", {"code": "return 6 * 7"})]),
                "rethink": done("42"),
            },
        )
        page.wait_for_function("document.querySelectorAll('.turn').length === 2")
        assert wait_final(page, timeout=120_000) == "completed"
        output = page.locator('.turn:last-of-type [data-step="s1"] .output pre').text_content()
        assert "42" in (output or "")
    finally:
        context.close()


def test_python_execute_runs_in_its_own_sandbox_for_one_run_and_stop_ends_it(
    page: Any, scripted: str
) -> None:
    """A python_execute step runs in the page's Python sandbox and its value is the step's
    result; the sandbox's Python lasts one run (what a run leaves behind is gone at the next),
    and Stop ends a run whose Python spins, so the next run's Python answers at once."""
    open_app(page, scripted, settings={"js_timeout_s": 120})

    def finished(turns: int) -> str:
        """The state of turn number ``turns`` (1-based) once it has one."""
        page.wait_for_function(
            f"document.querySelectorAll('.turn')[{turns - 1}]?.dataset.state", timeout=240_000
        )
        return str(page.evaluate(f"document.querySelectorAll('.turn')[{turns - 1}].dataset.state"))

    code = "import sys\nprint('before:', hasattr(sys, 'left_behind'))\nsys.left_behind = 1\n6 * 7"
    for turn in range(2):
        run_task(
            page,
            f"compute in Python ({turn})",
            {
                "plan": plan([step("s1", "python_execute", {"code": code})]),
                "rethink": done("42"),
            },
        )
        state = finished(turn + 1)
        assert state == "completed", page.locator(".turn:last-of-type").inner_text()
        output = page.locator('.turn:last-of-type [data-step="s1"] .output pre').text_content()
        assert output == "result: 42\nstdout:\nbefore: False", output

    run_task(
        page,
        "spin in Python",
        {
            "plan": plan([step("s1", "python_execute", {"code": "while True:\n    pass"})]),
            "rethink": done("never"),
        },
    )
    page.wait_for_selector('.turn:last-of-type [data-step="s1"][data-status="running"]')
    page.get_by_role("button", name="Stop").click()
    assert finished(3) == "cancelled"
    # Not "busy with another run": the spinning Python was ended with its run.
    run_task(
        page,
        "compute again",
        {"plan": plan([step("s1", "python_execute", {"code": "6 * 7"})]), "rethink": done("42")},
    )
    assert finished(4) == "completed"
    output = page.locator('.turn:last-of-type [data-step="s1"] .output pre').text_content()
    assert output == "result: 42"


def follow_up_replies(code: str) -> dict[str, Any]:
    """Replies of a model that adds 8 to the result the plan prompt tells it (``code`` with
    $1 for it), or plans ``return 'fresh'`` when it is told none."""
    follow = plan([step("s1", "javascript_execute", {"code": code})])
    fresh = plan([step("s1", "javascript_execute", {"code": "return 'fresh'"})])
    return {
        "plan": {"text": follow, "match": r"Result: (\d+)", "otherwise": fresh},
        "rethink": "<status>continue</status>",
        "answer": {"text": "$1", "match": r"result: (\w+)"},
    }


def test_a_follow_up_continues_the_conversation_across_a_reload_until_a_new_session(
    page: Any, scripted: str
) -> None:
    """Turns of one session form a conversation: a follow-up's plan prompt holds the earlier
    result, also after a reload (the stored session is continued); "New session" forgets it.
    Each turn shows its time and model calls; Ctrl+Enter runs the task."""
    open_app(page, scripted)

    def ask(question: str, replies: dict[str, Any], turns: int) -> str:
        page.evaluate("replies => window.agentApp.setScript(replies)", replies)
        page.get_by_role("textbox", name="Task").fill(question)
        page.get_by_role("textbox", name="Task").press("Control+Enter")
        page.wait_for_function(
            f"document.querySelectorAll('#run-view .turn')[{turns - 1}]?.dataset.state",
            timeout=90_000,
        )
        last = page.locator("#run-view .turn").nth(turns - 1)
        assert last.get_attribute("data-state") == "completed", last.inner_text()
        return str(last.get_by_label("Answer").inner_text())

    compute = {
        **follow_up_replies(""),
        "plan": plan([step("s1", "javascript_execute", {"code": "return 6 * 7"})]),
    }
    assert ask("Compute 6 times 7.", compute, 1) == "42"
    assert ask("Add 8 to that result.", follow_up_replies("return $1 + 8"), 2) == "50"
    state = page.locator("#run-view .turn").nth(1).locator(".turn-state").inner_text()
    assert re.fullmatch(r"completed · \d+\.\d s · 3 model calls", state), (
        state
    )  # plan, rethink, answer

    page.reload()
    page.wait_for_function("document.body.dataset.status === 'ready'", timeout=90_000)
    assert page.locator("#run-view .turn").count() == 2  # the conversation, as it was
    assert ask("And 8 more.", follow_up_replies("return $1 + 8"), 3) == "58"

    page.get_by_role("button", name="New session").click()
    assert page.locator("#run-view .turn").count() == 0
    assert ask("Add 8 to that result.", follow_up_replies("return $1 + 8"), 1) == "fresh"
    sessions = page.evaluate("window.agentApp.sessions()")
    assert len(sessions) == 2, sessions


def test_a_result_that_left_the_tasks_data_out_shows_failed_and_why(
    page: Any, scripted: str
) -> None:
    """The small profile hands a one-step result over as it is, so it first checks that the
    calls held the question's data: 2 * 20 for 2 to the power of 10 left out 10."""
    open_app(page, scripted, settings={"profile": "tiny"})
    leaves_out = {
        "step_id": "s1",
        "step_goal": "power",
        "tool_name": "javascript_execute",
        "input": "return 2 * 20;",  # the small plan's inline input
    }
    body = {"tasks": [{"task_id": "t1", "task_goal": "power", "steps": [leaves_out]}]}
    run_task(
        page,
        "Use JavaScript to compute 2 to the power of 10.",
        {
            "plan": f"<plan>{json.dumps(body)}</plan>",
            "arguments": "```javascript\nreturn 2 * 30;\n```",  # the code call, no better
        },
    )

    assert wait_final(page) == "failed"
    failure = page.locator(".turn:last-of-type .failure").inner_text()
    assert failure.startswith("The task failed: every step failed: s1 (javascript_execute): ")
    assert "its result 60 cannot answer the task: no step was given 10 from the task" in failure
    s1 = page.locator('[data-step="s1"]')
    assert s1.get_attribute("data-status") == "failed"
    assert "no step was given 10" in (s1.locator(".output pre").text_content() or "")
    assert page.locator(".answer").count() == 0  # no wrong number passed off as the answer


def test_sandboxed_code_cannot_read_the_page_or_its_storage(page: Any, scripted: str) -> None:
    """Nor the origin's private file system, where the user's workspace lives: the sandbox's
    opaque origin cannot open it. (The secret is beside the workspace, not in it: code given
    the user's files gets copies of them, and test_sandbox.py probes that program too.)"""
    open_app(page, scripted)
    page.evaluate("localStorage.setItem('secret', 'page-secret')")
    page.evaluate(
        """async () => {
          const root = await (await navigator.storage.getDirectory())
            .getDirectoryHandle("probe-secret", { create: true });
          const writable = await (await root.getFileHandle("secret.txt", { create: true }))
            .createWritable();
          await writable.write("workspace-secret");
          await writable.close();
        }"""
    )
    probe = """
      const out = {};
      try {
        const root = await navigator.storage.getDirectory();
        const names = [];
        for await (const name of root.keys()) names.push(name);
        out.opfs = names.length ? 'listed ' + names.join(',') : 'empty';
      } catch (e) { out.opfs = e.name; }
      out.document = typeof document;
      out.localStorage = typeof localStorage === 'undefined' ? 'absent' : 'present';
      try { indexedDB.open('agent_py'); out.indexedDB = 'opened'; }
      catch (e) { out.indexedDB = e.name; }
      try { await caches.keys(); out.caches = 'read'; } catch (e) { out.caches = e.name; }
      try { await fetch('/index.html'); out.fetch = 'fetched'; }
      catch (e) { out.fetch = 'blocked'; }
      return out;
    """
    run_task(
        page,
        "probe",
        {
            "plan": plan([step("s1", "javascript_execute", {"code": probe})]),
            "rethink": done("probed"),
        },
    )
    assert wait_final(page) == "completed"
    output = page.locator('[data-step="s1"] .output pre').text_content() or ""
    result = json.loads(output.split("result: ", 1)[1].split("\n", 1)[0])
    assert result["document"] == "undefined"
    assert result["localStorage"] == "absent"
    assert result["indexedDB"] != "opened"
    assert result["caches"] != "read"
    assert result["fetch"] == "blocked"
    assert not str(result["opfs"]).startswith("listed"), result["opfs"]
    assert "page-secret" not in output and "workspace-secret" not in output


@pytest.mark.parametrize(
    ("residency", "expected"),
    [
        # plan, s1, rethink, s2, rethink(done) = five units of model work
        ("per_step", {"reloads": 5, "unloads": 5}),
        ("keep_warm", {"reloads": 1, "unloads": 0}),
    ],
)
def test_residency_policy_drives_engine_reloads_and_unloads(
    page: Any, scripted: str, residency: str, expected: dict[str, int]
) -> None:
    open_app(page, scripted, settings={"residency": residency})
    run_task(
        page,
        "two steps",
        {
            "plan": plan(
                [step("s1", "llm_generator", {"prompt": "a"})],
                [step("s2", "llm_generator", {"prompt": "b"})],
            ),
            "generate": "text",
            "rethink": ["<status>continue</status>", done("ok")],
        },
    )
    assert wait_final(page) == "completed"
    counts = page.evaluate("window.agentApp.engineCounts()")
    assert counts == expected


def test_a_reload_mid_run_keeps_the_history_which_exports_as_jsonl(
    page: Any, scripted: str
) -> None:
    open_app(page, scripted)
    start_generation(
        page, "a task interrupted by a reload", {"text": "slow words", "delay_ms": 60_000}
    )

    page.reload()
    page.wait_for_function("document.body.dataset.status === 'ready'", timeout=90_000)

    assert "interrupted" in page.locator("#session-notice").inner_text()
    assert page.locator(".turn-question").first.inner_text() == "a task interrupted by a reload"
    assert page.locator('[data-step="s1"]').count() == 1
    with page.expect_download() as download_info:
        page.get_by_role(
            "button", name="Export session a task interrupted by a reload as JSONL"
        ).click()
    path = download_info.value.path()
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines if line.strip()]
    types = [e["type"] for e in events]
    assert types[:2] == ["session_start", "turn_start"]
    assert "plan_started" in types and "step_started" in types
    assert "final" not in types
    assert all(
        set(e) == {"ts", "session", "turn", "step", "type", "content", "meta"} for e in events
    )


def test_after_one_visit_the_page_boots_and_runs_with_the_server_stopped(browser: Any) -> None:
    server, base = start_server(port=0)
    context = browser.new_context()
    try:
        page = context.new_page()
        open_app(page, f"{base}index.html?engine=scripted")
        page.wait_for_function("document.body.dataset.offline === 'ready'", timeout=90_000)
        server.shutdown()
        server.server_close()

        page.reload()
        page.wait_for_function("document.body.dataset.status === 'ready'", timeout=90_000)
        run_task(
            page,
            "offline arithmetic",
            {
                "plan": plan([step("s1", "javascript_execute", {"code": "return 6 * 7"})]),
                "rethink": done("42, offline"),
            },
        )

        assert wait_final(page) == "completed"
        assert "result: 42" in (page.locator('[data-step="s1"] .output pre').text_content() or "")
        assert page.evaluate("crossOriginIsolated") is True
    finally:
        context.close()


def test_the_settings_and_their_defaults_come_from_python(page: Any, scripted: str) -> None:
    from agent_py.core.profiles import profile_for
    from agent_py.page.settings import PageSettings

    open_app(page, scripted, settings={"context_window": 8192, "cpu_model_url": ""})

    info = page.evaluate("window.agentApp.settingsInfo()")
    assert info["defaults"] == PageSettings().model_dump(mode="json")
    assert info["engine_fields"] == list(PageSettings.ENGINE_FIELDS)
    # What the user changed, over Python's defaults; an old key still reads.
    assert info["values"]["context_window"] == 8192
    assert info["values"]["cpu_model"] == PageSettings().cpu_model
    assert info["values"]["engine_kind"] == "scripted"
    assert info["profile"] == profile_for("scripted", info["values"]["model"]).model_dump(
        mode="json"
    )
    # The form shows what is in effect.
    page.locator("#settings-details summary").click()
    assert page.locator("#setting-context").input_value() == "8192"
    assert page.locator("#setting-cpu-model").input_value() == PageSettings().cpu_model

    # Saving keeps only what differs from the defaults; the worker answers with the values.
    page.locator("#setting-context").fill(str(PageSettings().context_window))
    page.locator("#setting-thinking").check()
    page.get_by_role("button", name="Save settings").click()
    page.wait_for_function("window.agentApp.settings().thinking === true")
    kept = page.evaluate("JSON.parse(localStorage.getItem('agent_py.settings'))")
    assert kept == {"thinking": True}
    assert page.evaluate("window.agentApp.settings().context_window") == (
        PageSettings().context_window
    )


def test_settings_list_the_bundled_models_with_size_state_and_a_recommendation(
    page: Any, scripted: str
) -> None:
    from agent_py.page.settings import PageSettings

    root = Path(__file__).resolve().parents[2]
    catalog = json.loads((root / "web" / "models.json").read_text())["models"]
    open_app(page, scripted)
    page.locator("#settings-details summary").click()
    rows = page.locator("#cpu-models li[data-model]")
    rows.first.wait_for()
    page.wait_for_function(
        f"document.querySelectorAll('#cpu-models li[data-model]').length === {len(catalog)}"
    )
    cores = page.evaluate("navigator.hardwareConcurrency")
    for model in catalog:
        row = page.locator(f"#cpu-models li[data-model='{model['id']}']")
        text = " ".join(row.text_content().split())
        served = model.get("engine_format", model["source"])["bytes"]
        assert f"{round(served / 1e6)} MB" in text and model["licence"] in text, text
        assert model["good_for"] in text
        # Where its file is: this page's server has it (set-up fetched it) or not yet.
        on_disk = (root / "web" / "models" / f"{model['id']}.gguf").is_file()
        assert row.get_attribute("data-state") == ("served" if on_disk else "missing"), text
        if not on_disk:
            assert f"python scripts/fetch_model.py --model {model['id']}" in text
        need = model["recommended"]
        fits = need is not None and cores >= need["min_cores"]
        if "recommended" in text:
            assert fits, f"{model['id']} recommended on {cores} cores: {text}"
    default = PageSettings().cpu_model
    assert "in use" in page.locator(f"#cpu-models li[data-model='{default}']").text_content()
    assert len(page.locator("#cpu-models li", has_text="recommended").all()) == 1
    # "Use" puts the model's id in the CPU model field, to be saved with the rest.
    other = next(model["id"] for model in catalog if model["id"] != default)
    page.get_by_role(
        "button",
        name=f"Use {next(m['title'] for m in catalog if m['id'] == other)} as the CPU model",
    ).click()
    assert page.locator("#setting-cpu-model").input_value() == other


def test_a_new_context_window_restarts_the_worker_and_reaches_the_engine(
    page: Any, scripted: str
) -> None:
    # The engines size their KV cache by the window when the worker starts: Python fitting
    # prompts to a new window while the engine kept the old one would overflow it.
    from agent_py.page.settings import PageSettings

    open_app(page, scripted)
    default = PageSettings().context_window
    assert page.evaluate("window.agentApp.engine.context_window") == default

    page.locator("#settings-details summary").click()
    page.locator("#setting-context").fill(str(default * 2))
    page.get_by_role("button", name="Save settings").click()
    assert "Restarting the agent" in page.locator("#settings-saved").text_content()
    page.wait_for_function(
        f"window.agentApp.engine?.context_window === {default * 2}"
        " && document.body.dataset.status === 'ready'"
    )
    assert page.evaluate("window.agentApp.settings().context_window") == default * 2


def test_saved_settings_python_refuses_give_way_to_the_defaults(page: Any, scripted: str) -> None:
    from agent_py.page.settings import PageSettings

    open_app(page, scripted, settings={"context_window": 10})

    error = page.locator("#error").text_content()
    assert "The saved settings cannot be used" in error and "context_window" in error
    assert "Traceback" not in error
    values = page.evaluate("window.agentApp.settings()")
    assert values["context_window"] == PageSettings().context_window


def exported_events(page: Any, question: str) -> list[dict[str, Any]]:
    with page.expect_download() as download_info:
        page.get_by_role("button", name=f"Export session {question} as JSONL").click()
    lines = Path(download_info.value.path()).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def plan_usage(events: list[dict[str, Any]]) -> dict[str, Any]:
    [call] = [e for e in events if e["type"] == "assistant" and e["meta"]["purpose"] == "plan"]
    return dict(call["meta"]["usage"])


def test_the_model_is_prepared_after_ready_and_the_first_task_reuses_its_prompt(
    page: Any, scripted: str
) -> None:
    open_app(page, scripted)
    page.wait_for_function("window.agentApp.prepared !== undefined")
    prepared = page.evaluate("window.agentApp.prepared")
    assert prepared["prefilled"] is True and prepared["prompt_tokens"] > 100
    assert "prompt" in page.locator("#progress-model-text").inner_text()

    run_task(
        page,
        "a prepared task",
        {
            "plan": plan([step("s1", "llm_generator", {"prompt": "a"})]),
            "generate": "text",
            "rethink": done("ok"),
        },
    )
    assert wait_final(page) == "completed"

    usage = plan_usage(exported_events(page, "a prepared task"))
    # All of the planner's prompt but the task's own words came from the prefilled cache.
    assert usage["cached_prompt_tokens"] >= 0.8 * prepared["prompt_tokens"]
    assert page.evaluate("window.agentApp.lastResult.stats.reloads") == 0


def test_a_task_typed_while_the_model_is_prepared_waits_for_it_and_completes(
    page: Any, scripted: str
) -> None:
    open_app(page, scripted)
    page.wait_for_function("window.agentApp.prepared !== undefined")
    page.evaluate("window.agentApp.prepared = undefined")
    page.evaluate(
        "replies => window.agentApp.setScript(replies)",
        {
            "prefill": {"delay_ms": 4000},
            "plan": plan([step("s1", "llm_generator", {"prompt": "a"})]),
            "generate": "text",
            "rethink": done("ok"),
        },
    )
    # A changed setting prepares the model again (slowly, by the script).
    page.locator("#settings-details summary").click()
    page.locator("#setting-thinking").check()
    page.get_by_role("button", name="Save settings").click()
    page.wait_for_function(
        "document.querySelector('#progress-model-text').textContent.includes('prompt tokens')"
    )

    page.get_by_role("textbox", name="Task").fill("typed during the warm-up")
    page.get_by_role("button", name="Run").click()
    assert wait_final(page) == "completed"

    assert page.evaluate("window.agentApp.prepared.prefilled") is True
    # The run waited for the prefill (a run that went first would have found no cache).
    usage = plan_usage(exported_events(page, "typed during the warm-up"))
    assert usage["cached_prompt_tokens"] > 100


EVENT_RECORDS = """() => new Promise((resolve, reject) => {
    const opened = indexedDB.open("agent_py");
    opened.onerror = () => reject(opened.error);
    opened.onsuccess = () => {
        const counted = opened.result.transaction("events").objectStore("events").count();
        counted.onsuccess = () => { resolve(counted.result); opened.result.close(); };
    };
})"""


def test_a_long_session_keeps_a_bounded_page_and_store_and_loses_no_turn(
    page: Any, scripted: str
) -> None:
    """12 runs in one session: the five newest turns are drawn in full, older ones fold to one
    line (Show draws one again), a finished turn's events are one record in IndexedDB, and a
    reload still has every turn."""
    open_app(page, scripted)
    replies = {
        "plan": plan(
            [
                step("s1", "llm_generator", {"prompt": "a"}),
                step("s2", "llm_generator", {"prompt": "b"}),
            ]
        ),
        "generate": "text",
        "rethink": done("fine"),
    }
    runs = 12
    nodes_at: dict[int, int] = {}
    for number in range(1, runs + 1):
        run_task(page, f"task number {number}", replies)
        page.wait_for_function(
            f"document.querySelectorAll('#run-view .turn[data-state]').length === {number}",
            timeout=60_000,
        )
        nodes_at[number] = page.evaluate(
            "document.getElementById('run-view').getElementsByTagName('*').length"
        )
    page.wait_for_function(
        "document.getElementById('run') && !document.getElementById('run').disabled"
    )

    view = page.locator("#run-view")
    assert view.locator(".turn").count() == runs
    assert view.locator('.turn[data-folded="true"]').count() == runs - 5
    full = view.locator(".turn:not([data-folded]) [data-step]").count()
    assert full == 5 * 2
    # Past five turns the page grows by a folded turn a run (itself and 3 elements), not by
    # a drawn one (about 40 here; 600 for the bench's 9 steps).
    growth = nodes_at[runs] - nodes_at[runs - 5]
    assert growth <= 5 * 4, nodes_at
    # Each finished turn is one record (the session's first events, turn 0, stay as they are).
    page.wait_for_function(f"({EVENT_RECORDS})().then(n => n <= {runs} + 3)", timeout=60_000)

    # Show draws a folded turn again, from the store.
    page.get_by_role("button", name="Show turn 1").click()
    first = view.locator(".turn").first
    first.locator('[data-step="s2"][data-status="completed"]').wait_for()
    assert first.locator(".turn-question").text_content() == "task number 1"

    page.reload()
    page.wait_for_function("document.body.dataset.status === 'ready'", timeout=90_000)
    page.get_by_role("button", name="Open session task number 1").click()
    view.locator(".turn").nth(runs - 1).wait_for()
    questions = view.locator(".turn-question").all_text_contents()
    assert questions == [f"task number {n}" for n in range(1, runs + 1)]
