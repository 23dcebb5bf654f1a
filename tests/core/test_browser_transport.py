"""agent_py.page.http and the MCP half of agent_py.page.session.PageSession, driven by
a Python stand-in for the worker's JavaScript HTTP object (web/worker/http-port.js). The stand-in
answers like a small MCP server, so the whole client runs over it; the real object is
exercised in tests/web/test_page_mcp.py."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from support import WorkspaceInMemory

from agent_py.mcp import (
    MCPConfigError,
    MCPConnectionError,
    MCPServerConfig,
    MCPTimeoutError,
)
from agent_py.page import session as session_module
from agent_py.page.http import BrowserTransport, browser_transport_factory
from agent_py.page.session import PageSession
from agent_py.page.settings import PageSettings

URL = "http://127.0.0.1:8931/mcp"
ADD_TOOL = {
    "name": "add",
    "description": "Add two integers.",
    "inputSchema": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
}


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] = field(default_factory=list)


Failure = tuple[str, str]  # (kind, message) as the JavaScript side reports it
Handler = Callable[[dict[str, Any]], Answer | Failure]


def mcp_server(request: dict[str, Any]) -> Answer | Failure:
    """A minimal MCP server: JSON for the handshake and listing, SSE in small chunks for calls."""
    if request["method"] == "DELETE":
        return Answer(200)
    if request["method"] == "GET":
        return Answer(405)  # no standalone event stream
    message = json.loads(base64.b64decode(request["body"]))
    if "id" not in message:
        return Answer(202)
    result: dict[str, Any]
    if message["method"] == "initialize":
        result = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "fake", "version": "1"},
        }
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        return Answer(200, {"Content-Type": "application/json", "Mcp-Session-Id": "s1"}, [body])
    if message["method"] == "tools/list":
        result = {"tools": [ADD_TOOL]}
    elif message["method"] == "tools/call":
        args = message["params"]["arguments"]
        result = {"content": [{"type": "text", "text": str(args["a"] + args["b"])}]}
    else:
        return Answer(404)
    event = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
    stream = f"event: message\ndata: {event}\n\n".encode()
    pieces = [stream[i : i + 7] for i in range(0, len(stream), 7)]
    return Answer(200, {"content-type": "text/event-stream"}, pieces)


class FakeHttp:
    """The worker's ``agent_http`` object, in Python: JSON strings in and out."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[dict[str, Any]] = []
        self.aborted: list[int] = []
        self._bodies: dict[int, list[bytes]] = {}
        self.hold_start: asyncio.Event | None = None

    async def start(self, request_json: str) -> str:
        request = json.loads(request_json)
        self.requests.append(request)
        if self.hold_start is not None:
            await self.hold_start.wait()
        answer = self.handler(request)
        if isinstance(answer, tuple):
            kind, message = answer
            return json.dumps({"ok": False, "error": {"kind": kind, "message": message}})
        self._bodies[request["id"]] = list(answer.chunks)
        headers = {k.lower(): v for k, v in answer.headers.items()}
        return json.dumps(
            {"ok": True, "id": request["id"], "status": answer.status, "headers": headers}
        )

    async def read(self, request_id: int) -> str:
        chunks = self._bodies.get(request_id)
        if chunks is None:
            return json.dumps({"ok": False, "error": {"kind": "network", "message": "gone"}})
        if not chunks:
            del self._bodies[request_id]
            return json.dumps({"ok": True, "done": True})
        return json.dumps({"ok": True, "chunk": base64.b64encode(chunks.pop(0)).decode()})

    def abort(self, request_id: int) -> None:
        self.aborted.append(request_id)
        self._bodies.pop(request_id, None)

    def modes(self) -> list[str]:
        return [request["mode"] for request in self.requests]


def blocked_fetch(then: Handler) -> Handler:
    """fetch is blocked (a server without CORS headers); the bridge answers with ``then``."""

    def handler(request: dict[str, Any]) -> Answer | Failure:
        if request["mode"] == "fetch":
            return ("blocked", "The browser blocked the request or could not connect.")
        return then(request)

    return handler


def config(transport: str = "auto", name: str = "calc", url: str = URL) -> MCPServerConfig:
    return MCPServerConfig.model_validate({"name": name, "url": url, "transport": transport})


