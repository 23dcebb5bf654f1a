"""MCPClientHost and MCPTool: several servers behind one set of agent tools."""

from __future__ import annotations

import re
import uuid
from typing import Any, cast

import pytest
from mcp_servers import TOKEN, ScriptedServers, SDKServers
from mcp_types import Tool
from pydantic import ValidationError
from scripted_server import MCPScript, Reply, Request, json_reply, result

from agent_py.core.tool import ToolContext, ToolError
from agent_py.mcp import (
    FallbackTransport,
    HTTPResponse,
    HTTPTransport,
    MCPClientHost,
    MCPConnectionError,
    MCPServerConfig,
    MCPServerStatus,
    MCPTool,
    namespaced_tool_name,
)
from agent_py.mcp.transport import BufferedResponse

OPENAI_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def context(progress: list[tuple[str, dict[str, Any]]] | None = None) -> ToolContext:
    def report(message: str, meta: dict[str, Any]) -> None:
        if progress is not None:
            progress.append((message, meta))

    return ToolContext(model=cast(Any, None), report_progress=report)


def tool_named(host: MCPClientHost, name: str) -> MCPTool:
    return next(tool for tool in host.tools() if tool.name == name)


async def test_two_servers_with_the_same_tools_are_kept_apart(sdk_servers: SDKServers) -> None:
    host = MCPClientHost()
    try:
        await host.add_servers(
            [
                MCPServerConfig(name="alpha", url=sdk_servers.open_url),
                MCPServerConfig(name="beta", url=sdk_servers.secured_url, token=TOKEN),
            ]
        )
        names = {tool.name for tool in host.tools()}
        assert {"alpha__echo", "beta__echo", "alpha__add", "beta__add"} <= names
        assert all(OPENAI_NAME.match(name) for name in names)
        echo = tool_named(host, "beta__echo")
        assert (echo.server, echo.tool.name) == ("beta", "echo")
        assert echo.input_schema["required"] == ["text"]
        assert echo.name == "beta__echo"
        outcome = await echo.run({"text": "from beta"}, context())
        assert outcome.content == "from beta"
        assert outcome.data == "from beta"  # the SDK's {"result": ...} wrapping is unwrapped
        assert outcome.meta == {"server": "beta", "tool": "echo"}
    finally:
        await host.close()


async def test_one_failing_server_does_not_stop_the_others(
    sdk_servers: SDKServers, closed_port_url: str
) -> None:
    statuses: list[MCPServerStatus] = []
    host = MCPClientHost(on_status=statuses.append)
    try:
        await host.add_servers(
            [
                MCPServerConfig(name="down", url=closed_port_url),
                MCPServerConfig(name="locked", url=sdk_servers.secured_url),
                MCPServerConfig(name="browser_only", url=sdk_servers.open_url, transport="fetch"),
                MCPServerConfig(name="off", url=sdk_servers.open_url, enabled=False),
                MCPServerConfig(name="good", url=sdk_servers.open_url),
            ]
        )
        by_name = {status.name: status for status in host.statuses()}
        assert by_name["down"].state == "error"
        assert by_name["down"].error is not None and "Cannot reach" in by_name["down"].error
        assert by_name["locked"].state == "error"
        assert by_name["locked"].error is not None and "needs a token" in by_name["locked"].error
        assert by_name["browser_only"].state == "error"
        assert by_name["browser_only"].error is not None
        assert "only in the browser page" in by_name["browser_only"].error
        assert by_name["off"].state == "disabled"
        good = by_name["good"]
        # The SDK's server speaks both eras: the newest wins.
        assert (good.state, good.error, good.protocol_version) == ("connected", None, "2026-07-28")
        assert good.server_name == "test-server"
        assert good.tool_count >= 9
        assert {tool.server for tool in host.tools()} == {"good"}
        assert len(host.tools()) == good.tool_count
        # Each server went through "connecting" (or straight to "disabled"), then its outcome.
        assert [s.state for s in statuses if s.name == "good"] == ["connecting", "connected"]
        assert [s.state for s in statuses if s.name == "off"] == ["disabled"]
    finally:
        await host.close()
    assert host.statuses() == []


