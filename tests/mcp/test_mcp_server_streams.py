"""Against the SDK's real server: a call whose stream the server closes five times, messages
outside any request on the standalone stream, and a tool that asks the user (elicitation)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp_servers import SDKServers
from mcp_types import TextContent, Tool

from agent_py.mcp import MCPClient, MCPRemoteError
from agent_py.mcp.elicitation import ElicitationAnswer, ElicitationForm

HANG_GUARD_S = 30


async def journal(client: MCPClient) -> list[dict[str, Any]]:
    result = await client.call_tool("journal_entries")
    assert isinstance(result.structured_content, dict)
    entries: list[dict[str, Any]] = result.structured_content["result"]
    return entries


async def test_a_call_survives_the_server_closing_its_stream_at_five_checkpoints(
    sdk_servers: SDKServers,
) -> None:
    seen: list[float] = []
    async with MCPClient(sdk_servers.open_url) as client:
        result = await client.call_tool(
            "process_batch",
            {"items": 10, "checkpoint_every": 2},
            on_progress=lambda progress, total, message: seen.append(progress),
        )
        closes = [e for e in await journal(client) if e["method"] == "process_batch/checkpoint"]
    assert result.content == [TextContent(text="processed 10 items")]
    assert len(closes) >= 5  # the journal is shared by the session's tests
    assert seen == [float(n) for n in range(1, 11)]


async def test_a_tool_list_change_and_a_log_outside_any_request_reach_the_client(
    sdk_servers: SDKServers,
) -> None:
    changed = asyncio.Event()
    logs: list[tuple[str, Any]] = []
    listed: list[list[Tool]] = []

    def on_tools(tools: list[Tool]) -> None:
        listed.append(tools)
        if any(tool.name == "late_arrival" for tool in tools):
            changed.set()

    async with MCPClient(
        sdk_servers.open_url, on_tools_changed=on_tools, on_log=lambda *log: logs.append(log)
    ) as client:
        assert client.listening
        await client.refresh_tools()
        assert await client.call_tool("announce_later", {"name": "late_arrival"})
        # No request of ours is in flight: only the standalone stream can bring this.
        await asyncio.wait_for(changed.wait(), HANG_GUARD_S)
    assert ("warning", "added late_arrival") in logs
    assert "late_arrival" in {tool.name for tool in client.tools}


async def test_a_tool_that_asks_the_user_gets_the_form_answer(sdk_servers: SDKServers) -> None:
    forms: list[ElicitationForm] = []

    async def fill(form: ElicitationForm) -> ElicitationAnswer:
        forms.append(form)
        return ElicitationAnswer("accept", {"name": "Ada", "age": 36, "subscribe": True})

    async with MCPClient(sdk_servers.open_url, on_elicit=fill, name="test") as client:
        result = await client.call_tool("ask_user")
    assert result.content == [TextContent(text='accept {"name":"Ada","age":36,"subscribe":true}')]
    (form,) = forms
    assert (form.server, form.message) == ("test", "Who are you?")
    assert [(f.name, f.kind, f.required, f.default) for f in form.fields] == [
        ("name", "string", True, None),
        ("age", "integer", False, 30),
        ("subscribe", "boolean", False, False),
    ]


async def test_an_answer_that_breaks_the_schema_never_reaches_the_server(
    sdk_servers: SDKServers,
) -> None:
    async def fill(form: ElicitationForm) -> ElicitationAnswer:
        return ElicitationAnswer("accept", {"name": "Ada", "age": 400})

    async def decline(form: ElicitationForm) -> ElicitationAnswer:
        return ElicitationAnswer("decline")

    # The SDK server passes the client's error on as the answer to the call.
    async with MCPClient(sdk_servers.open_url, on_elicit=fill) as client:
        with pytest.raises(MCPRemoteError, match="schema: Age must be at most 150"):
            await client.call_tool("ask_user")
    async with MCPClient(sdk_servers.open_url, on_elicit=decline) as client:
        declined = await client.call_tool("ask_user")
    assert declined.content == [TextContent(text="decline")]


async def test_without_a_handler_no_elicitation_capability_is_declared(
    sdk_servers: SDKServers,
) -> None:
    async with MCPClient(sdk_servers.open_url) as client:
        with pytest.raises(MCPRemoteError, match="does not support elicitation/create"):
            await client.call_tool("ask_user")
        entries = await journal(client)
    initializes = [e for e in entries if e["method"] == "initialize"]
    assert all("elicitation" not in e["params"]["capabilities"] for e in initializes[-1:])
