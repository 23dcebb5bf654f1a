"""The page's MCP servers: their settings, their sign-ins, and their tools for the agent.

The MCP package (and its wire types, the largest import of all) is imported only when the
first server is configured, so a page without servers starts without it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agent_py.core.tool import ToolBase

if TYPE_CHECKING:
    from agent_py.mcp.auth import Authorizer
    from agent_py.mcp.host import MCPClientHost, MCPServerConfig, MCPServerStatus
    from agent_py.mcp.transport import HTTPTransport
    from agent_py.page.http import HttpBridge
    from agent_py.page.user import PageTokenStore, UserBridge


class PageServers:
    """The MCP servers of one page session. ``report`` gets each server's state as JSON as it
    changes (the worker's ``mcpStatus``); ``http`` and ``user`` are the worker's ports."""

    def __init__(
        self,
        report: Callable[[str], object],
        *,
        http: HttpBridge | None = None,
        user: UserBridge | None = None,
    ) -> None:
        self._report = report
        self._servers: dict[str, MCPServerConfig] = {}
        self._http = http
        self._user = user
        self._auth_records: dict[str, Any] = {}  # kept until the MCP host exists
        self._auth_store: PageTokenStore | None = None
        self._host: MCPClientHost | None = None  # made when the first server is configured
        self._configuring = 0
        self._settled = asyncio.Event()
        self._settled.set()

    def _mcp(self) -> MCPClientHost:
        """The MCP host, made (and the MCP package imported) on first use."""
        if self._host is None:
            from agent_py.mcp.host import MCPClientHost
            from agent_py.page.http import browser_transport_factory
            from agent_py.page.user import PageTokenStore, page_elicitation

            user = self._user
            if user is not None:
                self._auth_store = PageTokenStore(user)
                self._auth_store.replace(self._auth_records)
            self._host = MCPClientHost(
                transport_factory=(
                    browser_transport_factory(self._http) if self._http else _no_network
                ),
                on_status=self._server_status,
                on_elicit=page_elicitation(user) if user is not None else None,
                authorizer_factory=self._authorizer if user is not None else None,
            )
        return self._host

    async def configure(self, servers_json: str) -> str:
        """Make the MCP servers those of ``servers_json`` (the panel's list): connect new and
        changed ones concurrently, drop removed ones, leave unchanged ones connected. One
        server's failure never stops the others. Returns every server's status as JSON;
        each change is also reported through ``mcpStatus`` as it happens."""
        self._configuring += 1
        self._settled.clear()
        try:
            return await self._configure(servers_json)
        finally:
            self._configuring -= 1
            if not self._configuring:
                self._settled.set()

    async def settled(self, timeout_s: float) -> bool:
        """Wait until no list of servers is being connected, at most ``timeout_s``; whether
        that came. A run sent while the user's saved servers connect (right after the page
        opens, or after an edit) waits for their tools rather than plan without them."""
        try:
            await asyncio.wait_for(self._settled.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def _configure(self, servers_json: str) -> str:
        items = json.loads(servers_json)
        if not items and self._host is None:
            return "[]"  # no servers, none before: the MCP package stays unimported
        from agent_py.mcp.host import MCPServerConfig, MCPServerStatus
        from agent_py.mcp.results import describe_validation_error

        wanted: dict[str, MCPServerConfig] = {}
        invalid: list[MCPServerStatus] = []
        for item in items if isinstance(items, list) else []:
            try:
                config = MCPServerConfig.model_validate(item)
            except ValidationError as error:
                name = str(item.get("name") or "?") if isinstance(item, dict) else "?"
                url = str(item.get("url") or "") if isinstance(item, dict) else ""
                status = MCPServerStatus(
                    name=name,
                    url=url,
                    state="error",
                    error=f"These settings cannot be used: {describe_validation_error(error)}.",
                )
                invalid.append(status)
                self._server_status(status)
                continue
            wanted[config.name] = config
        host = self._mcp()
        for name in [n for n in self._servers if n not in wanted]:
            del self._servers[name]
            await host.remove_server(name)
        changed = [c for name, c in wanted.items() if self._servers.get(name) != c]
        self._servers.update({c.name: c for c in changed})
        await asyncio.gather(*(host.add_server(c) for c in changed))
        return self._statuses_json([*host.statuses(), *invalid])

    def set_auth_records(self, records_json: str) -> None:
        """The OAuth registrations and tokens the page kept (``{server url: record}``)."""
        records = json.loads(records_json)
        if isinstance(records, dict):
            self._auth_records = records
            if self._auth_store is not None:
                self._auth_store.replace(records)

    async def forget_sign_in(self, name: str) -> str:
        """Forget a server's OAuth tokens and registration, and connect it again."""
        config = self._servers.get(name)
        if config is not None and self._auth_store is not None:
            self._auth_store.forget(config.url)
            await self._mcp().reconnect(name)
        return self.statuses()

    def _authorizer(self, config: MCPServerConfig, transport: HTTPTransport) -> Authorizer | None:
        if config.token is not None or self._user is None or self._auth_store is None:
            return None  # a configured token is used as it is
        from agent_py.mcp.oauth import OAuthAuthorizer
        from agent_py.mcp.oauth_settings import OAuthSettings
        from agent_py.page.user import PopupFrontEnd

        front_end = PopupFrontEnd(
            self._user, server=config.name, redirect_uri=str(self._user.callbackUrl)
        )
        return OAuthAuthorizer(
            config.url,
            transport,
            settings=OAuthSettings(client_name="agent_py (browser page)"),
            store=self._auth_store,
            front_end=front_end,
        )

    async def reconnect(self, name: str) -> str:
        """Connect a server again (it restarted, or the extension was just set up)."""
        if name not in self._servers:
            return self.statuses()
        await self._mcp().reconnect(name)
        return self.statuses()

    def statuses(self) -> str:
        return self._statuses_json(self._host.statuses() if self._host else [])

    def tools(self) -> list[ToolBase]:
        return list(self._host.tools()) if self._host else []

    def _status_data(self, status: MCPServerStatus) -> dict[str, Any]:
        tools = [tool.name for tool in self._mcp().tools() if tool.server == status.name]
        signed_in = self._auth_store is not None and self._auth_store.has(status.url)
        return {**status.model_dump(mode="json"), "tools": tools, "signed_in": signed_in}

    def _statuses_json(self, statuses: list[MCPServerStatus]) -> str:
        return json.dumps([self._status_data(status) for status in statuses])

    def _server_status(self, status: MCPServerStatus) -> None:
        self._report(json.dumps(self._status_data(status)))

    async def close(self) -> None:
        if self._host is not None:
            await self._host.close()


def _no_network(config: MCPServerConfig) -> HTTPTransport:
    from agent_py.mcp.errors import MCPConfigError

    raise MCPConfigError(
        f"The MCP server {config.name!r} cannot be reached: this page session has no HTTP bridge."
    )