async def test_mcp_tool_reports_progress_errors_and_failures(sdk_servers: SDKServers) -> None:
    host = MCPClientHost()
    try:
        await host.add_server(MCPServerConfig(name="srv", url=sdk_servers.open_url, timeout_s=1.0))
        progress: list[tuple[str, dict[str, Any]]] = []
        slow = tool_named(host, "srv__slow")
        assert slow.timeout_s == pytest.approx(3.0)  # the agent's limit sits above ours
        done = await slow.run({"steps": 2, "delay_s": 0.01}, context(progress))
        assert (done.content, done.is_error) == ("slept 2 steps", False)
        assert progress == [
            ("step 1 of 2", {"server": "srv", "tool": "slow", "progress": 1, "total": 2}),
            ("step 2 of 2", {"server": "srv", "tool": "slow", "progress": 2, "total": 2}),
        ]

        failed = await tool_named(host, "srv__fail").run({"reason": "no disk"}, context())
        assert failed.is_error
        assert "no disk" in failed.content

        with pytest.raises(ToolError, match="MCP server 'srv' did not answer tool 'slow'"):
            await slow.run({"steps": 50, "delay_s": 0.1}, context())
    finally:
        await host.close()
    with pytest.raises(ToolError, match="MCP server 'srv' was disconnected"):
        await slow.run({}, context())


async def test_a_changed_tool_list_reaches_the_host(sdk_servers: SDKServers) -> None:
    statuses: list[MCPServerStatus] = []
    host = MCPClientHost(on_status=statuses.append)
    new_tool = f"greet_{uuid.uuid4().hex[:8]}"
    try:
        before = (
            await host.add_server(MCPServerConfig(name="s", url=sdk_servers.open_url))
        ).tool_count
        await tool_named(host, "s__register_tool").run({"name": new_tool}, context())
        assert host.status("s").tool_count == before + 1
        assert statuses[-1].tool_count == before + 1
        greeting = await tool_named(host, f"s__{new_tool}").run({"who": "host"}, context())
        assert greeting.content == "hello host"
    finally:
        await host.close()


async def test_adding_a_server_again_replaces_it_and_reconnect_recovers(
    sdk_servers: SDKServers,
) -> None:
    host = MCPClientHost()
    try:
        status = await host.add_server(MCPServerConfig(name="s", url=sdk_servers.secured_url))
        assert status.state == "error"
        fixed = MCPServerConfig(name="s", url=sdk_servers.secured_url, token=TOKEN)
        assert (await host.add_server(fixed)).state == "connected"
        assert len(host.statuses()) == 1
        old_client = host.client("s")
        assert (await host.reconnect("s")).state == "connected"
        assert host.client("s") is not old_client
        await host.remove_server("s")
        assert host.tools() == []
    finally:
        await host.close()


