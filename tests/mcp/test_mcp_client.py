"""MCPClient against a real MCP server (the official SDK's, see sdk_server.py)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from mcp_servers import TOKEN, SDKServers
from mcp_types import Implementation, TextContent, Tool

from agent_py.mcp import MCPAuthError, MCPClient, MCPTimeoutError

BASE_TOOLS = {
    "echo",
    "add",
    "slow",
    "fail",
    "register_tool",
    "journal_entries",
    "process_batch",
    "announce_later",
    "ask_user",
    "ask_preferences",
    "filler_0",
    "filler_1",
    "filler_2",
}


async def journal(url: str) -> list[dict[str, Any]]:
    """What the server received so far (asked through a session of its own)."""
    async with MCPClient(url) as client:
        result = await client.call_tool("journal_entries")
    assert isinstance(result.structured_content, dict)
    entries: list[dict[str, Any]] = result.structured_content["result"]
    return entries


async def test_a_server_of_both_eras_is_spoken_to_statelessly_with_every_request_signed(
    sdk_servers: SDKServers,
) -> None:
    """2026-07-28: server/discover, then no session; every request carries the version,
    the client's info and capabilities in _meta, and mirrors its method in headers."""
    me = Implementation(name=f"modern-{uuid.uuid4().hex[:8]}", version="1")
    async with MCPClient(sdk_servers.open_url, client_info=me) as client:
        assert (client.protocol_version, client.stateless) == ("2026-07-28", True)
        assert client.server_info is not None and client.server_info.name == "test-server"
        assert client.session_id is None
        await client.call_tool("echo", {"text": "hi"})

    entries = [
        e
        for e in await journal(sdk_servers.open_url)
        if (e["params"].get("_meta") or {}).get("io.modelcontextprotocol/clientInfo")
        == me.model_dump(exclude_none=True)
    ]
    assert list(dict.fromkeys(e["method"] for e in entries)) == [
        "server/discover",
        "subscriptions/listen",  # the server's tool list can change: listen for it
        "tools/list",  # the tool's schema says which arguments travel in headers too
        "tools/call",
    ]
    for entry in entries:
        meta = entry["params"]["_meta"]
        assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        assert "io.modelcontextprotocol/clientCapabilities" in meta
        assert (entry["protocol_header"], entry["session"]) == ("2026-07-28", None)
        assert entry["mcp_method"] == entry["method"]
    assert entries[-1]["mcp_name"] == "echo"
    assert "initialize" not in {e["method"] for e in entries}


async def test_a_pinned_2025_revision_opens_a_session_with_initialize(
    sdk_servers: SDKServers,
) -> None:
    me = Implementation(name=f"handshake-{uuid.uuid4().hex[:8]}", version="1")
    async with MCPClient(sdk_servers.open_url, client_info=me, protocol="2025-11-25") as client:
        assert (client.protocol_version, client.stateless) == ("2025-11-25", False)
        assert client.server_info is not None and client.server_info.name == "test-server"
        assert client.session_id
        await client.call_tool("echo", {"text": "hi"})
        session = client.session_id

    entries = await journal(sdk_servers.open_url)
    initialize = [
        e
        for e in entries
        if e["method"] == "initialize"
        and e["params"]["clientInfo"] == me.model_dump(exclude_none=True)
    ]
    assert len(initialize) == 1
    assert initialize[0]["params"]["protocolVersion"] == "2025-11-25"
    assert initialize[0]["protocol_header"] is None  # not negotiated yet
    later = [e for e in entries if e.get("session") == session]
    assert [e["method"] for e in later] == ["notifications/initialized", "tools/call"]
    assert {e["protocol_header"] for e in later} == {"2025-11-25"}
    assert {e["mcp_method"] for e in later} == {None}  # 2026 headers only in 2026


async def test_tools_are_listed_across_pages(sdk_servers: SDKServers) -> None:
    me = Implementation(name=f"pages-{uuid.uuid4().hex[:8]}", version="1")
    async with MCPClient(sdk_servers.open_url, client_info=me) as client:
        tools = await client.refresh_tools()
    names = [tool.name for tool in tools]
    assert set(names) >= BASE_TOOLS
    assert len(names) == len(set(names))
    listings = [  # no session in 2026-07-28: this client's requests carry its name
        e
        for e in await journal(sdk_servers.open_url)
        if e["method"] == "tools/list"
        and (e["params"].get("_meta") or {})
        .get("io.modelcontextprotocol/clientInfo", {})
        .get("name")
        == me.name
    ]
    # Four tools per page: at least three pages, each asking for the previous cursor.
    assert len(listings) >= 3
    assert [e["params"].get("cursor") for e in listings[:3]] == [None, "4", "8"]
    assert tools[1].input_schema["properties"].keys() == {"a", "b"}


async def test_call_tool_returns_content_and_structured_content(sdk_servers: SDKServers) -> None:
    async with MCPClient(sdk_servers.open_url) as client:
        result = await client.call_tool("add", {"a": 2, "b": 3})
    assert not result.is_error
    assert result.content == [TextContent(text="5")]
    assert result.structured_content == {"result": 5}


async def test_a_failing_tool_is_a_result_with_is_error(sdk_servers: SDKServers) -> None:
    async with MCPClient(sdk_servers.open_url) as client:
        result = await client.call_tool("fail", {"reason": "disk full"})
    assert result.is_error
    assert isinstance(result.content[0], TextContent)
    assert "disk full" in result.content[0].text


