"""MCP 2026-07-28 on the wire, against scripted servers: finding the era (and not probing
twice), renegotiating a version, input_required rounds, the headers a request mirrors, and
tools whose x-mcp-header annotations are invalid. The SDK's real server (both eras) is
covered in test_mcp_client.py and test_mcp_server_streams.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from mcp_servers import ScriptedServers
from mcp_types import Tool
from scripted_server import MCPScript, Reply, Request, json_reply, result

from agent_py.mcp import MCPClient
from agent_py.mcp.elicitation import ElicitationAnswer, ElicitationForm
from agent_py.mcp.errors import MCPError, MCPProtocolError
from agent_py.mcp.input_required import MAX_ROUNDS
from agent_py.mcp.request_headers import encode_value, header_problem, param_headers

MODERN = "2026-07-28"
DISCOVERED = {
    "resultType": "complete",
    "supportedVersions": [MODERN],
    "capabilities": {"tools": {}},
    "ttlMs": 0,
    "cacheScope": "public",
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern", "version": "1"}},
}
DONE = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}


def rpc_error(request: Request | None, code: int, message: str, data: Any = None) -> Reply:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    request_id = request.json()["id"] if request is not None else None
    return json_reply({"jsonrpc": "2.0", "id": request_id, "error": error}, status=400)


def modern_server(on_request: Callable[[Request], Reply]) -> Callable[[Request], Reply]:
    """A 2026-07-28-only server: discover answered, the rest to ``on_request``; a request
    without the revision's header is refused as such a server does."""

    def serve(request: Request) -> Reply:
        if request.headers.get("mcp-protocol-version") != MODERN:
            return rpc_error(None, -32022, "Unsupported protocol version", {"supported": [MODERN]})
        if request.rpc_method == "server/discover":
            return json_reply(result(request, DISCOVERED))
        return on_request(request)

    return serve


def params(request: Request) -> dict[str, Any]:
    value: dict[str, Any] = request.json()["params"]
    return value


# Finding the era.


async def test_a_version_error_naming_the_revision_is_answered_by_asking_again(
    scripted: ScriptedServers,
) -> None:
    """As the conformance suite's server does: the first request is refused with -32022."""
    refused: list[bool] = []

    def serve(request: Request) -> Reply:
        if not refused:
            refused.append(True)
            return rpc_error(request, -32022, "Unsupported", {"supported": [MODERN]})
        return modern_server(lambda r: json_reply(result(r, {"tools": []})))(request)

    server = await scripted(serve)
    async with MCPClient(server.url) as client:
        assert (client.protocol_version, client.stateless) == (MODERN, True)
        assert client.server_info is not None and client.server_info.name == "modern"
        await client.refresh_tools()
    first, again, listed = server.requests[:3]
    assert [first.rpc_method, again.rpc_method, listed.rpc_method] == [
        "server/discover",
        "server/discover",
        "tools/list",
    ]
    assert first.json()["id"] != again.json()["id"]
    for request in (again, listed):
        meta = params(request)["_meta"]
        assert meta["io.modelcontextprotocol/protocolVersion"] == MODERN
        assert request.headers["mcp-protocol-version"] == MODERN
        assert request.headers["mcp-method"] == request.rpc_method
        assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "agent_py"
        assert meta["io.modelcontextprotocol/clientCapabilities"] == {}
    assert "initialize" not in {r.rpc_method for r in server.requests}


async def test_a_server_that_names_only_2025_revisions_is_met_with_initialize_at_once(
    scripted: ScriptedServers,
) -> None:
    script = MCPScript(version="2025-06-18")

    def serve(request: Request) -> Reply:
        if request.rpc_method == "server/discover":
            named = {"supported": ["2025-06-18", "2025-03-26"], "requested": MODERN}
            return rpc_error(request, -32022, "Unsupported protocol version", named)
        return script(request)  # type: ignore[return-value]

    server = await scripted(serve)
    async with MCPClient(server.url) as client:
        assert (client.protocol_version, client.stateless) == ("2025-06-18", False)
    methods = [r.rpc_method for r in server.requests if r.method == "POST"]
    assert methods[:2] == ["server/discover", "initialize"]  # no second probe
    initialize = next(r for r in server.requests if r.rpc_method == "initialize")
    assert params(initialize)["protocolVersion"] == "2025-06-18"


async def test_a_2025_server_is_probed_once_per_process(scripted: ScriptedServers) -> None:
    server = await scripted(MCPScript())
    for _ in range(2):
        async with MCPClient(server.url) as client:
            assert client.protocol_version == "2025-11-25"
    assert [r.rpc_method for r in server.requests].count("server/discover") == 1
    assert [r.rpc_method for r in server.requests].count("initialize") == 2