async def test_text_image_and_resource_blocks_become_readable_text(
    scripted: ScriptedServers,
) -> None:
    content = [
        {"type": "text", "text": "Here it is."},
        {"type": "image", "data": "iVBORw0KGgo=" * 200, "mimeType": "image/png"},
        {
            "type": "resource",
            "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "A"},
        },
        {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAA"}},
        {"type": "resource_link", "uri": "file:///c", "name": "c", "description": "the c file"},
    ]

    def answer(request: Request) -> Reply:
        if request.rpc_method == "tools/list":
            tool = {"name": "show", "inputSchema": {"type": "object"}}
            return json_reply(result(request, {"tools": [tool]}))
        return json_reply(result(request, {"content": content}))

    server = await scripted(MCPScript(answer))
    host = MCPClientHost()
    try:
        await host.add_server(MCPServerConfig(name="files", url=server.url))
        outcome = await tool_named(host, "files__show").run({}, context())
    finally:
        await host.close()
    assert outcome.content == (
        "Here it is.\n"
        "[image: image/png, 1.76 KB]\n"
        "[resource <file:///a.txt>, text/plain]\nA\n"
        "[resource <file:///b.bin>, 3 bytes]\n"
        "[resource link c <file:///c>: the c file]"
    )
    assert outcome.data[0] == {"type": "text", "text": "Here it is."}
    assert len(outcome.data) == 5


async def test_a_result_of_text_blocks_is_its_text_as_data(scripted: ScriptedServers) -> None:
    """``${s1}`` of a fetched page or a git log is the text, not its content blocks."""
    content = [{"type": "text", "text": "Contents of a page:"}, {"type": "text", "text": "Hi"}]

    def answer(request: Request) -> Reply:
        if request.rpc_method == "tools/list":
            tool = {"name": "fetch", "inputSchema": {"type": "object"}}
            return json_reply(result(request, {"tools": [tool]}))
        return json_reply(result(request, {"content": content}))

    server = await scripted(MCPScript(answer))
    host = MCPClientHost()
    try:
        await host.add_server(MCPServerConfig(name="web", url=server.url))
        outcome = await tool_named(host, "web__fetch").run({}, context())
    finally:
        await host.close()
    assert outcome.data == outcome.content == "Contents of a page:\nHi"
    assert outcome.reference_text() == "Contents of a page:\nHi"


def test_tool_names_are_namespaced_and_safe_for_function_calling() -> None:
    assert namespaced_tool_name("files", "search") == "files__search"
    dotted = namespaced_tool_name("files", "search.v2")
    underscored = namespaced_tool_name("files", "search_v2")
    assert dotted != underscored
    assert dotted.startswith("files__search_v2_") and OPENAI_NAME.match(dotted)
    long = [namespaced_tool_name("s" * 32, "t" * 100 + suffix) for suffix in ("a", "b")]
    assert long[0] != long[1]
    assert all(len(name) <= 64 and OPENAI_NAME.match(name) for name in long)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"name": "a__b"}, "cannot contain '__'"),
        ({"name": "has space"}, "should match pattern"),
        ({"name": "x" * 33}, "at most 32 characters"),
        ({"url": "ftp://example.org/mcp"}, "must start with http:// or https://"),
        ({"transport": "carrier-pigeon"}, "'auto', 'fetch', 'bridge' or 'http'"),
    ],
)
def test_bad_server_settings_are_refused_with_a_reason(
    fields: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValidationError, match=problem):
        MCPServerConfig.model_validate({"name": "ok", "url": "http://127.0.0.1/mcp", **fields})


def test_server_settings_round_trip_and_hide_the_token() -> None:
    config = MCPServerConfig(name="s", url=" https://example.org/mcp ", token="  ")
    assert (config.url, config.token) == ("https://example.org/mcp", None)
    secret = MCPServerConfig(name="s", url="https://example.org/mcp", token="abc")
    assert "abc" not in repr(secret)
    assert MCPServerConfig.model_validate_json(secret.model_dump_json()) == secret


class RecordingTransport(HTTPTransport):
    def __init__(self, *, fails: bool) -> None:
        self.fails = fails
        self.sent = 0
        self.closed = False

    async def send(
        self, method: str, url: str, headers: Any, body: bytes | None, timeout_s: float | None
    ) -> HTTPResponse:
        self.sent += 1
        if self.fails:
            raise MCPConnectionError("blocked")
        return BufferedResponse(200, {}, b"")

    async def aclose(self) -> None:
        self.closed = True


async def test_the_fallback_transport_switches_only_if_the_first_never_connected() -> None:
    fetch, bridge = RecordingTransport(fails=True), RecordingTransport(fails=False)
    auto = FallbackTransport(fetch, bridge)
    for _ in range(2):
        assert (await auto.send("POST", "http://x/mcp", {}, b"{}", 1.0)).status == 200
    assert (fetch.sent, bridge.sent, fetch.closed, auto.using_fallback) == (1, 2, True, True)

    fetch, bridge = RecordingTransport(fails=False), RecordingTransport(fails=False)
    auto = FallbackTransport(fetch, bridge)
    await auto.send("POST", "http://x/mcp", {}, b"{}", 1.0)
    fetch.fails = True  # an outage after fetch worked is not a reason to switch
    with pytest.raises(MCPConnectionError):
        await auto.send("POST", "http://x/mcp", {}, b"{}", 1.0)
    assert bridge.sent == 0


def test_a_tool_from_the_server_keeps_its_description_and_schema() -> None:
    tool = Tool(name="t", description="Does t.", input_schema={"type": "object", "properties": {}})
    wrapped = MCPTool(server="s", tool=tool, client=cast(Any, None), call_timeout_s=1.0)
    assert (wrapped.name, wrapped.description, wrapped.input_schema) == (
        "s__t",
        "Does t.",
        {"type": "object", "properties": {}},
    )
