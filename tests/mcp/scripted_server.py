"""A tiny HTTP server on 127.0.0.1 whose answers each test scripts.

For what a real MCP server will not do on demand: garbage bodies, cut-off streams,
expired sessions, a choice of JSON or SSE answers. It runs in the test's event loop
(asyncio streams, stdlib only), answers every request with ``Connection: close`` and
records the requests it received.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

PROTOCOL = "2025-11-25"


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    """Lower-case names."""
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def rpc_method(self) -> str | None:
        if self.method != "POST":
            return None
        message = self.json()
        return message.get("method") if isinstance(message, dict) else None


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes | float | asyncio.Event] = field(default_factory=list)
    """Written in order; a float is a pause in seconds, an event a pause until it is set.
    The connection closes after."""
    content_length: int | None = None
    """Declared length; None sends none (the body ends when the connection closes)."""


Handler = Callable[[Request], Reply | Awaitable[Reply]]


def json_reply(value: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    body = json.dumps(value).encode()
    return Reply(
        status,
        {"Content-Type": "application/json", **(headers or {})},
        [body],
        content_length=len(body),
    )


def sse_event(message: Any = None, *, event_id: str | None = None, raw: str | None = None) -> bytes:
    """One ``message`` event carrying ``message`` as JSON (or ``raw`` text as it is)."""
    text = ""
    if event_id is not None:
        text += f"id: {event_id}\n"
    if raw is not None:
        text += raw
    else:
        text += f"event: message\ndata: {json.dumps(message)}\n\n"
    return text.encode()


def sse_reply(
    *chunks: bytes | float | asyncio.Event, headers: dict[str, str] | None = None
) -> Reply:
    return Reply(200, {"Content-Type": "text/event-stream", **(headers or {})}, list(chunks))


def result(request: Request, value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request.json()["id"], "result": value}


def initialize_result(version: str = PROTOCOL) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": True}},
        "serverInfo": {"name": "scripted", "version": "1"},
    }


class MCPScript:
    """A minimal MCP server of the 2025 era: it answers initialize (with a session id),
    notifications and DELETE, refuses a modern client's ``server/discover`` as the
    TypeScript SDK's legacy transport does (400, no session), and hands every other request
    to ``on_request``. The GET that opens the
    standalone event stream (one without ``Last-Event-ID``) goes to ``on_stream``; without
    one it is answered 405, as by a server that offers no such stream."""

    def __init__(
        self,
        on_request: Callable[[Request], Reply | Awaitable[Reply]] | None = None,
        *,
        version: str = PROTOCOL,
        session_ids: list[str] | None = None,
        on_stream: Callable[[Request], Reply | Awaitable[Reply]] | None = None,
    ) -> None:
        self.on_request = on_request
        self.on_stream = on_stream
        self.version = version
        self._session_ids = list(
            ["session-1", "session-2", "session-3"] if session_ids is None else session_ids
        )

    async def __call__(self, request: Request) -> Reply:
        if request.method == "DELETE":
            return Reply(200)
        if request.method == "GET" and "last-event-id" not in request.headers:
            if self.on_stream is None:
                return Reply(405)
            reply = self.on_stream(request)
            return await reply if inspect.isawaitable(reply) else reply
        message = request.json() if request.method == "POST" else None
        if isinstance(message, dict) and "id" not in message:
            return Reply(202)  # a notification or a response
        if request.rpc_method == "server/discover":
            return json_reply(
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": -32000, "message": "Bad Request: Server not initialized"},
                },
                status=400,
            )
        if request.rpc_method == "initialize":
            session = {"Mcp-Session-Id": self._session_ids.pop(0)} if self._session_ids else {}
            return json_reply(result(request, initialize_result(self.version)), headers=session)
        if self.on_request is None:
            return json_reply(result(request, {}))
        reply = self.on_request(request)
        return await reply if inspect.isawaitable(reply) else reply


class ScriptedServer:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/mcp"

    def rpc(self, method: str) -> list[Request]:
        """The POSTs that carried a JSON-RPC message with this method."""
        return [r for r in self.requests if r.rpc_method == method]

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await self._read_request(reader)
            self.requests.append(request)
            reply = self.handler(request)
            if inspect.isawaitable(reply):
                reply = await reply
            await self._write_reply(writer, reply)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    @staticmethod
    async def _read_request(reader: asyncio.StreamReader) -> Request:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        body = await reader.readexactly(length) if length else b""
        return Request(method, path, headers, body)

    @staticmethod
    async def _write_reply(writer: asyncio.StreamWriter, reply: Reply) -> None:
        head = [f"HTTP/1.1 {reply.status} Scripted", "Connection: close"]
        head += [f"{name}: {value}" for name, value in reply.headers.items()]
        if reply.content_length is not None:
            head.append(f"Content-Length: {reply.content_length}")
        elif not reply.chunks:
            head.append("Content-Length: 0")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        for chunk in reply.chunks:
            if isinstance(chunk, float):
                await asyncio.sleep(chunk)
            elif isinstance(chunk, asyncio.Event):
                await chunk.wait()
            else:
                writer.write(chunk)
                await writer.drain()
