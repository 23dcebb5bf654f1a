"""Scripted answers for what a real server does only sometimes: polling by closing streams,
empty streams, a 400 that names the lost session, the standalone stream (absent, ending,
carrying server requests), tools that need task support."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from mcp_servers import ScriptedServers
from mcp_types import TextContent
from scripted_server import MCPScript, Reply, Request, json_reply, result, sse_event, sse_reply

from agent_py.mcp import MCPClient, MCPClientHost, MCPProtocolError, MCPServerConfig
from agent_py.mcp.elicitation import ElicitationAnswer, ElicitationForm
from agent_py.mcp.host import TASKS_REQUIRED_NOTE

HANG_GUARD_S = 30
TEXT_RESULT = {"content": [{"type": "text", "text": "done"}], "isError": False}


async def until(condition: Callable[[], bool]) -> None:
    """Wait for client state that changes without an event to wait on (bounded by the hang
    guard)."""
    for _ in range(HANG_GUARD_S * 100):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"still not so after {HANG_GUARD_S} s")


def progress(token: Any, value: float) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": token, "progress": value},
    }


async def test_a_server_that_polls_many_times_delivering_each_time_is_followed(
    scripted: ScriptedServers,
) -> None:
    """Eight closes in a row, each after an event: polling, not failure (MAX_RESUMES is 3)."""

    def answer(request: Request) -> Reply:
        if request.method == "POST":
            calls.append(request)
            token = request.json()["params"]["_meta"]["progressToken"]
            tokens.append(token)
            return sse_reply(sse_event(raw="retry: 10\ndata:\n\n", event_id="0"))
        step = int(request.headers["last-event-id"]) + 1
        if step <= 8:
            return sse_reply(sse_event(progress(tokens[0], step), event_id=str(step)))
        return sse_reply(sse_event(result(calls[0], TEXT_RESULT), event_id=str(step)))

    calls: list[Request] = []
    tokens: list[Any] = []
    seen: list[float] = []
    server = await scripted(MCPScript(answer))
    async with MCPClient(server.url) as client:
        outcome = await client.call_tool("poll", on_progress=lambda p, t, m: seen.append(p))
    assert outcome.content == [TextContent(text="done")]
    assert seen == [float(n) for n in range(1, 9)]
    resumes = [r.headers["last-event-id"] for r in server.requests if "last-event-id" in r.headers]
    assert resumes == [str(n) for n in range(9)]


async def test_streams_that_end_empty_again_and_again_are_given_up(
    scripted: ScriptedServers,
) -> None:
    def answer(request: Request) -> Reply:
        if request.method == "POST":
            return sse_reply(sse_event(raw="retry: 10\ndata:\n\n", event_id="only"))
        return sse_reply()  # nothing, every time

    server = await scripted(MCPScript(answer))
    async with MCPClient(server.url) as client:
        with pytest.raises(MCPProtocolError, match="ended early, before the answer"):
            await client.call_tool("anything")
    assert sum("last-event-id" in r.headers for r in server.requests) == 3


async def test_a_400_naming_the_session_starts_a_new_session_once(
    scripted: ScriptedServers,
) -> None:
    """server-everything answers an unknown session with 400, not 404."""

    def answer(request: Request) -> Reply:
        if request.headers.get("mcp-session-id") == "session-1":
            error = {"code": -32000, "message": "Bad Request: No valid session ID provided"}
            return json_reply({"jsonrpc": "2.0", "id": None, "error": error}, status=400)
        return json_reply(result(request, TEXT_RESULT))

    server = await scripted(MCPScript(answer))
    async with MCPClient(server.url) as client:
        outcome = await client.call_tool("anything")
        assert client.session_id == "session-2"
    assert outcome.content == [TextContent(text="done")]
    assert len(server.rpc("initialize")) == 2
    calls = server.rpc("tools/call")
    assert [c.headers["mcp-session-id"] for c in calls] == ["session-1", "session-2"]


async def test_a_server_without_a_standalone_stream_is_asked_once(
    scripted: ScriptedServers,
) -> None:
    server = await scripted(MCPScript())
    async with MCPClient(server.url) as client:
        assert not client.listening
        await client.ping()
        await client.ping()
    gets = [r for r in server.requests if r.method == "GET"]
    assert len(gets) == 1
    assert gets[0].headers["accept"] == "text/event-stream"
    assert gets[0].headers["mcp-session-id"] == "session-1"


async def test_the_standalone_stream_carries_requests_and_is_reopened_where_it_ended(
    scripted: ScriptedServers,
) -> None:
    """The server asks a form and a ping on the stream, ends it, and on the reopened one
    (``Last-Event-ID``) announces new tools, which the client lists without being asked."""
    answered = asyncio.Event()
    relisted = asyncio.Event()
    elicit = {
        "jsonrpc": "2.0",
        "id": "ask-1",
        "method": "elicitation/create",
        "params": {
            "message": "Pick one",
            "requestedSchema": {
                "type": "object",
                "properties": {"colour": {"type": "string", "enum": ["red", "blue"]}},
                "required": ["colour"],
            },
        },
    }
    ping = {"jsonrpc": "2.0", "id": "ping-1", "method": "ping"}
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}

    def stream(request: Request) -> Reply:
        return sse_reply(sse_event(elicit, event_id="s1"), sse_event(ping, event_id="s2"), answered)

    def answer(request: Request) -> Reply:
        if request.method == "GET":  # the reopened stream
            return sse_reply(sse_event(changed, event_id="s3"), asyncio.Event())
        if request.rpc_method == "tools/list":
            if len(server.rpc("tools/list")) == 1:
                relisted.set()
            tool = {"name": "fresh", "inputSchema": {"type": "object"}}
            return json_reply(result(request, {"tools": [tool]}))
        message = request.json()
        if message.get("id") in ("ask-1", "ping-1"):
            replies[message["id"]] = message
            if len(replies) == 2:
                answered.set()
            return Reply(202)
        return json_reply(result(request, {}))

    async def choose(form: ElicitationForm) -> ElicitationAnswer:
        return ElicitationAnswer("accept", {"colour": "blue"})

    replies: dict[str, Any] = {}
    server = await scripted(MCPScript(answer, on_stream=stream))
    async with MCPClient(server.url, on_elicit=choose) as client:
        assert client.listening
        await asyncio.wait_for(relisted.wait(), HANG_GUARD_S)
        for _ in range(100):  # the listing's result lands right after the request
            if client.tools:
                break
            await asyncio.sleep(0.01)
        assert [tool.name for tool in client.tools] == ["fresh"]
    assert replies["ask-1"]["result"] == {"action": "accept", "content": {"colour": "blue"}}
    assert replies["ping-1"]["result"] == {}
    reopened = [r for r in server.requests if "last-event-id" in r.headers]
    assert reopened[0].headers["last-event-id"] == "s2"


async def test_a_stream_whose_token_is_refused_on_reopening_opens_again_after_a_request(
    scripted: ScriptedServers,
) -> None:
    """The stream ends, and reopening it gets a 401 (the token was revoked before its time):
    the stream waits, without asking anyone to sign in, and opens again once a request of
    the client's gets through."""
    reopened = asyncio.Event()
    stay_open = asyncio.Event()  # never set: the last stream stays open
    opened: list[Request] = []

    def stream(request: Request) -> Reply:
        opened.append(request)
        if len(opened) == 1:
            return sse_reply(sse_event(raw="retry: 10\ndata:\n\n", event_id="s1"))  # then ends
        reopened.set()
        return sse_reply(stay_open)

    def answer(request: Request) -> Reply:
        if request.method == "GET":  # the reopening, with Last-Event-ID
            refused.set()
            return json_reply({"error": "invalid_token"}, status=401)
        return json_reply(result(request, {}))

    refused = asyncio.Event()
    server = await scripted(MCPScript(answer, on_stream=stream))
    async with MCPClient(server.url, token="revoked-early") as client:
        await asyncio.wait_for(refused.wait(), HANG_GUARD_S)
        await until(lambda: not client.listening)  # the stream's task ends on the refusal
        assert len(opened) == 1
        await client.ping()
        await asyncio.wait_for(reopened.wait(), HANG_GUARD_S)
        await until(lambda: client.listening)
    assert [r.headers.get("last-event-id") for r in server.requests if r.method == "GET"] == [
        None,
        "s1",
        None,
    ]


