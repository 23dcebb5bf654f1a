"""MCP servers in the page (web/ui/servers.js, agent_py.page.session, agent_py.page.http):
servers added in the panel, with and without the bridge extension, and agent runs (scripted
test engine) that call their tools: through the worker's fetch for a server with CORS headers,
through the bridge for one without. The SDK server speaks 2026-07-28 (stateless); wrapped as a
server of the 2025 revisions only, it is spoken to with initialize in the same page session.
The panel names the revision, and the server's journal shows what it received."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from extension_support import (
    EXTENSION_ORIGIN,
    activity,
    consent_page,
    launch_with_extension,
    server_journal,
    set_lists,
    start_sdk_server,
)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def mcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The SDK's MCP server (no CORS headers), told to accept the extension's Origin."""
    with start_sdk_server(tmp_path_factory.mktemp("sdk"), [EXTENSION_ORIGIN]) as url:
        yield url


def open_app(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_function("document.body.dataset.status === 'ready'", timeout=90_000)


def add_server(page: Any, name: str, url: str, transport: str = "auto") -> None:
    page.get_by_role("button", name="Add server").click()
    page.get_by_label("Name (prefix of its tools)").fill(name)
    page.get_by_label("URL of its MCP endpoint").fill(url)
    page.get_by_label("Transport").select_option(transport)
    page.get_by_role("button", name="Save server").click()


def server_item(page: Any, name: str, state: str) -> Any:
    item = page.locator(f'#mcp-server-list li[data-server="{name}"][data-state="{state}"]')
    item.wait_for(timeout=90_000)  # a hang guard: the server connects in about a second
    return item


def plan_with(*steps: dict[str, Any]) -> str:
    plan = {"tasks": [{"task_id": "t1", "task_goal": "use the server", "steps": list(steps)}]}
    return f"<plan>{json.dumps(plan)}</plan>"


def run_add(page: Any, *tools: str) -> None:
    """A scripted run whose steps s1, s2, ... call each of ``tools`` with a=2, b=3; each
    step's output is 5."""
    steps = [
        {
            "step_id": f"s{number}",
            "step_goal": "add two numbers",
            "tool_name": tool,
            "tool_intent": "the server adds",
            "expected_output": "their sum",
            "arguments": {"a": 2, "b": 3},
        }
        for number, tool in enumerate(tools, start=1)
    ]
    page.evaluate(
        "replies => window.agentApp.setScript(replies)",
        {
            "plan": plan_with(*steps),
            "rethink": "<status>done</status><final>The sum is 5.</final>",
        },
    )
    page.get_by_role("textbox", name="Task").fill("What is 2 + 3? Use the server.")
    page.get_by_role("button", name="Run").click()
    page.wait_for_function(
        "document.querySelector('.turn:last-of-type')?.dataset.state", timeout=60_000
    )
    assert page.evaluate("document.querySelector('.turn:last-of-type').dataset.state") == (
        "completed"
    )
    for number, tool in enumerate(tools, start=1):
        drawn = page.locator(f'[data-step="s{number}"]')
        assert drawn.get_attribute("data-status") == "completed"
        assert tool in drawn.inner_text()
        assert drawn.locator(".output pre").text_content() == "5"
    assert page.get_by_label("Answer", exact=True).inner_text() == "The sum is 5."


def test_without_the_extension_a_cors_server_works_and_others_name_the_extension(
    page: Any,
    page_url: Any,
    mcp_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    open_app(page, page_url("index.html?engine=scripted"))
    assert "not detected" in page.locator("#mcp-bridge-status").inner_text()

    with start_sdk_server(tmp_path_factory.mktemp("cors"), cors=True) as cors_url:
        add_server(page, "calc", mcp_url)
        add_server(page, "open", cors_url)

        status = server_item(page, "calc", "error").locator(".server-status").inner_text()
        assert f"The MCP server 'calc' ({mcp_url}) does not allow browser requests" in status
        assert (
            "Install the agent_py bridge extension (see README), add this page in its options, "
            f"and allow it to reach {mcp_url.rsplit('/', 1)[0]} when the extension asks." in status
        )
        # The worker's own fetch reaches a server that sends CORS headers; the SSE answer
        # streams through it.
        assert "Connected: 13 tools" in server_item(page, "open", "connected").inner_text()
        run_add(page, "open__add")

    saved = page.evaluate("window.agentApp.mcpServers()")
    assert saved == [
        {"name": "calc", "url": mcp_url, "token": "", "transport": "auto", "enabled": True},
        {"name": "open", "url": cors_url, "token": "", "transport": "auto", "enabled": True},
    ]


# A test double of the bridge extension's content script that says hello, allows the page,
# and then answers no request: the extension after it was disabled, reloaded or updated under
# an open page (the real one cannot be made silent on demand).
SILENT_EXTENSION = """
window.addEventListener("message", (event) => {
  const data = event.data;
  if (event.source !== window || data?.channel !== "agent_py-bridge") return;
  if (data.type === "hello") {
    const origin = location.origin;
    event.ports[0]?.postMessage({ type: "hello", version: "0-test", allowed: true, origin });
  }
});
"""


def page_calls_of(journal: list[dict[str, Any]], tool: str) -> list[dict[str, Any]]:
    """The journal's entries for calls of ``tool`` (the journal's own reader calls another)."""
    return [e for e in journal if e["method"] == "tools/call" and e["params"]["name"] == tool]


def assert_spoken_in_2026_07_28(journal: list[dict[str, Any]]) -> None:
    """The page's call of add was a 2026-07-28 request: its version in a header and in
    _meta, its method and tool mirrored in headers, no session, and no initialize at all."""
    [call] = page_calls_of(journal, "add")
    assert call["protocol_header"] == "2026-07-28"
    assert call["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert call["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]["name"] == "agent_py"
    assert (call["mcp_method"], call["mcp_name"]) == ("tools/call", "add")
    assert call["session"] is None
    assert "initialize" not in [e["method"] for e in journal]
    assert journal[0]["method"] == "server/discover"  # the page's first request


def assert_spoken_in_2025_11_25(journal: list[dict[str, Any]]) -> None:
    """The page's call of add was made in an initialize session of 2025-11-25 (the server
    refused the 2026-07-28 probe before any of it reached the journal)."""
    [call] = page_calls_of(journal, "add")
    assert call["protocol_header"] == "2025-11-25"
    assert call["session"]
    assert call["mcp_method"] is None
    first = journal[0]
    assert (first["method"], first["params"]["protocolVersion"]) == ("initialize", "2025-11-25")
    assert "server/discover" not in [e["method"] for e in journal]


# The request headers a server written for the 2025 revisions commonly lets browsers send.
CORS_OF_2025 = ["Content-Type", "Accept", "Authorization", "Mcp-Session-Id", "MCP-Protocol-Version"]


def test_the_page_speaks_2026_07_28_to_a_server_that_does_and_2025_11_25_to_one_that_does_not(
    page: Any, page_url: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """All with CORS headers, in one page session, through the worker's own fetch: the
    stateless revision to a server of both eras; initialize to servers of the 2025 revisions
    only (they answer the 2026-07-28 probe with 400), also to one whose CORS headers let
    browsers send only the 2025 request headers (the browser blocks the probe itself)."""
    open_app(page, page_url("index.html?engine=scripted"))
    logs = tmp_path_factory.mktemp("eras")
    with (
        start_sdk_server(logs, cors=True) as new_url,
        start_sdk_server(logs, cors=True, legacy=True) as old_url,
        start_sdk_server(logs, cors=CORS_OF_2025, legacy=True) as strict_url,
        start_sdk_server(logs, cors=CORS_OF_2025) as stale_url,
    ):
        add_server(page, "new", new_url)
        add_server(page, "old", old_url)
        add_server(page, "strict", strict_url)
        add_server(page, "stale", stale_url, transport="fetch")

        for name, revision in (
            ("new", "2026-07-28"),
            ("old", "2025-11-25"),
            ("strict", "2025-11-25"),
        ):
            status = server_item(page, name, "connected").locator(".server-status").inner_text()
            assert status.startswith(f"Connected: 13 tools ({name}__echo, {name}__add"), status
            assert status.endswith(f" · MCP {revision}"), status
        # A 2026 server whose CORS headers leave out that revision's request headers.
        stale = server_item(page, "stale", "error").locator(".server-status").inner_text()
        assert (
            "answers the page, but its CORS headers do not let the page send the request "
            "headers of MCP 2026-07-28 (Mcp-Method, Mcp-Name, Mcp-Param-*)" in stale
        ), stale

        run_add(page, "new__add", "old__add", "strict__add")

        assert_spoken_in_2026_07_28(server_journal(new_url))
        assert_spoken_in_2025_11_25(server_journal(old_url))
        assert_spoken_in_2025_11_25(server_journal(strict_url))


def test_an_extension_that_never_answers_fails_the_server_at_its_request_bound(
    page: Any, page_url: Any
) -> None:
    page.add_init_script(SILENT_EXTENSION)
    open_app(page, page_url("index.html?engine=scripted"))
    # Nothing listens there: the page's fetch fails, so auto goes to the (silent) extension.
    add_server(page, "quiet", "http://127.0.0.1:9/mcp")

    # The MCP request's own 30 s bound ends the wait, before the worker's (30 s + 5 s).
    status = server_item(page, "quiet", "error").locator(".server-status").inner_text()
    assert status == (
        "Error: The MCP server 'quiet' did not answer server/discover within 30 s; "
        "the request was cancelled."
    )
    assert page.get_by_role("button", name="Run").is_enabled()  # the page goes on without it


def test_an_agent_run_calls_an_mcp_tool_through_the_bridge(
    playwright: Any,
    tmp_path_factory: pytest.TempPathFactory,
    browser_settings: Any,
    page_url: Any,
    base_url: str,
    mcp_url: str,
) -> None:
    context, worker = launch_with_extension(
        playwright, tmp_path_factory.mktemp("profile"), browser_settings.launch_options()
    )
    context.set_default_timeout(browser_settings.DEFAULT_TIMEOUT_MS)
    page_origin = base_url.rstrip("/")
    server_origin = mcp_url.rsplit("/", 1)[0]
    try:
        set_lists((context, worker), pages=[page_origin], targets=[])
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        open_app(page, page_url("index.html?engine=scripted"))
        assert "ready for this page" in page.locator("#mcp-bridge-status").inner_text()

        # The first request to the server asks the user, in the extension's own window; denied,
        # the panel says so and what to do.
        add_server(page, "calc", mcp_url)
        consent_page(context, page_origin, server_origin).get_by_role("button", name="Deny").click()
        refused = server_item(page, "calc", "error").locator(".server-status").inner_text()
        assert "refused" in refused and f"You did not allow {page_origin}" in refused

        set_lists((context, worker), pages=[page_origin], targets=[server_origin])
        page.get_by_role("button", name="Reconnect server calc").click()
        connected = server_item(page, "calc", "connected").locator(".server-status").inner_text()
        assert connected.startswith("Connected: 13 tools (calc__echo, calc__add")
        assert connected.endswith(" · MCP 2026-07-28")

        # In the same page session, a server of the 2025 revisions only (no CORS headers
        # either), allowed once in the prompt: the bridge carries its session too.
        logs = tmp_path_factory.mktemp("old")
        with start_sdk_server(logs, [EXTENSION_ORIGIN], legacy=True) as old_url:
            add_server(page, "old", old_url)
            old_origin = old_url.rsplit("/", 1)[0]
            consent_page(context, page_origin, old_origin).get_by_role(
                "button", name="Allow once"
            ).click()
            old = server_item(page, "old", "connected").locator(".server-status").inner_text()
            assert old.startswith("Connected: 13 tools (old__echo") and old.endswith(
                " · MCP 2025-11-25"
            )

            run_add(page, "calc__add", "old__add")

            assert_spoken_in_2025_11_25(server_journal(old_url))
        assert_spoken_in_2026_07_28(server_journal(mcp_url))
        calls = [e for e in activity(worker) if e["method"] == "POST" and e["target"] == mcp_url]
        assert calls and all(e["page"] == page_origin for e in calls)
        # An SSE answer left once it held the response is logged as such, not as a page gone.
        assert all(e["result"].startswith(("HTTP 20", "refused")) for e in calls)
        assert not any("went away" in e["result"] for e in calls)
        old_calls = [e for e in activity(worker) if e["target"] == old_url]
        # The 2026-07-28 probe refused with 400, then initialize and the session's requests.
        assert "HTTP 400" in [e["result"] for e in old_calls]
        assert "HTTP 200" in [e["result"] for e in old_calls]
        assert errors == []
    finally:
        context.close()


def test_a_server_added_after_ready_is_in_the_prompt_prefilled_for_the_next_task(
    page: Any, page_url: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The planner's prompt lists the tools: a server connected while the user types gets the
    prompt prefilled again, so the next task computes only its own words."""
    open_app(page, page_url("index.html?engine=scripted"))
    page.wait_for_function("window.agentApp.prepared !== undefined")
    builtins_only = page.evaluate("window.agentApp.prepared")
    page.evaluate("window.agentApp.prepared = undefined")

    with start_sdk_server(tmp_path_factory.mktemp("cors"), cors=True) as cors_url:
        add_server(page, "open", cors_url)
        server_item(page, "open", "connected")
        page.wait_for_function("window.agentApp.prepared !== undefined")
        with_server = page.evaluate("window.agentApp.prepared")
        assert with_server["prefilled"] is True
        assert with_server["prompt_tokens"] > builtins_only["prompt_tokens"] + 100

        run_add(page, "open__add")

    with page.expect_download() as download:
        page.get_by_role("button", name="Export session What is 2 + 3? Use the server.").click()
    lines = Path(download.value.path()).read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    [plan_call] = [e for e in events if e["type"] == "assistant" and e["meta"]["purpose"] == "plan"]
    # All of the prompt but the task's own words came from the cache: the servers' tools too.
    assert plan_call["meta"]["usage"]["cached_prompt_tokens"] >= 0.9 * with_server["prompt_tokens"]


def test_a_saved_server_is_in_the_prompt_prefilled_at_start_and_prefilled_once(
    page: Any, page_url: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The servers' list comes after ready: the boot's preparation waits for it to connect,
    so a page with a saved server prefills the planner's prompt once, its tools included (not
    once without them and again from the tool list on)."""
    open_app(page, page_url("index.html?engine=scripted"))
    with start_sdk_server(tmp_path_factory.mktemp("cors"), cors=True) as cors_url:
        add_server(page, "open", cors_url)
        server_item(page, "open", "connected")
        page.wait_for_function("window.agentApp.preparations.length === 2")
        with_server = page.evaluate("window.agentApp.prepared")

        page.reload()
        page.wait_for_function("document.body.dataset.status === 'ready'", timeout=90_000)
        server_item(page, "open", "connected")
        page.wait_for_function("window.agentApp.preparations.length > 0")
        run_add(page, "open__add")
        preparations = page.evaluate("window.agentApp.preparations")
        assert len(preparations) == 1, preparations
        [at_start] = preparations
        assert at_start["prefilled"] is True
        assert at_start["prompt_tokens"] == with_server["prompt_tokens"]
