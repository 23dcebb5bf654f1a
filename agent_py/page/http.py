"""HTTP for the MCP client in the page: the worker's own fetch, or the bridge extension.

The agent worker registers a JavaScript object (``web/worker/http-port.js``, as the Pyodide
module ``agent_http``) whose methods take and return JSON strings, so no JS proxy outlives
a call. The JSON is typed here (:class:`BridgeRequest`, :class:`StartReply`,
:class:`ReadReply`):

``start(request_json)`` -> ``{"ok": true, "id", "status", "headers"}`` or ``{"ok": false,
"error": {"kind", "message"}}``
    ``request_json`` is ``{"id", "mode": "fetch" | "bridge", "method", "url", "headers",
    "body": base64 | null, "timeout_ms": int | null}``. It resolves once the status line
    and headers are in. Error kinds: ``blocked`` (fetch failed: the browser blocked it,
    CORS, or could not connect; fetch cannot tell which), ``network``, ``timeout``,
    ``no-bridge`` (the extension is not installed or not enabled for this page),
    ``bridge-silent`` (the extension answered nothing, not even at the request's limit) and
    ``refused`` (the extension's rules said no; the message says which and what to do).
``read(id)`` -> ``{"ok": true, "chunk": base64}``, ``{"ok": true, "done": true}`` or an error
    The body, chunk by chunk as it arrives (SSE answers stream).
``abort(id)``
    Stop the request, whatever state it is in; unknown ids are ignored.

Python chooses the ids, so a request can be aborted even while ``start`` is pending.
This module imports nothing from Pyodide, so it is tested in CPython with a stand-in.

Many servers written for the 2025 revisions let browsers send only those revisions' request
headers, so the browser blocks the 2026-07-28 probe (``server/discover``, with
``Mcp-Method``) before it leaves: :class:`BrowserTransport` sends a blocked probe once more
without the headers that mirror its body, and passes on a 2025 server's refusal of it, so
the client falls back to ``initialize`` through the page's own fetch.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Literal, Protocol, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ValidationError

from agent_py.mcp.errors import MCPConfigError, MCPConnectionError, MCPTimeoutError
from agent_py.mcp.host import MCPServerConfig, TransportFactory
from agent_py.mcp.stateless import MODERN_ERROR_CODES
from agent_py.mcp.transport import BufferedResponse, FallbackTransport, HTTPResponse, HTTPTransport
from agent_py.page.ports import Failure, Reply

BrowserMode = Literal["fetch", "bridge"]

INSTALL_HINT = (
    "Install the agent_py bridge extension (see README), add this page in its options, and "
    "allow it to reach {origin} when the extension asks."
)

_request_ids = itertools.count(1)

PROBE_METHOD = "server/discover"
"""The first request of a connection, in MCP 2026-07-28 (``Mcp-Method``)."""
_PROBE_ANSWER_BYTES = 64 * 1024


def _mirrors_body(header: str) -> bool:
    """A request header of MCP 2026-07-28 that mirrors the body (Mcp-Method, Mcp-Name,
    Mcp-Param-*): the 2025 revisions have none of them."""
    name = header.lower()
    return name in ("mcp-method", "mcp-name") or name.startswith("mcp-param-")


def _modern_refusal(body: bytes) -> bool:
    """Whether an error answer is a JSON-RPC error that only a 2026-07-28 server sends."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):  # not JSON, or not an object
        return False
    return isinstance(error, dict) and error.get("code") in MODERN_ERROR_CODES


class HttpBridge(Protocol):
    """The worker's JavaScript object (``web/worker/http-port.js``)."""

    def start(self, request_json: str) -> Awaitable[str]: ...
    def read(self, request_id: int) -> Awaitable[str]: ...
    def abort(self, request_id: int) -> object: ...


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


NETWORK_FAILURE = Failure(kind="network", message="the request failed")


class BridgeRequest(BaseModel):
    """What ``start`` is given (``web/worker/http-port.js`` reads the same names)."""

    id: int
    mode: BrowserMode
    method: str
    url: str
    headers: dict[str, str]
    body: str | None
    """base64, or None for no body."""
    timeout_ms: int | None


class StartReply(Reply):
    ok: bool = True
    status: int = 0
    headers: dict[str, str] = {}
    url: str | None = None
    """Where the answer came from, after the redirects the page's fetch followed (None: the
    extension's answer, or not known)."""
    error: Failure = NETWORK_FAILURE


class ReadReply(Reply):
    ok: bool = True
    chunk: str = ""
    """base64"""
    done: bool = False
    error: Failure = NETWORK_FAILURE