async def test_a_request_crosses_as_json_and_the_body_streams_back_in_order() -> None:
    http = FakeHttp(lambda request: Answer(200, {"X-One": "1"}, [b"ab", b"", b"cd"]))
    transport = BrowserTransport(http, "bridge", url=URL, server="calc")

    response = await transport.send("POST", URL, {"Accept": "x"}, b'{"q":1}', 2.5)
    body = b"".join([chunk async for chunk in response.chunks()])

    sent = http.requests[0]
    assert sent["mode"] == "bridge" and sent["method"] == "POST" and sent["url"] == URL
    assert sent["headers"] == {"Accept": "x"}
    assert base64.b64decode(sent["body"]) == b'{"q":1}'
    assert sent["timeout_ms"] == 2500
    assert (response.status, response.headers, body) == (200, {"x-one": "1"}, b"abcd")
    assert http.aborted == []  # read to the end: nothing to abort


@pytest.mark.parametrize(
    ("mode", "kind", "raised", "fragments"),
    [
        ("fetch", "timeout", MCPTimeoutError, ["did not answer within 3 s"]),
        (
            "fetch",
            "blocked",
            MCPConnectionError,
            [
                "'calc'",
                "no CORS headers",
                "'auto' or 'bridge'",
                "allow it to reach http://127.0.0.1:8931",
            ],
        ),
        ("bridge", "refused", MCPConnectionError, ["bridge extension refused", "not approved"]),
        ("bridge", "network", MCPConnectionError, ["'calc'", "not approved"]),
        ("bridge", "no-bridge", MCPConnectionError, ["set to use the bridge extension"]),
        ("bridge", "bridge-silent", MCPConnectionError, ["'calc'", "cannot be reached: "]),
    ],
)
async def test_failures_become_mcp_errors_that_say_what_to_do(
    mode: str, kind: str, raised: type[Exception], fragments: list[str]
) -> None:
    http = FakeHttp(lambda request: (kind, "http://127.0.0.1:8931 is not approved"))
    transport = BrowserTransport(http, mode, url=URL, server="calc")  # type: ignore[arg-type]

    with pytest.raises(raised) as caught:
        await transport.send("POST", URL, {}, b"{}", 3)

    for fragment in fragments:
        assert fragment in str(caught.value)


async def test_auto_uses_the_bridge_once_fetch_is_blocked() -> None:
    http = FakeHttp(blocked_fetch(lambda request: Answer(200, {}, [b"ok"])))
    transport = browser_transport_factory(http)(config("auto"))

    first = await transport.send("GET", URL, {}, None, None)
    second = await transport.send("GET", URL, {}, None, None)

    assert (first.status, second.status) == (200, 200)
    assert http.modes() == ["fetch", "bridge", "bridge"]


async def test_auto_without_the_extension_names_the_server_and_says_to_install_it() -> None:
    http = FakeHttp(blocked_fetch(lambda request: ("no-bridge", "not installed")))
    transport = browser_transport_factory(http)(config("auto"))

    with pytest.raises(MCPConnectionError) as caught:
        await transport.send("POST", URL, {}, b"{}", 5)

    assert str(caught.value) == (
        f"The MCP server 'calc' ({URL}) does not allow browser requests (no CORS headers), or "
        "it is not running. Install the agent_py bridge extension (see README), add this page "
        "in its options, and allow it to reach http://127.0.0.1:8931 when the extension asks."
    )


async def test_a_server_that_answered_and_then_cannot_be_reached_has_stopped() -> None:
    answers: list[Answer | Failure] = [Answer(200, {}, [b"ok"]), ("blocked", "could not connect")]
    http = FakeHttp(lambda request: answers.pop(0))
    transport = browser_transport_factory(http)(config("auto"))
    await transport.send("GET", URL, {}, None, None)

    with pytest.raises(MCPConnectionError) as caught:
        await transport.send("GET", URL, {}, None, None)

    assert http.modes() == ["fetch", "fetch"]  # an outage, not a reason to try the extension
    assert str(caught.value).startswith(f"The MCP server 'calc' ({URL}) stopped answering:")
    assert "CORS" not in str(caught.value)


def test_the_http_transport_is_refused_in_the_page() -> None:
    with pytest.raises(MCPConfigError, match="needs CPython"):
        browser_transport_factory(FakeHttp(mcp_server))(config("http"))


async def test_cancelling_while_waiting_for_headers_aborts_the_request() -> None:
    http = FakeHttp(mcp_server)
    http.hold_start = asyncio.Event()
    transport = BrowserTransport(http, "fetch", url=URL)
    task = asyncio.create_task(transport.send("GET", URL, {}, None, None))
    await asyncio.sleep(0.01)

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert http.aborted == [http.requests[0]["id"]]


