"""How OAuth talks to authorization servers and identity providers: one HTTP request at a
time over our own :class:`~agent_py.mcp.transport.HTTPTransport` (http and https only, the
answer bounded to :data:`METADATA_LIMIT`), and the small formats their messages share (a
JSON object reply, its error detail, space-separated scopes)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from agent_py.mcp.errors import MCPAuthorizationError
from agent_py.mcp.transport import HTTPTransport

METADATA_LIMIT = 256 * 1024


class AuthorizationHTTP:
    """The HTTP requests of the OAuth flow, on the MCP server's transport."""

    def __init__(self, transport: HTTPTransport, timeout_s: float) -> None:
        self._transport = transport
        self._timeout_s = timeout_s

    async def send(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes | None
    ) -> tuple[int, bytes]:
        scheme = urlsplit(url).scheme
        if scheme not in ("http", "https"):
            raise MCPAuthorizationError(f"Refusing an authorization URL that is not http(s): {url}")
        response = await self._transport.send(method, url, headers, body, self._timeout_s)
        data, too_long = await response.read(METADATA_LIMIT)
        if too_long:
            raise MCPAuthorizationError(f"{url} answered with more than {METADATA_LIMIT} bytes.")
        return response.status, data


def json_object(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def said(reply: Mapping[str, Any]) -> str:
    detail = reply.get("error_description") or reply.get("error")
    return f": {detail}" if isinstance(detail, str) and detail else ""


def scopes(text: str | None) -> list[str]:
    return text.split() if text else []


def join_scopes(*groups: list[str]) -> str | None:
    merged: list[str] = []
    for group in groups:
        merged.extend(scope for scope in group if scope not in merged)
    return " ".join(merged) or None