async def test_a_form_request_whose_schema_is_not_flat_is_refused(
    scripted: ScriptedServers,
) -> None:
    nested = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "elicitation/create",
        "params": {
            "message": "Address?",
            "requestedSchema": {
                "type": "object",
                "properties": {"address": {"type": "object", "properties": {}}},
            },
        },
    }

    def answer(request: Request) -> Reply:
        if request.rpc_method == "tools/call":
            return sse_reply(sse_event(nested), sse_event(result(request, TEXT_RESULT)))
        return json_reply(result(request, {}))

    async def never(form: ElicitationForm) -> ElicitationAnswer:
        raise AssertionError("a form that cannot be drawn reached the handler")

    server = await scripted(MCPScript(answer))
    async with MCPClient(server.url, on_elicit=never) as client:
        await client.call_tool("anything")
    (reply,) = [json.loads(r.body) for r in server.requests if r.body and b'"id":9' in r.body]
    assert reply["error"]["code"] == -32602
    assert "type forms cannot ask for" in reply["error"]["message"]


async def test_tools_that_require_tasks_are_left_out_with_a_note(
    scripted: ScriptedServers,
) -> None:
    def answer(request: Request) -> Reply:
        tools = [
            {"name": "plain", "inputSchema": {"type": "object"}},
            {
                "name": "optional",
                "inputSchema": {"type": "object"},
                "execution": {"taskSupport": "optional"},
            },
            {
                "name": "research",
                "inputSchema": {"type": "object"},
                "execution": {"taskSupport": "required"},
            },
        ]
        return json_reply(result(request, {"tools": tools}))

    server = await scripted(MCPScript(answer))
    host = MCPClientHost()
    try:
        status = await host.add_server(MCPServerConfig(name="s", url=server.url))
        assert [tool.name for tool in host.tools()] == ["s__plain", "s__optional"]
        assert status.tool_count == 2
        assert status.left_out == [f"research: {TASKS_REQUIRED_NOTE}"]
    finally:
        await host.close()