async def test_a_body_read_only_in_part_is_aborted() -> None:
    http = FakeHttp(lambda request: Answer(200, {}, [b"x" * 10, b"y" * 10, b"z"]))
    response = await BrowserTransport(http, "bridge", url=URL).send("GET", URL, {}, None, None)

    body, cut = await response.read(12)

    assert (body, cut) == (b"x" * 10 + b"yy", True)
    assert http.aborted == [http.requests[0]["id"]]


async def test_a_connection_that_breaks_mid_body_is_a_connection_error() -> None:
    http = FakeHttp(lambda request: Answer(200, {}, [b"part"]))
    response = await BrowserTransport(http, "bridge", url=URL).send("GET", URL, {}, None, None)
    http._bodies.clear()  # the JavaScript side lost the request

    with pytest.raises(MCPConnectionError, match="broke while reading"):
        async for _ in response.chunks():
            pass


# --- PageSession with MCP servers -----------------------------------------------------------


class PageBridge(WorkspaceInMemory):
    """The worker's ``agent_bridge`` object: a scripted engine and the UI's callbacks."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.statuses: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []

    async def engineReload(self, model: str) -> str:
        return json.dumps({"ok": True})

    async def engineUnload(self) -> str:
        return json.dumps({"ok": True})

    async def engineTokenize(self, texts_json: str) -> str:
        return json.dumps({"ok": True, "counts": None})  # an engine without a tokenizer

    async def engineInterrupt(self) -> str:
        return json.dumps({"ok": True})

    async def engineChat(self, messages_json: str, call_json: str) -> str:
        return json.dumps({"ok": True, "text": self.replies.pop(0)})

    async def runJavaScript(self, code: str, timeout_ms: int, output_limit: int) -> str:
        return json.dumps({"value": None, "console": [], "error": "unused"})

    async def runPython(self, program: str, timeout_ms: int) -> str:
        return json.dumps({"json": None, "error": "unused", "timedOut": False})

    def endPython(self) -> None:
        return None

    def emit(self, event_json: str) -> None:
        self.events.append(json.loads(event_json))

    def mcpStatus(self, status_json: str) -> None:
        self.statuses.append(json.loads(status_json))


def add_plan(tool: str) -> str:
    step = {
        "step_id": "s1",
        "step_goal": "add",
        "tool_name": tool,
        "tool_intent": "the server adds",
        "expected_output": "the sum",
        "arguments": {"a": 2, "b": 3},
    }
    plan = {"tasks": [{"task_id": "t1", "task_goal": "add", "steps": [step]}]}
    return f"<plan>{json.dumps(plan)}</plan>"


def only_calc(request: dict[str, Any]) -> Answer | Failure:
    if request["url"].startswith("http://127.0.0.1:9/"):
        return ("network", "Cannot reach http://127.0.0.1:9: the connection failed.")
    return mcp_server(request)


async def test_page_session_connects_servers_reports_them_and_runs_their_tools() -> None:
    bridge = PageBridge([add_plan("calc__add"), "<status>done</status><final>5</final>"])
    http = FakeHttp(blocked_fetch(only_calc))
    page = PageSession(bridge, http=http)
    await page.configure(PageSettings(residency="keep_warm").model_dump_json())
    servers = [
        {"name": "calc", "url": URL, "token": "", "transport": "auto", "enabled": True},
        {"name": "down", "url": "http://127.0.0.1:9/mcp", "transport": "bridge"},
        {"name": "bad name!", "url": URL},
    ]

    statuses = {s["name"]: s for s in json.loads(await page.configure_servers(json.dumps(servers)))}

    assert statuses["calc"]["state"] == "connected"
    assert statuses["calc"]["tool_count"] == 1 and statuses["calc"]["tools"] == ["calc__add"]
    assert statuses["down"]["state"] == "error"
    assert "Cannot reach http://127.0.0.1:9" in statuses["down"]["error"]
    assert statuses["bad name!"]["state"] == "error"
    assert "cannot be used" in statuses["bad name!"]["error"]
    reported = [(s["name"], s["state"]) for s in bridge.statuses]
    assert ("calc", "connecting") in reported and ("calc", "connected") in reported

    result = json.loads(await page.run("2 + 3?"))

    assert result["state"] == "completed"
    assert result["steps"][0]["output"] == "5"
    session_start = next(e for e in bridge.events if e["type"] == "session_start")
    assert "calc__add" in session_start["meta"]["tools"]
    calls = [r for r in http.requests if r["body"] and b"tools/call" in base64.b64decode(r["body"])]
    assert [r["mode"] for r in calls] == ["bridge"]  # fetch was blocked once, at the start
    await page.close()


async def test_removed_servers_take_their_tools_out_of_the_next_run() -> None:
    bridge = PageBridge(
        [
            add_plan("calc__add"),
            "<status>done</status><final>5</final>",
            add_plan("calc__add"),
            "<status>done</status><final>none</final>",
        ]
    )
    http = FakeHttp(mcp_server)
    page = PageSession(bridge, http=http)
    await page.configure(PageSettings(residency="keep_warm").model_dump_json())
    calc = [{"name": "calc", "url": URL, "transport": "fetch"}]
    await page.configure_servers(json.dumps(calc))
    first = json.loads(await page.run("add 2 and 3"))
    sent = len(http.requests)
    unchanged = await page.configure_servers(json.dumps(calc))  # the same list: nothing to do
    assert len(http.requests) == sent

    await page.configure_servers("[]")
    second = json.loads(await page.run("add 2 and 3 again"))

    assert first["steps"][0]["output"] == "5"
    assert json.loads(unchanged)[0]["state"] == "connected"
    assert second["steps"][0]["output"].startswith("unknown tool calc__add")
    assert json.loads(page.server_statuses()) == []
    await page.close()


@dataclass
class RunDuringConnect:
    bridge: PageBridge
    http: FakeHttp
    page: PageSession
    connecting: asyncio.Task[str]
    running: asyncio.Task[str]


async def run_while_a_server_connects() -> RunDuringConnect:
    """A page whose saved server is connecting (its requests held) and a run sent meanwhile,
    both under way."""
    bridge = PageBridge([add_plan("calc__add"), "<status>done</status><final>5</final>"])
    http = FakeHttp(mcp_server)
    http.hold_start = asyncio.Event()
    page = PageSession(bridge, http=http)
    await page.configure(PageSettings(residency="keep_warm").model_dump_json())
    calc = [{"name": "calc", "url": URL, "transport": "fetch"}]
    connecting = asyncio.create_task(page.configure_servers(json.dumps(calc)))
    running = asyncio.create_task(page.run("2 + 3?"))
    for _ in range(20):  # both get going: the server's requests are held
        await asyncio.sleep(0)
    assert http.requests and not running.done()
    return RunDuringConnect(bridge, http, page, connecting, running)


async def test_a_run_sent_while_a_server_connects_waits_for_its_tools() -> None:
    """Right after the page opens the saved servers connect; a task sent meanwhile plans
    with their tools, not without them."""
    setup = await run_while_a_server_connects()
    assert setup.bridge.events == []  # the run waits for the server: nothing planned yet
    setup.http.hold_start.set()
    result = json.loads(await setup.running)
    await setup.connecting

    assert result["state"] == "completed"
    assert result["steps"][0]["output"] == "5"
    session_start = next(e for e in setup.bridge.events if e["type"] == "session_start")
    assert "calc__add" in session_start["meta"]["tools"]
    await setup.page.close()


async def test_stop_while_a_run_waits_for_a_server_ends_it_cancelled_with_nothing_planned() -> None:
    setup = await run_while_a_server_connects()

    setup.page.cancel()
    result = json.loads(await setup.running)

    assert result["state"] == "cancelled"
    assert result["error"] == "stopped by the user"
    assert result["steps"] == []
    assert len(setup.bridge.replies) == 2  # the model was never asked
    final = next(e for e in setup.bridge.events if e["type"] == "final")
    assert final["meta"]["state"] == "cancelled"
    setup.http.hold_start.set()
    await setup.connecting
    # The next run goes on as usual, with the server's tool.
    again = json.loads(await setup.page.run("2 + 3?"))
    assert again["state"] == "completed" and again["steps"][0]["output"] == "5"
    await setup.page.close()


async def test_a_server_slower_than_the_wait_joins_from_the_next_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(session_module, "SERVERS_WAIT_S", 0.05)
    write = add_plan("calc__add").replace("calc__add", "llm_generator")
    write = write.replace('{"a": 2, "b": 3}', '{"prompt": "add 2 and 3"}')
    # (The writer's answer in words: a number it wrote would be made up, no code computed it.)
    bridge = PageBridge([write, "five", "<status>done</status><final>five</final>"])
    http = FakeHttp(mcp_server)
    http.hold_start = asyncio.Event()  # never answers during the run
    page = PageSession(bridge, http=http)
    await page.configure(PageSettings(residency="keep_warm").model_dump_json())
    calc = [{"name": "calc", "url": URL, "transport": "fetch"}]
    connecting = asyncio.create_task(page.configure_servers(json.dumps(calc)))

    result = json.loads(await page.run("2 + 3?"))

    assert result["state"] == "completed"
    session_start = next(e for e in bridge.events if e["type"] == "session_start")
    assert "calc__add" not in session_start["meta"]["tools"]
    http.hold_start.set()
    assert json.loads(await connecting)[0]["state"] == "connected"
    await page.close()


class GarbledHttp:
    """A bridge object whose replies are JSON of the wrong shape."""

    def __init__(self, start_reply: str) -> None:
        self.start_reply = start_reply
        self.aborted: list[int] = []

    async def start(self, request_json: str) -> str:
        return self.start_reply

    async def read(self, request_id: int) -> str:
        return '{"ok": true, "chunk": 42}'

    def abort(self, request_id: int) -> None:
        self.aborted.append(request_id)


@pytest.mark.parametrize(
    "start_reply",
    ['{"ok": true, "status": "two hundred"}', '{"ok": true, "headers": ["a"]}', "[]", "not json"],
)
async def test_a_bridge_reply_of_the_wrong_shape_is_an_unreadable_reply(start_reply: str) -> None:
    transport = BrowserTransport(GarbledHttp(start_reply), "fetch", url=URL)  # type: ignore[arg-type]

    with pytest.raises(MCPConnectionError, match="sent an unreadable reply to a request"):
        await transport.send("POST", URL, {}, b"{}", 5)


async def test_a_body_chunk_of_the_wrong_shape_is_an_unreadable_reply() -> None:
    http = GarbledHttp('{"ok": true, "status": 200, "headers": {}}')
    response = await BrowserTransport(http, "fetch", url=URL).send("GET", URL, {}, None, 5)  # type: ignore[arg-type]

    with pytest.raises(MCPConnectionError, match="unreadable reply to a body read"):
        async for _ in response.chunks():
            pass
    assert len(http.aborted) == 1  # the request is released, not left open


def cors_for_2025_only(then: Handler) -> Handler:
    """A server whose CORS headers allow only the 2025 request headers: the browser blocks
    any request that carries Mcp-Method, Mcp-Name or Mcp-Param-*."""

    def handler(request: dict[str, Any]) -> Answer | Failure:
        names = {name.lower() for name in request["headers"]}
        if request["mode"] == "fetch" and any(
            n.startswith(("mcp-method", "mcp-name", "mcp-param")) for n in names
        ):
            return ("blocked", "The browser blocked the request or could not connect.")
        return then(request)

    return handler


PROBE_HEADERS = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
LEGACY_REFUSAL = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request"}}'
MODERN_REFUSAL = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"Header mismatch"}}'


async def test_a_blocked_probe_goes_again_without_2026_headers_and_a_2025_refusal_passes() -> None:
    http = FakeHttp(cors_for_2025_only(lambda request: Answer(400, {}, [LEGACY_REFUSAL])))
    transport = BrowserTransport(http, "fetch", url=URL, server="calc")

    response = await transport.send("POST", URL, {**PROBE_HEADERS, "Accept": "x"}, b"{}", 3)

    assert response.status == 400
    assert b"".join([c async for c in response.chunks()]) == LEGACY_REFUSAL
    first, again = http.requests
    assert "Mcp-Method" in first["headers"]
    assert again["headers"] == {"MCP-Protocol-Version": "2026-07-28", "Accept": "x"}


async def test_a_2026_server_behind_2025_cors_headers_is_named_as_such() -> None:
    http = FakeHttp(cors_for_2025_only(lambda request: Answer(400, {}, [MODERN_REFUSAL])))
    transport = BrowserTransport(http, "fetch", url=URL, server="calc")

    with pytest.raises(MCPConnectionError, match="do not let the page send the request headers"):
        await transport.send("POST", URL, PROBE_HEADERS, b"{}", 3)


async def test_only_the_probe_is_sent_again_and_a_second_block_keeps_the_first_error() -> None:
    down = FakeHttp(lambda request: ("blocked", "The browser blocked the request."))
    with pytest.raises(MCPConnectionError, match="no CORS headers"):
        await BrowserTransport(down, "fetch", url=URL, server="calc").send(
            "POST", URL, PROBE_HEADERS, b"{}", 3
        )
    assert len(down.requests) == 2  # the probe, once more without the 2026 headers

    other = FakeHttp(lambda request: ("blocked", "The browser blocked the request."))
    call = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}
    with pytest.raises(MCPConnectionError, match="no CORS headers"):
        await BrowserTransport(other, "fetch", url=URL, server="calc").send(
            "POST", URL, call, b"{}", 3
        )
    assert len(other.requests) == 1
