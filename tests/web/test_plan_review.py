"""Plan review in the page (web/ui/plan-review.js, agent_py/core/review.py): a plan that calls an
MCP server's tool (a real SDK server on loopback, with CORS headers) waits in the running turn;
the user approves it, edits a step, deletes one, cancels the run, or always allows a tool.
The scripted test engine plays the model; review_plans is "remote" (its "auto" is off for the
test engine)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from extension_support import start_sdk_server

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def cors_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with start_sdk_server(tmp_path_factory.mktemp("review"), cors=True) as url:
        yield url


def step(step_id: str, tool: str, arguments: dict[str, Any], goal: str) -> dict[str, Any]:
    return {
        "step_id": step_id,
        "step_goal": goal,
        "tool_name": tool,
        "tool_intent": "the server does it",
        "expected_output": "its answer",
        "arguments": arguments,
    }


ADD = step("s1", "calc__add", {"a": 2, "b": 3}, "add two numbers")
ECHO = step("s2", "calc__echo", {"text": "hello"}, "echo a word")


@pytest.fixture
def app(page: Any, page_url: Any, cors_url: str) -> Any:
    page.add_init_script(
        "localStorage.setItem('agent_py.settings', JSON.stringify({review_plans: 'remote'}))"
    )
    page.goto(page_url("index.html?engine=scripted"))
    page.wait_for_function("document.body.dataset.status === 'ready'", timeout=90_000)
    page.get_by_role("button", name="Add server").click()
    page.get_by_label("Name (prefix of its tools)").fill("calc")
    page.get_by_label("URL of its MCP endpoint").fill(cors_url)
    page.get_by_role("button", name="Save server").click()
    page.locator('#mcp-server-list li[data-server="calc"][data-state="connected"]').wait_for(
        timeout=90_000
    )
    return page


def start(page: Any, steps: list[dict[str, Any]]) -> None:
    plan = {"tasks": [{"task_id": "t1", "task_goal": "use the server", "steps": steps}]}
    page.evaluate(
        "replies => window.agentApp.setScript(replies)",
        {
            "plan": f"<plan>{json.dumps(plan)}</plan>",
            "rethink": "<status>continue</status>",
            "answer": {"text": "done: $1", "match": r"result: (\S+)"},
        },
    )
    # The task holds the values the plan's calls take (a call whose values come from nowhere
    # fails its step).
    page.get_by_role("textbox", name="Task").fill("Use the server: add 2 and 3, echo 'hello'.")
    page.get_by_role("button", name="Run").click()


def finished(page: Any) -> Any:
    turn = page.locator("#run-view .turn:last-of-type")
    page.wait_for_function(
        "document.querySelector('#run-view .turn:last-of-type')?.dataset.state", timeout=90_000
    )
    return turn


def review_panel(page: Any) -> Any:
    panel = page.get_by_role("region", name="Plan review")
    panel.wait_for(timeout=90_000)  # a hang guard: the plan comes at once
    return panel


def test_an_approved_plan_runs_and_the_turn_says_it_was_reviewed(app: Any) -> None:
    start(app, [ADD])
    panel = review_panel(app)
    assert app.locator("#status").inner_text() == "Review the plan: approve, edit or cancel"
    assert panel.get_by_label("Goal of s1").input_value() == "add two numbers"
    assert json.loads(panel.get_by_label("Arguments of s1").input_value()) == {"a": 2, "b": 3}
    panel.get_by_role("button", name="Approve and run").click()

    turn = finished(app)
    assert turn.get_attribute("data-state") == "completed"
    assert turn.locator('[data-step="s1"] .output pre').text_content() == "5"
    assert "Plan review: approved" in turn.inner_text()
    assert app.get_by_role("region", name="Plan review").count() == 0


def test_an_edited_step_runs_as_edited_and_a_broken_edit_is_refused_first(app: Any) -> None:
    start(app, [ADD])
    panel = review_panel(app)
    panel.get_by_label("Arguments of s1").fill('{"a": "twenty", "b": 3}')
    panel.get_by_role("button", name="Approve and run").click()
    # Python holds the edit to the tool's schema: offered again, with the reason and the edit.
    refused = app.get_by_role("region", name="Plan review")
    refused.get_by_text("Not accepted: the arguments of step s1 are wrong").wait_for()
    assert "twenty" in refused.get_by_label("Arguments of s1").input_value()
    refused.get_by_label("Arguments of s1").fill('{"a": 20, "b": 3}')
    refused.get_by_label("Goal of s1").fill("add twenty and three")
    refused.get_by_role("button", name="Approve and run").click()

    turn = finished(app)
    assert turn.get_attribute("data-state") == "completed"
    assert turn.locator('[data-step="s1"] .output pre').text_content() == "23"
    assert "add twenty and three" in turn.locator('[data-step="s1"]').inner_text()
    note = turn.locator(".review-note").inner_text()
    assert note == "Plan review: edited: s1: step goal changed; s1: arguments changed"


def test_a_deleted_step_does_not_run(app: Any) -> None:
    start(app, [ADD, ECHO])
    panel = review_panel(app)
    panel.get_by_role("button", name="Delete s2").click()
    panel.get_by_role("button", name="Approve and run").click()

    turn = finished(app)
    assert turn.get_attribute("data-state") == "completed"
    assert turn.locator('[data-step="s1"]').get_attribute("data-status") == "completed"
    assert turn.locator('[data-step="s2"]').count() == 0
    assert turn.locator(".review-note").inner_text() == "Plan review: edited: deleted s2"


def test_cancel_ends_the_run_with_nothing_run(app: Any) -> None:
    start(app, [ADD])
    review_panel(app).get_by_role("button", name="Cancel run").click()

    turn = finished(app)
    assert turn.get_attribute("data-state") == "cancelled"
    assert "Plan review: cancelled" in turn.inner_text()
    assert turn.locator('[data-step="s1"]').count() == 0  # the plan never started
    assert app.get_by_role("button", name="Run").is_enabled()


def test_always_allow_approves_later_plans_of_that_tool_without_asking(app: Any) -> None:
    start(app, [ADD])
    panel = review_panel(app)
    panel.get_by_label("Always allow calc__add").check()
    panel.get_by_role("button", name="Approve and run").click()
    assert finished(app).get_attribute("data-state") == "completed"

    start(app, [ADD])  # the same tool: no panel this time
    app.wait_for_function("document.querySelectorAll('#run-view .turn').length === 2")
    turn = finished(app)
    assert turn.get_attribute("data-state") == "completed"
    assert turn.locator(".review-note").inner_text() == (
        "Plan review: approved (always allowed: calc__add)"
    )
    assert app.evaluate("localStorage.getItem('agent_py.always_allow')") == '["calc__add"]'

    start(app, [ADD, ECHO])  # another MCP tool: asked again
    review_panel(app).get_by_role("button", name="Approve and run").click()
    assert finished(app).get_attribute("data-state") == "completed"