async def test_no_shared_revision_is_a_clear_error(scripted: ScriptedServers) -> None:
    def serve(request: Request) -> Reply:
        return rpc_error(request, -32022, "Unsupported", {"supported": ["2099-01-01"]})

    server = await scripted(serve)
    with pytest.raises(MCPProtocolError, match="speaks MCP 2099-01-01, none of which this client"):
        async with MCPClient(server.url):
            pass


async def test_a_pinned_2026_revision_is_not_silently_traded_for_an_older_one(
    scripted: ScriptedServers,
) -> None:
    server = await scripted(MCPScript())
    with pytest.raises(MCPProtocolError, match="does not speak MCP 2026-07-28"):
        async with MCPClient(server.url, protocol=MODERN):
            pass
    assert "initialize" not in {r.rpc_method for r in server.requests}


# Multi round-trip requests.


def elicitation(message: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean", "default": True}}}
    return {
        "method": "elicitation/create",
        "params": {"message": message, "requestedSchema": schema},
    }


async def accept(form: ElicitationForm) -> ElicitationAnswer:
    return ElicitationAnswer("accept", form.defaults())


async def test_input_required_rounds_echo_the_state_and_answer_each_question(
    scripted: ScriptedServers,
) -> None:
    state = 'opaque "state" \u00e9 {not json'

    def on_request(request: Request) -> Reply:
        sent = params(request)
        if request.rpc_method != "tools/call":
            return json_reply(result(request, {"resultType": "complete", "tools": []}))
        if "inputResponses" not in sent:  # round 1: a question and state
            needed = {"first": elicitation("One?")}
            body = {"resultType": "input_required", "inputRequests": needed, "requestState": state}
            return json_reply(result(request, body))
        if "second" not in sent["inputResponses"]:  # round 2: a question, no state
            needed = {"second": elicitation("Two?")}
            return json_reply(
                result(request, {"resultType": "input_required", "inputRequests": needed})
            )
        return json_reply(result(request, DONE))

    forms: list[str] = []

    async def fill(form: ElicitationForm) -> ElicitationAnswer:
        forms.append(form.message)
        return await accept(form)

    server = await scripted(modern_server(on_request))
    async with MCPClient(server.url, on_elicit=fill) as client:
        answer = await client.call_tool("book", {"what": "room"})
    assert answer.content[0].text == "done"  # type: ignore[union-attr]
    assert forms == ["One?", "Two?"]
    calls = server.rpc("tools/call")
    assert len(calls) == 3
    assert len({c.json()["id"] for c in calls}) == 3  # each round is a new request
    first, second, third = (params(c) for c in calls)
    assert "inputResponses" not in first and "requestState" not in first
    assert second["requestState"] == state  # byte for byte
    assert second["inputResponses"] == {"first": {"action": "accept", "content": {"ok": True}}}
    assert "requestState" not in third  # none was sent with round 2
    assert third["inputResponses"] == {"second": {"action": "accept", "content": {"ok": True}}}
    assert all(p["arguments"] == {"what": "room"} for p in (first, second, third))
    capabilities = first["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert capabilities == {"elicitation": {"form": {}}}


async def test_a_server_that_never_stops_asking_is_given_up(scripted: ScriptedServers) -> None:
    def on_request(request: Request) -> Reply:
        body = {"resultType": "input_required", "requestState": "again"}
        return json_reply(result(request, body))

    server = await scripted(modern_server(on_request))
    async with MCPClient(server.url, on_elicit=accept) as client:
        with pytest.raises(MCPError, match=f"kept asking for more input .*{MAX_ROUNDS} rounds"):
            await client.call_tool("loop")
    assert len(server.rpc("tools/call")) == MAX_ROUNDS + 1


async def test_input_required_is_refused_where_the_protocol_does_not_allow_it(
    scripted: ScriptedServers,
) -> None:
    def on_request(request: Request) -> Reply:
        return json_reply(result(request, {"resultType": "input_required", "requestState": "x"}))

    server = await scripted(modern_server(on_request))
    async with MCPClient(server.url, on_elicit=accept) as client:
        with pytest.raises(MCPProtocolError, match="asked for input in answer to tools/list"):
            await client.refresh_tools()


# Headers that mirror the body, and tools whose annotations are invalid.


def tool(name: str, properties: dict[str, Any], **schema: Any) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object", "properties": properties, **schema}}


async def test_a_call_mirrors_its_name_and_annotated_arguments_and_bad_tools_are_left_out(
    scripted: ScriptedServers,
) -> None:
    tools = [
        tool(
            "run sql \u2713",
            {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "opts": {
                    "type": "object",
                    "properties": {"dry": {"type": "boolean", "x-mcp-header": "Dry"}},
                },
                "limit": {"type": "integer", "x-mcp-header": "Limit"},
                "query": {"type": "string"},
            },
        ),
        tool("bad_number", {"x": {"type": "number", "x-mcp-header": "X"}}),
        tool(
            "bad_twice",
            {
                "a": {"type": "string", "x-mcp-header": "A"},
                "b": {"type": "string", "x-mcp-header": "a"},
            },
        ),
        tool(
            "bad_items",
            {"xs": {"type": "array", "items": {"type": "string", "x-mcp-header": "Xs"}}},
        ),
    ]

    def on_request(request: Request) -> Reply:
        if request.rpc_method == "tools/list":
            return json_reply(result(request, {"resultType": "complete", "tools": tools}))
        return json_reply(result(request, DONE))

    server = await scripted(modern_server(on_request))
    async with MCPClient(server.url) as client:
        listed = await client.refresh_tools()
        await client.call_tool(
            "run sql \u2713",
            {"region": " us-west1", "opts": {"dry": True}, "limit": 42, "query": "q"},
        )
    assert [t.name for t in listed] == ["run sql \u2713"]
    (call,) = server.rpc("tools/call")
    assert call.headers["mcp-method"] == "tools/call"
    assert call.headers["mcp-name"] == encode_value("run sql \u2713")
    assert call.headers["mcp-name"].startswith("=?base64?")
    assert call.headers["mcp-param-region"] == "=?base64?IHVzLXdlc3Qx?="  # an edge space
    assert call.headers["mcp-param-dry"] == "true"
    assert call.headers["mcp-param-limit"] == "42"


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("us-west1", "us-west1"),
        ("Hello, \u4e16\u754c", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
    ],
)
def test_header_values_are_encoded_as_the_revision_shows(value: str, encoded: str) -> None:
    assert encode_value(value) == encoded


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}, "not a valid header name"),
        ({"properties": {"a": {"type": "string", "x-mcp-header": "A B"}}}, "not a valid header"),
        ({"properties": {"a": {"type": "string", "x-mcp-header": "A\r\n"}}}, "not a valid header"),
        ({"properties": {"a": {"type": "object", "x-mcp-header": "A"}}}, "not a string, integer"),
        ({"properties": {"a": {"anyOf": [{"type": "string", "x-mcp-header": "A"}]}}}, "reachable"),
        ({"$defs": {"d": {"type": "string", "x-mcp-header": "D"}}, "properties": {}}, "reachable"),
        ({"x-mcp-header": "Root", "properties": {}}, "reachable"),
    ],
)
def test_invalid_annotations_are_named(schema: dict[str, Any], problem: str) -> None:
    found = header_problem(Tool(name="t", input_schema={"type": "object", **schema}))
    assert found is not None and problem in found


