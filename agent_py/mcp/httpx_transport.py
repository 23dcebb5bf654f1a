"""The CPython transport: HTTP through httpx.

Imported only when a CPython program asks for the ``http`` transport; the Pyodide build
of agent_py never imports this module (httpx means sockets and, for some backends,
threads).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from urllib.parse import urlsplit

import httpx

from agent_py.mcp.errors import MCPConfigError, MCPConnectionError, MCPTimeoutError
from agent_py.mcp.transport import HTTPResponse, HTTPTransport


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class _HttpxResponse(HTTPResponse):
    def __init__(self, response: httpx.Response, url: str) -> None:
        self.status = response.status_code
        self.headers = {name.lower(): value for name, value in response.headers.items()}
        self._response = response
        self._url = url

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_bytes():
                yield chunk
        except httpx.TransportError as error:
            raise MCPConnectionError(
                f"The connection to {_origin(self._url)} broke while reading the answer "
                f"({type(error).__name__})."
            ) from error

    async def aclose(self) -> None:
        await self._response.aclose()


class HttpxTransport(HTTPTransport):
    """One httpx client (one connection pool) per MCP server."""

    def __init__(self, *, verify: bool = True) -> None:
        # Time limits come from the caller per request; the body of an SSE answer may
        # legitimately stay open for as long as a tool runs, so there is no read timeout.
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(None), follow_redirects=False, verify=verify
        )

    async def send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout_s: float | None,
    ) -> HTTPResponse:
        try:
            request = self._client.build_request(method, url, headers=dict(headers), content=body)
        except httpx.InvalidURL as error:
            raise MCPConfigError(f"The URL {url!r} is malformed ({error}).") from error
        try:
            async with asyncio.timeout(timeout_s):
                response = await self._client.send(request, stream=True)
        except TimeoutError as error:
            raise MCPTimeoutError(
                f"{_origin(url)} did not answer within {timeout_s:g} s."
            ) from error
        except httpx.UnsupportedProtocol as error:
            raise MCPConnectionError(
                f"Cannot reach {url}: only http:// and https:// URLs are supported."
            ) from error
        except httpx.ConnectError as error:
            raise MCPConnectionError(
                f"Cannot reach {_origin(url)}: {str(error) or 'connection failed'}. "
                "Check the URL and that the server is running."
            ) from error
        except httpx.TransportError as error:
            raise MCPConnectionError(
                f"The connection to {_origin(url)} failed ({type(error).__name__}: {error})."
            ) from error
        return _HttpxResponse(response, url)

    async def aclose(self) -> None:
        await self._client.aclose()
