"""``fetch_page`` in the page (:mod:`agent_py.tools.fetch_page`): the request through the
worker's own fetch when the page's server allows it (CORS), otherwise through the bridge
extension, which asks the user once for that page's origin (allow once, always, or deny) as it
does for MCP servers (``extension/README.md``); the readable text made on the UI thread
(``web/ui/page-reader.js``, through the bridge's ``readPage``)."""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import Protocol

from pydantic import BaseModel, ValidationError

from agent_py.core.tool import ToolError
from agent_py.mcp.errors import MCPConnectionError, MCPTimeoutError
from agent_py.page.http import HttpBridge, browser_transport
from agent_py.tools.fetch_page import FetchedPage, ReadablePage

ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5"


class PageBridge(Protocol):
    """The worker bridge's methods for pages (JavaScript's names)."""

    def readPage(self, html: str, url: str) -> Awaitable[str]: ...
    def online(self) -> str: ...


class _PageText(BaseModel):
    ok: bool
    title: str = ""
    text: str = ""
    error: str = ""


class BrowserPages:
    """A :class:`~agent_py.tools.fetch_page.PageFetcher` over the page's HTTP port and bridge."""

    def __init__(self, bridge: PageBridge, http: HttpBridge) -> None:
        self._bridge = bridge
        self._http = http

    def online(self) -> bool:
        try:
            return bool(json.loads(self._bridge.online()).get("online", True))
        except (TypeError, ValueError, AttributeError):
            return True  # not known: the fetch says what happens

    async def fetch(self, url: str, *, timeout_s: float, max_bytes: int) -> FetchedPage:
        transport = browser_transport(self._http, "auto", url=url, service="web page")
        try:
            response = await transport.send("GET", url, {"Accept": ACCEPT}, None, timeout_s)
            body, cut = await response.read(max_bytes)
        except (MCPConnectionError, MCPTimeoutError) as error:
            raise ToolError(f"{url} could not be fetched: {error}") from None
        finally:
            await transport.aclose()
        final = getattr(response, "url", None) or url
        kind = response.headers.get("content-type", "")
        return FetchedPage(final, response.status, kind, body, cut)

    async def read(self, html: str, url: str) -> ReadablePage:
        try:
            reply = _PageText.model_validate_json(await self._bridge.readPage(html, url))
        except (TypeError, ValueError, ValidationError):
            raise ToolError("the page reader sent an unreadable reply") from None
        if not reply.ok:
            raise ToolError(f"{url}: {reply.error}")
        return ReadablePage(reply.title, reply.text)