def test_an_absent_or_null_argument_sends_no_header() -> None:
    annotated = Tool(
        name="t",
        input_schema={
            "type": "object",
            "properties": {
                "a": {"type": "string", "x-mcp-header": "A"},
                "n": {"type": "integer", "x-mcp-header": "N", "default": {"x-mcp-header": "no"}},
            },
        },
    )
    assert header_problem(annotated) is None  # a default is a value, not a schema
    assert param_headers(annotated, {"a": None}) == {}
    assert param_headers(annotated, {"n": 2**60}) == {}  # beyond JavaScript's safe integers
    assert param_headers(annotated, {"a": "x", "n": -7}) == {
        "Mcp-Param-A": "x",
        "Mcp-Param-N": "-7",
    }


async def test_a_header_mismatch_makes_the_client_list_again_and_call_once_more(
    scripted: ScriptedServers,
) -> None:
    """The server changed the tool's schema: its first answer says a header is missing."""
    plain = tool("deploy", {"region": {"type": "string"}})
    annotated = tool("deploy", {"region": {"type": "string", "x-mcp-header": "Region"}})
    schemas = [plain]

    def on_request(request: Request) -> Reply:
        if request.rpc_method == "tools/list":
            return json_reply(result(request, {"resultType": "complete", "tools": schemas}))
        if "mcp-param-region" not in request.headers:
            schemas[:] = [annotated]
            return rpc_error(request, -32020, "Header mismatch: Mcp-Param-Region is missing")
        return json_reply(result(request, DONE))

    server = await scripted(modern_server(on_request))
    async with MCPClient(server.url) as client:
        await client.refresh_tools()
        await client.call_tool("deploy", {"region": "eu"})
    first, second = server.rpc("tools/call")
    assert "mcp-param-region" not in first.headers
    assert second.headers["mcp-param-region"] == "eu"
    assert len(server.rpc("tools/list")) == 2
