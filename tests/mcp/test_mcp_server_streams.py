"""Against the SDK's real server: a call whose stream the server closes five times, messages
outside any request (the standalone stream of a 2025 session, a 2026-07-28
``subscriptions/listen`` stream), and a tool that asks the user (elicitation: a server
request in 2025, an ``input_required`` round in 2026-07-28). The SDK's server speaks both
eras, so each test that applies to both runs in both."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp_servers import SDKServers
from mcp_types import TextContent, Tool

from agent_py.mcp import MCPClient, MCPError, MCPRemoteError
from agent_py.mcp.elicitation import ElicitationAnswer, ElicitationForm
from agent_py.mcp.errors import MCPProtocolError

HANG_GUARD_S = 30
MODERN, LEGACY = "2026-07-28", "2025-11-25"
both_eras = pytest.mark.parametrize("protocol", [MODERN, LEGACY])


async def journal(client: MCPClient) -> list[dict[str, Any]]:
    result = await client.call_tool("journal_entries")
    assert isinstance(result.structured_content, dict)
    entries: list[dict[str, Any]] = result.structured_content["result"]
    return entries


async def test_a_call_survives_the_server_closing_its_stream_at_five_checkpoints(
    sdk_servers: SDKServers,
) -> None:
    """Resuming a stream is of 2025 (2026-07-28 streams cannot be resumed)."""
    seen: list[float] = []
    async with MCPClient(sdk_servers.open_url, protocol=LEGACY) as client:
        result = await client.call_tool(
            "process_batch",
            {"items": 10, "checkpoint_every": 2},
            on_progress=lambda progress, total, message: seen.append(progress),
        )
        closes = [e for e in await journal(client) if e["method"] == "process_batch/checkpoint"]
    assert result.content == [TextContent(text="processed 10 items")]
    assert len(closes) >= 5  # the journal is shared by the session's tests
    assert seen == [float(n) for n in range(1, 11)]


@both_eras
async def test_a_tool_list_change_outside_any_request_reaches_the_client(
    sdk_servers: SDKServers, protocol: str
) -> None:
    changed = asyncio.Event()
    logs: list[tuple[str, Any]] = []
    listed: list[list[Tool]] = []

    name = f"late_arrival_{protocol.replace('-', '_')}"

    def on_tools(tools: list[Tool]) -> None:
        listed.append(tools)
        if any(tool.name == name for tool in tools):
            changed.set()

    async with MCPClient(
        sdk_servers.open_url,
        on_tools_changed=on_tools,
        on_log=lambda *log: logs.append(log),
        protocol=protocol,
    ) as client:
        assert client.listening
        await client.refresh_tools()
        assert await client.call_tool("announce_later", {"name": name})
        # No request of ours is in flight: only the stream outside requests can bring this.
        await asyncio.wait_for(changed.wait(), HANG_GUARD_S)
    assert name in {tool.name for tool in client.tools}
    if protocol == LEGACY:  # 2026-07-28 carries logs only within the request they concern
        assert ("warning", f"added {name}") in logs


@both_eras
async def test_a_tool_that_asks_the_user_gets_the_form_answer(
    sdk_servers: SDKServers, protocol: str
) -> None:
    forms: list[ElicitationForm] = []

    async def fill(form: ElicitationForm) -> ElicitationAnswer:
        forms.append(form)
        return ElicitationAnswer("accept", {"name": "Ada", "age": 36, "subscribe": True})

    async with MCPClient(
        sdk_servers.open_url, on_elicit=fill, name="test", protocol=protocol
    ) as client:
        result = await client.call_tool("ask_user")
    assert result.content == [TextContent(text='accept {"name":"Ada","age":36,"subscribe":true}')]
    (form,) = forms
    assert (form.server, form.message) == ("test", "Who are you?")
    assert [(f.name, f.kind, f.required, f.default) for f in form.fields] == [
        ("name", "string", True, None),
        ("age", "integer", False, 30),
        ("subscribe", "boolean", False, False),
    ]


@both_eras
async def test_an_answer_that_breaks_the_schema_never_reaches_the_server(
    sdk_servers: SDKServers, protocol: str
) -> None:
    async def fill(form: ElicitationForm) -> ElicitationAnswer:
        return ElicitationAnswer("accept", {"name": "Ada", "age": 400})

    async def decline(form: ElicitationForm) -> ElicitationAnswer:
        return ElicitationAnswer("decline")

    # 2025: the SDK server passes the client's error on as the answer to the call; 2026:
    # the client does not send the call again.
    refused = MCPRemoteError if protocol == LEGACY else MCPError
    async with MCPClient(sdk_servers.open_url, on_elicit=fill, protocol=protocol) as client:
        with pytest.raises(refused, match="schema: Age must be at most 150"):
            await client.call_tool("ask_user")
        asked = [e for e in await journal(client) if e["method"] == "tools/call"]
    if protocol == MODERN:  # asked once, never answered
        last_two = [e["params"]["name"] for e in asked[-2:]]
        assert last_two == ["ask_user", "journal_entries"]
        assert "inputResponses" not in asked[-2]["params"]
    async with MCPClient(sdk_servers.open_url, on_elicit=decline, protocol=protocol) as client:
        declined = await client.call_tool("ask_user")
    assert declined.content == [TextContent(text="decline")]


async def test_without_a_handler_no_elicitation_capability_is_declared(
    sdk_servers: SDKServers,
) -> None:
    async with MCPClient(sdk_servers.open_url, protocol=LEGACY) as client:
        with pytest.raises(MCPRemoteError, match="does not support elicitation/create"):
            await client.call_tool("ask_user")
        entries = await journal(client)
    initializes = [e for e in entries if e["method"] == "initialize"]
    assert initializes and "elicitation" not in initializes[-1]["params"]["capabilities"]


async def test_a_stateless_request_declares_no_elicitation_without_a_handler_and_refuses_one(
    sdk_servers: SDKServers,
) -> None:
    """This test server asks regardless of what the client declared (a real one must not):
    the client refuses to answer what it never offered."""
    async with MCPClient(sdk_servers.open_url, protocol=MODERN) as client:
        with pytest.raises(MCPProtocolError, match="asked for elicitation/create to complete"):
            await client.call_tool("ask_user")
        entries = await journal(client)
    call = [e for e in entries if e["method"] == "tools/call"][-2]
    capabilities = call["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert "elicitation" not in capabilities
