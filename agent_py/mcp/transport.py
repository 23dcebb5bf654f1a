"""How bytes reach an MCP server: one small async interface, several implementations.

The MCP client (:mod:`agent_py.mcp.client`) speaks JSON-RPC; the Streamable HTTP binding
(:mod:`agent_py.mcp.streamable_http`) turns that into HTTP requests; an
:class:`HTTPTransport` performs them. Implementations:

- ``http``: :class:`agent_py.mcp.httpx_transport.HttpxTransport`, CPython only (httpx;
  :func:`agent_py.mcp.local.cpython_transport` imports it on first use).
  Imported lazily, so the Pyodide path never imports httpx, sockets or threads.
- ``fetch``: the page's ``fetch()``; works only for servers that send CORS headers.
- ``bridge``: the companion extension performs the request for the page.

The browser transports are Python classes that call JavaScript. To write one, subclass
:class:`HTTPTransport` and implement :meth:`HTTPTransport.send`:

``send(method, url, headers, body, timeout_s) -> HTTPResponse``
    ``method`` is ``"POST"``, ``"GET"`` or ``"DELETE"``; ``headers`` maps header names to
    values (send them as given); ``body`` is the request body or None; ``timeout_s`` limits
    connecting plus receiving the status line and headers (None: no limit of its own).
    Return as soon as the headers are in, without reading the body. Raise
    :class:`~agent_py.mcp.errors.MCPConnectionError` for every network-level failure
    (refused, DNS, TLS, CORS: fetch reports them all as a TypeError) and
    :class:`~agent_py.mcp.errors.MCPTimeoutError` when ``timeout_s`` runs out. Any HTTP
    status is a normal return, never an exception. When the awaiting task is cancelled,
    abort the request (an AbortController in JavaScript).

:class:`HTTPResponse`
    ``status`` (int), ``headers`` (names in lower case), ``chunks()`` an async iterator of
    body bytes *as they arrive* (an SSE answer streams progress notifications before the
    result, so do not buffer the whole body when the platform can stream), and
    ``aclose()``, which stops reading and releases the connection (cancel the
    ReadableStream reader). ``chunks()`` raises MCPConnectionError if the connection breaks
    mid-body. A transport that can only deliver whole bodies (a bridge that posts one
    message per response) may return :class:`BufferedResponse`.

Keep the JavaScript side simple by passing strings across the boundary (JSON for the
headers, text or base64 for bodies): proxies of JS objects need explicit lifetimes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping

from agent_py.mcp.errors import MCPConnectionError


class HTTPResponse(ABC):
    """An HTTP response whose body is read incrementally."""

    status: int
    headers: Mapping[str, str]
    """Header names in lower case."""

    @abstractmethod
    def chunks(self) -> AsyncIterator[bytes]:
        """The body, chunk by chunk, as it arrives. Iterate at most once."""

    @abstractmethod
    async def aclose(self) -> None:
        """Stop reading the body and release the connection. Safe to call twice."""

    async def read(self, limit: int) -> tuple[bytes, bool]:
        """The body up to ``limit`` bytes, and whether it was longer (then it is cut)."""
        parts: list[bytes] = []
        size = 0
        try:
            async for chunk in self.chunks():
                parts.append(chunk)
                size += len(chunk)
                if size > limit:
                    return b"".join(parts)[:limit], True
        finally:
            await self.aclose()
        return b"".join(parts), False


class BufferedResponse(HTTPResponse):
    """A response whose whole body is already in memory."""

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status = status
        self.headers = {name.lower(): value for name, value in headers.items()}
        self._body = body

    async def chunks(self) -> AsyncIterator[bytes]:
        if self._body:
            yield self._body

    async def aclose(self) -> None:
        return None


class HTTPTransport(ABC):
    """Performs HTTP requests for one MCP server (see the module docstring)."""

    @abstractmethod
    async def send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout_s: float | None,
    ) -> HTTPResponse: ...

    async def aclose(self) -> None:
        """Release what the transport holds (connection pools)."""
        return None


class FallbackTransport(HTTPTransport):
    """Tries ``first``; if it cannot connect at all, uses ``second`` from then on.

    This is the ``auto`` transport of the page: the page's own fetch first, the extension
    bridge when fetch is blocked (a server without CORS headers looks like a network error
    to fetch). Only MCPConnectionError from ``send`` switches, and only before ``first``
    has ever answered: an HTTP status is an answer, and a later network error is an outage
    that the other transport would not fix.
    """

    def __init__(self, first: HTTPTransport, second: HTTPTransport) -> None:
        self._first: HTTPTransport | None = first
        self._second = second
        self._first_answered = False

    @property
    def using_fallback(self) -> bool:
        return self._first is None

    async def send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout_s: float | None,
    ) -> HTTPResponse:
        if self._first is not None:
            try:
                response = await self._first.send(method, url, headers, body, timeout_s)
            except MCPConnectionError:
                if self._first_answered:
                    raise
                first, self._first = self._first, None
                await first.aclose()
            else:
                self._first_answered = True
                return response
        return await self._second.send(method, url, headers, body, timeout_s)

    async def aclose(self) -> None:
        if self._first is not None:
            await self._first.aclose()
        await self._second.aclose()