_Reply = TypeVar("_Reply", StartReply, ReadReply)


def _reply(raw: object, shape: type[_Reply], what: str) -> _Reply:
    try:
        return shape.model_validate_json(str(raw))
    except ValidationError:
        raise MCPConnectionError(
            f"The page's HTTP bridge sent an unreadable reply to {what}."
        ) from None


class BrowserResponse(HTTPResponse):
    """A response whose body the JavaScript side streams, one ``read`` per chunk."""

    def __init__(
        self, http: HttpBridge, request_id: int, status: int, headers: Mapping[str, str], url: str
    ) -> None:
        self.status = status
        self.headers = {str(name).lower(): str(value) for name, value in headers.items()}
        self.url = url
        """Where the answer came from (the request's URL unless the page's fetch said)."""
        self._http = http
        self._id = request_id
        self._url = url
        self._finished = False

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            while not self._finished:
                reply = _reply(await self._http.read(self._id), ReadReply, "a body read")
                if not reply.ok:
                    self._finished = True
                    raise MCPConnectionError(
                        f"The connection to {origin_of(self._url)} broke while reading the "
                        f"answer: {reply.error.message}"
                    )
                if reply.done:
                    self._finished = True
                    return
                try:
                    chunk = base64.b64decode(reply.chunk, validate=True)
                except binascii.Error as error:
                    raise MCPConnectionError(
                        "The page's HTTP bridge sent a body chunk that is not base64."
                    ) from error
                if chunk:
                    yield chunk
        finally:
            # Stopped early (enough read, cancelled, an error): release the request.
            await self.aclose()

    async def aclose(self) -> None:
        if not self._finished:
            self._finished = True
            self._http.abort(self._id)


