"""The Streamable HTTP binding against scripted answers a real server will not give on
demand: older revisions, JSON or SSE, resumed and cut-off streams, garbage, expired
sessions, HTTP failures."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from mcp_servers import ScriptedServers
from mcp_types import TextContent
from scripted_server import (
    MCPScript,
    Reply,
    Request,
    json_reply,
    result,
    sse_event,
    sse_reply,
)

from agent_py.mcp import (
    MCPAuthError,
    MCPClient,
    MCPConnectionError,
    MCPHTTPError,
    MCPProtocolError,
    MCPRemoteError,
)

TEXT_RESULT = {"content": [{"type": "text", "text": "done"}], "isError": False}


def call_answer(request: Request) -> dict[str, Any]:
    return result(request, TEXT_RESULT)


def progress(request: Request, value: float) -> dict[str, Any]:
    token = request.json()["params"]["_meta"]["progressToken"]
    return {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": token, "progress": value, "total": 2},
    }


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26", "2024-11-05"])
async def test_the_client_accepts_an_older_revision_and_then_sends_it(
    scripted: ScriptedServers, version: str
) -> None:
    server = await scripted(MCPScript(version=version))
    async with MCPClient(server.url) as client:
        assert client.protocol_version == version
        await client.ping()
    # The modern probe first; the server's 400 without a modern error means a legacy one.
    discover, initialize, initialized, ping = server.requests[:4]
    assert discover.rpc_method == "server/discover"
    assert discover.headers["mcp-protocol-version"] == "2026-07-28"
    assert initialize.json()["params"]["protocolVersion"] == "2025-11-25"
    assert "mcp-protocol-version" not in initialize.headers
    assert initialized.rpc_method == "notifications/initialized"
    assert initialized.headers["mcp-protocol-version"] == version
    assert ping.headers["mcp-protocol-version"] == version


async def test_an_unsupported_revision_is_a_clear_error_and_ends_the_session(
    scripted: ScriptedServers,
) -> None:
    server = await scripted(MCPScript(version="2099-01-01"))
    with pytest.raises(MCPProtocolError, match="speaks MCP 2099-01-01, which this client"):
        async with MCPClient(server.url):
            pass
    assert [r.method for r in server.requests] == ["POST", "POST", "DELETE"]
    assert server.requests[2].headers["mcp-session-id"] == "session-1"


async def test_every_post_accepts_json_and_event_streams_and_carries_the_session(
    scripted: ScriptedServers,
) -> None:
    server = await scripted(MCPScript(lambda request: json_reply(call_answer(request))))
    async with MCPClient(server.url, token="s3cret") as client:
        await client.call_tool("anything")
    posts = [r for r in server.requests if r.method == "POST"]
    assert [p.rpc_method for p in posts] == [
        "server/discover",  # the modern probe, refused by this 2025 server
        "initialize",
        "notifications/initialized",
        "tools/call",
    ]
    for post in posts:
        assert post.headers["accept"] == "application/json, text/event-stream"
        assert post.headers["content-type"] == "application/json"
        assert post.headers["authorization"] == "Bearer s3cret"
    assert "mcp-session-id" not in posts[0].headers
    assert "mcp-session-id" not in posts[1].headers
    assert {p.headers["mcp-session-id"] for p in posts[2:]} == {"session-1"}
    delete = server.requests[-1]
    assert delete.method == "DELETE"
    assert delete.headers["mcp-session-id"] == "session-1"


async def test_no_delete_when_the_server_gave_no_session(scripted: ScriptedServers) -> None:
    server = await scripted(MCPScript(session_ids=[]))
    async with MCPClient(server.url) as client:
        assert client.session_id is None
        await client.ping()
    assert "DELETE" not in {r.method for r in server.requests}
    assert all("mcp-session-id" not in r.headers for r in server.requests)


async def test_an_sse_answer_with_notifications_and_a_server_request_before_the_result(
    scripted: ScriptedServers,
) -> None:
    def answer(request: Request) -> Reply:
        if request.rpc_method != "tools/call":
            return json_reply(result(request, {}))
        ping = {"jsonrpc": "2.0", "id": "server-ping-1", "method": "ping"}
        final = json.dumps(call_answer(request))
        cut = final.index(",") + 1  # between two JSON tokens
        stream = (
            ": a comment the client ignores\r\n\r\n"
            + "id: e1\r\nretry: 1000\r\ndata:\r\n\r\n"  # a priming event: an id, no data
            + f"event: message\r\ndata: {json.dumps(progress(request, 1))}\r\n\r\n"
            + f"event: message\ndata: {json.dumps(ping)}\n\n"
            + "event: other\ndata: not for us\n\n"
            # The result's JSON split over three data lines (joined with newlines).
            + "event: message\rdata: "
            + final[:cut]
            + "\rdata: \rdata:"
            + final[cut:]
            + "\r\r"
        ).encode()
        # Delivered in small pieces, splitting CRLFs and UTF-8 sequences.
        pieces: list[bytes | float | asyncio.Event] = [
            stream[i : i + 7] for i in range(0, len(stream), 7)
        ]
        return sse_reply(*pieces)

    server = await scripted(MCPScript(answer))
    seen: list[tuple[float, float | None, str | None]] = []
    async with MCPClient(server.url) as client:
        outcome = await client.call_tool("anything", on_progress=lambda *p: seen.append(p))
    assert outcome.content == [TextContent(text="done")]
    assert seen == [(1, 2, None)]
    pong = [
        r.json()
        for r in server.requests
        if r.method == "POST" and r.json().get("id") == "server-ping-1"
    ]
    assert pong == [{"jsonrpc": "2.0", "id": "server-ping-1", "result": {}}]


async def test_a_server_request_the_client_does_not_support_gets_method_not_found(
    scripted: ScriptedServers,
) -> None:
    def answer(request: Request) -> Reply:
        ask = {"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {}}
        return sse_reply(sse_event(ask), sse_event(call_answer(request)))

    server = await scripted(MCPScript(answer))
    async with MCPClient(server.url) as client:
        await client.call_tool("anything")
    replies = [r.json() for r in server.requests if r.method == "POST" and r.json().get("id") == 7]
    assert len(replies) == 1 and replies[0]["error"]["code"] == -32601


async def test_a_json_batch_answer_delivers_notifications_and_the_result(
    scripted: ScriptedServers,
) -> None:
    def answer(request: Request) -> Reply:
        return json_reply([progress(request, 2), call_answer(request)])

    server = await scripted(MCPScript(answer))
    seen: list[tuple[float, float | None, str | None]] = []
    async with MCPClient(server.url) as client:
        outcome = await client.call_tool("anything", on_progress=lambda *p: seen.append(p))
    assert outcome.content == [TextContent(text="done")]
    assert seen == [(2, 2, None)]


async def test_a_stream_that_stops_after_an_event_id_is_resumed_with_last_event_id(
    scripted: ScriptedServers,
) -> None:
    def answer(request: Request) -> Reply:
        if request.method == "GET":
            return sse_reply(sse_event(call_answer(calls[0]), event_id="e2"))
        calls.append(request)
        return sse_reply(sse_event(raw="retry: 20\ndata:\n\n", event_id="e1"))

    calls: list[Request] = []
    server = await scripted(MCPScript(answer))
    async with MCPClient(server.url) as client:
        outcome = await client.call_tool("anything")
    assert outcome.content == [TextContent(text="done")]
    resume = [r for r in server.requests if "last-event-id" in r.headers]
    assert len(resume) == 1
    assert resume[0].headers["last-event-id"] == "e1"
    assert resume[0].headers["accept"] == "text/event-stream"
    assert resume[0].headers["mcp-session-id"] == "session-1"


async def test_a_stream_cut_off_before_the_answer_is_a_clear_error(
    scripted: ScriptedServers,
) -> None:
    def answer(request: Request) -> Reply:
        half = json.dumps(call_answer(request))[:30]
        return sse_reply(sse_event(progress(request, 1)), f"event: message\ndata: {half}".encode())

    server = await scripted(MCPScript(answer))
    async with MCPClient(server.url) as client:
        with pytest.raises(MCPProtocolError, match=r"ended in the middle of a message.*cut off"):
            await client.call_tool("anything", on_progress=lambda *p: None)


@pytest.mark.parametrize(
    ("reply", "error", "message"),
    [
        (
            Reply(200, {"Content-Type": "application/json"}, [b"<html>oops</html>"]),
            MCPProtocolError,
            "not valid JSON",
        ),
        (
            # A JSON body whose connection closed early (no Content-Length to catch it).
            Reply(200, {"Content-Type": "application/json"}, [b'{"jsonrpc": "2.0", "id": 2, "res']),
            MCPProtocolError,
            "not valid JSON.*cut off",
        ),
        (
            # Fewer bytes than the declared Content-Length.
            Reply(200, {"Content-Type": "application/json"}, [b'{"jsonrpc"'], content_length=500),
            MCPConnectionError,
            "broke while reading the answer",
        ),
        (
            Reply(200, {"Content-Type": "application/json"}, [b'{"hello": "world"}']),
            MCPProtocolError,
            "not a JSON-RPC 2.0 message",
        ),
        (Reply(200, {"Content-Type": "application/json"}, []), MCPProtocolError, "sent no answer"),
        (
            Reply(200, {"Content-Type": "text/html"}, [b"<html></html>"]),
            MCPProtocolError,
            "text/html content, not JSON or an event stream",
        ),
        (sse_reply(b"event: message\ndata: {not json\n\n"), MCPProtocolError, "not JSON"),
        (Reply(500, {}, [b"Internal Server Error"]), MCPHTTPError, "failed with HTTP 500"),
        (Reply(403, {}, []), MCPAuthError, "refused access"),
        (Reply(405, {}, []), MCPHTTPError, "not be a Streamable HTTP MCP endpoint"),
        (
            json_reply(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Bad params"}},
                status=400,
            ),
            MCPHTTPError,
            "bad request \\(HTTP 400\\). The server said: Bad params",
        ),
    ],
)
async def test_bad_answers_become_clear_errors(
    scripted: ScriptedServers, reply: Reply, error: type[Exception], message: str
) -> None:
    server = await scripted(MCPScript(lambda request: reply))
    async with MCPClient(server.url) as client:
        with pytest.raises(error, match=message):
            await client.call_tool("anything")


async def test_a_json_rpc_error_is_a_remote_error_with_code_and_message(
    scripted: ScriptedServers,
) -> None:
    def answer(request: Request) -> Reply:
        error = {"code": -32602, "message": "Unknown tool: nope"}
        return json_reply({"jsonrpc": "2.0", "id": request.json()["id"], "error": error})

    server = await scripted(MCPScript(answer))
    async with MCPClient(server.url, name="files") as client:
        with pytest.raises(MCPRemoteError) as raised:
            await client.call_tool("nope")
    assert raised.value.code == -32602
    assert str(raised.value) == (
        "The MCP server 'files' answered tool 'nope' with an error: "
        "Unknown tool: nope (code -32602)."
    )


async def test_http_404_on_a_session_starts_a_new_session_once_and_replays(
    scripted: ScriptedServers,
) -> None:
    def answer(request: Request) -> Reply:
        if request.headers.get("mcp-session-id") == "session-1":
            return Reply(404, {}, [])
        return json_reply(call_answer(request))

    server = await scripted(MCPScript(answer))
    async with MCPClient(server.url) as client:
        outcome = await client.call_tool("anything")
        assert client.session_id == "session-2"
    assert outcome.content == [TextContent(text="done")]
    assert len(server.rpc("initialize")) == 2
    calls = server.rpc("tools/call")
    assert [c.headers["mcp-session-id"] for c in calls] == ["session-1", "session-2"]
    assert "mcp-session-id" not in server.rpc("initialize")[1].headers


async def test_http_404_again_after_a_new_session_is_an_error_not_a_loop(
    scripted: ScriptedServers,
) -> None:
    def answer(request: Request) -> Reply:
        return Reply(404, {}, [])

    server = await scripted(MCPScript(answer))
    async with MCPClient(server.url) as client:
        with pytest.raises(MCPHTTPError, match="ended the session"):
            await client.call_tool("anything")
    assert len(server.rpc("initialize")) == 2
    assert len(server.rpc("tools/call")) == 2


async def test_http_404_without_a_session_means_a_wrong_url(scripted: ScriptedServers) -> None:
    server = await scripted(lambda request: Reply(404, {}, [b"<html>Not Found</html>"]))
    with pytest.raises(MCPHTTPError, match=r"Nothing answers at .* Check the server URL"):
        async with MCPClient(server.url):
            pass


async def test_tool_pages_that_never_end_are_an_error(scripted: ScriptedServers) -> None:
    def answer(request: Request) -> Reply:
        tool = {"name": "t", "inputSchema": {"type": "object"}}
        return json_reply(result(request, {"tools": [tool], "nextCursor": "same"}))

    server = await scripted(MCPScript(answer))
    async with MCPClient(server.url) as client:
        with pytest.raises(MCPProtocolError, match="pages never end"):
            await client.refresh_tools()


async def test_a_malformed_tool_is_skipped_and_the_others_are_kept(
    scripted: ScriptedServers,
) -> None:
    def answer(request: Request) -> Reply:
        tools = [{"name": "good", "inputSchema": {"type": "object"}}, {"name": "bad"}]
        return json_reply(result(request, {"tools": tools}))

    server = await scripted(MCPScript(answer))
    async with MCPClient(server.url) as client:
        assert [tool.name for tool in await client.refresh_tools()] == ["good"]


async def test_unknown_content_blocks_become_a_note(scripted: ScriptedServers) -> None:
    def answer(request: Request) -> Reply:
        content = [{"type": "hologram", "data": "..."}, {"type": "text", "text": "ok"}]
        return json_reply(result(request, {"content": content}))

    server = await scripted(MCPScript(answer))
    async with MCPClient(server.url) as client:
        outcome = await client.call_tool("anything")
    assert outcome.content == [
        TextContent(text="[content of type 'hologram' not shown]"),
        TextContent(text="ok"),
    ]


async def test_nothing_listening_is_a_connection_error(closed_port_url: str) -> None:
    with pytest.raises(MCPConnectionError, match=r"Cannot reach http://127\.0\.0\.1:"):
        async with MCPClient(closed_port_url):
            pass


@pytest.mark.parametrize("as_stream", [False, True], ids=["json", "sse"])
async def test_the_same_result_arrives_as_json_or_as_an_event_stream(
    scripted: ScriptedServers, as_stream: bool
) -> None:
    def answer(request: Request) -> Reply:
        if as_stream:
            return sse_reply(sse_event(call_answer(request)))
        return json_reply(call_answer(request))

    server = await scripted(MCPScript(answer))
    async with MCPClient(server.url) as client:
        outcome = await client.call_tool("anything", {"x": None})
    assert outcome.content == [TextContent(text="done")]
    # JSON nulls in the arguments reach the server as nulls.
    assert server.rpc("tools/call")[0].json()["params"] == {
        "name": "anything",
        "arguments": {"x": None},
    }


async def test_a_caller_that_stops_waiting_cancels_the_request_on_the_server(
    scripted: ScriptedServers,
) -> None:
    never = asyncio.Event()  # the answer never comes
    server = await scripted(MCPScript(lambda request: sse_reply(never)))
    async with MCPClient(server.url) as client:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(client.call_tool("slow"), timeout=0.2)
    never.set()
    call_id = server.rpc("tools/call")[0].json()["id"]
    cancelled = server.rpc("notifications/cancelled")
    assert [c.json()["params"]["requestId"] for c in cancelled] == [call_id]