async def test_progress_notifications_reach_on_progress(sdk_servers: SDKServers) -> None:
    seen: list[tuple[float, float | None, str | None]] = []
    async with MCPClient(sdk_servers.open_url) as client:
        result = await client.call_tool(
            "slow",
            {"steps": 3, "delay_s": 0.01},
            on_progress=lambda *progress: seen.append(progress),
        )
    assert not result.is_error
    assert seen == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]


async def test_a_timeout_cancels_the_request_on_the_server(sdk_servers: SDKServers) -> None:
    """In a 2025 session with notifications/cancelled."""
    async with MCPClient(sdk_servers.open_url, protocol="2025-11-25") as client:
        with pytest.raises(MCPTimeoutError, match=r"did not answer tool 'slow' within 0\.3 s"):
            await client.call_tool("slow", {"steps": 100, "delay_s": 0.1}, timeout_s=0.3)
        session = client.session_id
        # The session survives a timed-out call.
        assert (await client.call_tool("echo", {"text": "still here"})).content[0] == TextContent(
            text="still here"
        )
    entries = await journal(sdk_servers.open_url)
    call = next(e for e in entries if e.get("session") == session and e["method"] == "tools/call")
    cancelled = [
        e
        for e in entries
        if e.get("session") == session and e["method"] == "notifications/cancelled"
    ]
    assert [e["params"]["requestId"] for e in cancelled] == [call["id"]]
    await until_cancelled(sdk_servers.open_url, 1)


async def test_a_timeout_of_a_stateless_request_closes_its_stream_which_cancels_it(
    sdk_servers: SDKServers,
) -> None:
    """2026-07-28 has no notifications/cancelled over HTTP: closing the stream is it."""
    before = len(await cancelled_tools(sdk_servers.open_url))
    async with MCPClient(sdk_servers.open_url) as client:
        assert client.stateless
        with pytest.raises(MCPTimeoutError, match=r"did not answer tool 'slow' within 0\.3 s"):
            await client.call_tool("slow", {"steps": 100, "delay_s": 0.1}, timeout_s=0.3)
        assert (await client.call_tool("echo", {"text": "still here"})).content[0] == TextContent(
            text="still here"
        )
    entries = await journal(sdk_servers.open_url)
    assert "notifications/cancelled" not in {
        e["method"] for e in entries if e.get("protocol_header") == "2026-07-28"
    }
    await until_cancelled(sdk_servers.open_url, before + 1)


async def cancelled_tools(url: str) -> list[dict[str, Any]]:
    return [e for e in await journal(url) if e["method"] == "slow/cancelled"]


async def until_cancelled(url: str, count: int) -> None:
    """Wait until the server's ``slow`` handler has seen ``count`` cancellations."""
    for _ in range(100):
        if len(await cancelled_tools(url)) >= count:
            return
        await asyncio.sleep(0.05)
    assert len(await cancelled_tools(url)) >= count


async def test_tools_list_changed_makes_the_client_list_again(sdk_servers: SDKServers) -> None:
    announced: list[list[Tool]] = []
    new_tool = f"greet_{uuid.uuid4().hex[:8]}"
    async with MCPClient(sdk_servers.open_url, on_tools_changed=announced.append) as client:
        await client.refresh_tools()
        assert new_tool not in {tool.name for tool in client.tools}
        await client.call_tool("register_tool", {"name": new_tool})
        # The notification arrived on the call's own response stream; by the time the
        # call returns, the list is fresh.
        assert new_tool in {tool.name for tool in client.tools}
        assert len(announced) == 2
        result = await client.call_tool(new_tool, {"who": "you"})
    assert result.content == [TextContent(text="hello you")]


async def test_close_deletes_the_session(sdk_servers: SDKServers) -> None:
    client = MCPClient(sdk_servers.open_url, protocol="2025-11-25")
    await client.connect()
    session = client.session_id
    assert session
    await client.close()
    async with httpx.AsyncClient() as raw:
        answer = await raw.post(
            sdk_servers.open_url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={
                "Accept": "application/json, text/event-stream",
                "Mcp-Session-Id": session,
                "MCP-Protocol-Version": "2025-11-25",
            },
        )
    assert answer.status_code == 404


async def test_a_session_the_server_ended_is_replaced_and_the_request_replayed(
    sdk_servers: SDKServers,
) -> None:
    async with MCPClient(sdk_servers.open_url, protocol="2025-11-25") as client:
        first = client.session_id
        assert first
        async with httpx.AsyncClient() as raw:  # the server forgets the session
            ended = await raw.delete(sdk_servers.open_url, headers={"Mcp-Session-Id": first})
            assert ended.status_code == 200
        result = await client.call_tool("echo", {"text": "again"})
        assert result.content == [TextContent(text="again")]
        assert client.session_id not in (None, first)


async def test_a_server_that_needs_a_token_says_so(sdk_servers: SDKServers) -> None:
    with pytest.raises(MCPAuthError, match="needs a token") as missing:
        async with MCPClient(sdk_servers.secured_url):
            pass
    assert missing.value.status == 401
    with pytest.raises(MCPAuthError, match="refused the token"):
        async with MCPClient(sdk_servers.secured_url, token="wrong"):
            pass


async def test_the_token_is_sent_as_a_bearer_token_and_json_answers_are_read(
    sdk_servers: SDKServers,
) -> None:
    # This server answers every request with a plain JSON body instead of an SSE stream.
    async with MCPClient(sdk_servers.secured_url, token=TOKEN) as client:
        tools = await client.refresh_tools()
        assert {tool.name for tool in tools} >= BASE_TOOLS
        result = await client.call_tool("add", {"a": 40, "b": 2})
    assert result.structured_content == {"result": 42}