class BrowserTransport(HTTPTransport):
    """One MCP server's requests through the page's fetch or through the bridge extension.

    ``server`` and ``url`` name the server in the messages users see. ``after_fetch`` marks
    the bridge of an ``auto`` server, which is only used once the page's own fetch was
    blocked: its "no extension" message then explains CORS.
    """

    def __init__(
        self,
        http: HttpBridge,
        mode: BrowserMode,
        *,
        url: str,
        server: str | None = None,
        after_fetch: bool = False,
        service: str = "MCP server",
    ) -> None:
        self._http = http
        self._mode = mode
        self._url = url
        self._server = server
        self._after_fetch = after_fetch
        self._service = service
        # What the page's settings call the choice of fetch or bridge for this server.
        self._setting = "transport" if service == "MCP server" else "connection"
        # Once the server has answered, a connection that fails is an outage (it stopped,
        # crashed or moved), not CORS or a missing extension: the message says so.
        self._answered = False

    async def send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout_s: float | None,
    ) -> HTTPResponse:
        request_id, reply = await self._start(method, url, headers, body, timeout_s)
        if not reply.ok:
            failure = self._failure(url, timeout_s, reply.error.kind, reply.error.message)
            probe = any(
                name.lower() == "mcp-method" and value == PROBE_METHOD
                for name, value in headers.items()
            )
            if reply.error.kind == "blocked" and self._mode == "fetch" and probe:
                return await self._probe_in_2025_headers(
                    method, url, headers, body, timeout_s, failure
                )
            raise failure
        self._answered = True
        return BrowserResponse(
            self._http, request_id, reply.status, reply.headers, reply.url or url
        )

    async def _start(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout_s: float | None,
    ) -> tuple[int, StartReply]:
        request_id = next(_request_ids)
        request = BridgeRequest(
            id=request_id,
            mode=self._mode,
            method=method,
            url=url,
            headers=dict(headers),
            body=base64.b64encode(body).decode("ascii") if body is not None else None,
            timeout_ms=None if timeout_s is None else max(1, round(timeout_s * 1000)),
        )
        try:
            raw = await self._http.start(request.model_dump_json())
        except BaseException:
            self._http.abort(request_id)  # cancelled while waiting for the headers
            raise
        return request_id, _reply(raw, StartReply, f"a request to {origin_of(url)}")

    async def _probe_in_2025_headers(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout_s: float | None,
        failure: MCPConnectionError | MCPTimeoutError,
    ) -> HTTPResponse:
        """The browser blocked the 2026-07-28 probe: the server is down, sends no CORS
        headers, or lets browsers send only the request headers of the 2025 revisions (as
        most servers written for them do). Sent once more without the headers that mirror
        its body, a 2025 server's refusal of it is passed on, and the client goes on to
        ``initialize``, which needs none of them. Any other answer comes from a 2026 server
        whose CORS headers leave them out."""
        plain = {name: value for name, value in headers.items() if not _mirrors_body(name)}
        request_id, reply = await self._start(method, url, plain, body, timeout_s)
        if not reply.ok:
            raise failure
        self._answered = True
        response = BrowserResponse(self._http, request_id, reply.status, reply.headers, url)
        answer, _ = await response.read(_PROBE_ANSWER_BYTES)
        if 400 <= response.status < 500 and not _modern_refusal(answer):
            return BufferedResponse(response.status, response.headers, answer)
        raise MCPConnectionError(
            f"{self._label()} answers the page, but its CORS headers do not let the page send "
            "the request headers of MCP 2026-07-28 (Mcp-Method, Mcp-Name, Mcp-Param-*); the "
            "server should list them in Access-Control-Allow-Headers. Until it does, choose "
            f"the 'auto' or 'bridge' {self._setting}. "
            + INSTALL_HINT.format(origin=origin_of(self._url))
        )

    def _label(self) -> str:
        if self._server:
            return f"The {self._service} {self._server!r} ({self._url})"
        return f"The {self._service} at {self._url}"

    def _failure(
        self, url: str, timeout_s: float | None, kind: str, message: str
    ) -> MCPConnectionError | MCPTimeoutError:
        origin = origin_of(url)
        hint = INSTALL_HINT.format(origin=origin_of(self._url))
        if kind == "timeout":
            limit = f" within {timeout_s:g} s" if timeout_s is not None else ""
            return MCPTimeoutError(f"{origin} did not answer{limit}.")
        if self._answered and kind == "blocked":
            return MCPConnectionError(
                f"{self._label()} stopped answering: it answered earlier, and now the browser "
                "cannot connect to it (it stopped, crashed or was restarted elsewhere). Check "
                "that it is still running at that URL."
            )
        if kind == "blocked":
            if self._mode == "fetch":
                return MCPConnectionError(
                    f"{self._label()} cannot be reached from the page: the browser blocked the "
                    "request (the server sends no CORS headers) or could not connect (the server "
                    "is not running). For a server without CORS headers choose the 'auto' or "
                    f"'bridge' {self._setting}. {hint}"
                )
            return MCPConnectionError(f"{self._label()} cannot be reached: {message}")
        if kind == "no-bridge":
            if self._after_fetch:
                return MCPConnectionError(
                    f"{self._label()} does not allow browser requests (no CORS headers), or it "
                    f"is not running. {hint}"
                )
            return MCPConnectionError(
                f"{self._label()} is set to use the bridge extension, which is not installed "
                f"or not enabled in this browser. {hint}"
            )
        if kind == "refused":
            return MCPConnectionError(
                f"The agent_py bridge extension refused the request: {message}"
            )
        return MCPConnectionError(f"{self._label()} cannot be reached: {message}")


def browser_transport(
    http: HttpBridge, mode: Literal["auto", "fetch", "bridge"], *, url: str, service: str
) -> HTTPTransport:
    """The page's transport to one server: ``fetch``, ``bridge``, or ``auto`` (fetch, then
    the extension when the browser blocks fetch)."""
    if mode == "auto":
        return FallbackTransport(
            BrowserTransport(http, "fetch", url=url, service=service),
            BrowserTransport(http, "bridge", url=url, service=service, after_fetch=True),
        )
    return BrowserTransport(http, mode, url=url, service=service)


def browser_transport_factory(http: HttpBridge) -> TransportFactory:
    """The page's transports for :class:`~agent_py.mcp.host.MCPClientHost`:

    ``fetch``: the worker's fetch (the server must send CORS headers that allow the MCP
    request headers and, for a 2025 server, expose ``Mcp-Session-Id``); ``bridge``: the
    extension; ``auto``: fetch, then the extension when the browser blocks fetch; ``http``:
    not available in the page."""

    def factory(config: MCPServerConfig) -> HTTPTransport:
        if config.transport == "http":
            raise MCPConfigError(
                "The 'http' transport needs CPython; in the page choose 'auto', 'fetch' or "
                "'bridge'."
            )
        if config.transport == "auto":
            return FallbackTransport(
                BrowserTransport(http, "fetch", url=config.url, server=config.name),
                BrowserTransport(
                    http, "bridge", url=config.url, server=config.name, after_fetch=True
                ),
            )
        return BrowserTransport(http, config.transport, url=config.url, server=config.name)

    return factory
