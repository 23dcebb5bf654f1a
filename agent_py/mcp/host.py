"""Several MCP servers behind one set of agent tools.

:class:`MCPClientHost` keeps one :class:`~agent_py.mcp.client.MCPClient` per configured
server, reports each server's state as :class:`MCPServerStatus`, and offers every tool
of every connected server as an :class:`MCPTool` named ``<server>__<tool>``, so two
servers can both have ``search``. A server that fails is reported as such; the others
carry on.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from mcp_types import Tool
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_py.core.tool import ToolBase, ToolContext, ToolError, ToolResult
from agent_py.mcp.auth import Authorizer
from agent_py.mcp.client import DEFAULT_REQUEST_TIMEOUT_S, DEFAULT_TOOL_TIMEOUT_S, MCPClient
from agent_py.mcp.elicitation import ElicitationHandler
from agent_py.mcp.errors import MCPConfigError, MCPError
from agent_py.mcp.local import cpython_transport
from agent_py.mcp.results import content_text, result_data
from agent_py.mcp.transport import HTTPTransport

ServerTransport = Literal["auto", "fetch", "bridge", "http"]
"""``fetch``: the page's fetch (needs CORS headers); ``bridge``: the extension performs the
request; ``auto``: fetch, then the bridge if fetch cannot connect; ``http``: httpx, CPython
only."""
ServerState = Literal["disabled", "connecting", "connected", "error"]

MAX_TOOL_NAME = 64  # OpenAI function names: [A-Za-z0-9_-]{1,64}
TIMEOUT_GRACE_S = 2.0
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


class MCPServerConfig(BaseModel):
    """One server in the settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_-]+$")
    """Prefix of the server's tool names: letters, digits, ``_`` and ``-``; no ``__``."""
    url: str
    token: str | None = Field(default=None, repr=False)
    """Sent as ``Authorization: Bearer <token>``."""
    transport: ServerTransport = "auto"
    enabled: bool = True
    timeout_s: float = Field(default=DEFAULT_TOOL_TIMEOUT_S, gt=0)
    """How long one tool call may take."""

    @field_validator("name")
    @classmethod
    def _no_separator(cls, name: str) -> str:
        if "__" in name:
            raise ValueError("a server name cannot contain '__' (it separates server and tool)")
        return name

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        url = url.strip()
        parts = urlsplit(url)  # ValueError for a malformed IPv6 host
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the server URL must start with http:// or https://")
        parts.port  # noqa: B018 -- ValueError for a port out of range
        return url

    @field_validator("token")
    @classmethod
    def _blank_token_is_none(cls, token: str | None) -> str | None:
        if token is None or not token.strip():
            return None
        return token.strip()


class MCPServerStatus(BaseModel):
    """What the settings view shows for a server."""

    name: str
    url: str
    state: ServerState
    error: str | None = None
    """Why the server is in the ``error`` state, as a sentence for the user."""
    tool_count: int = 0
    protocol_version: str | None = None
    """The MCP revision the server is spoken to in."""
    server_name: str | None = None
    """The name the server gives itself."""
    left_out: list[str] = Field(default_factory=list)
    """Tools the agent is not given, each as ``name: why``."""


TransportFactory = Callable[[MCPServerConfig], HTTPTransport]
AuthorizerFactory = Callable[[MCPServerConfig, HTTPTransport], Authorizer | None]
"""The OAuth authorizer for a server (None: the configured token only)."""
StatusCallback = Callable[[MCPServerStatus], None]


def default_transport_factory(config: MCPServerConfig) -> HTTPTransport:
    """CPython's choice: httpx for ``http`` and ``auto``. The page passes its own factory,
    which builds the fetch and bridge transports."""
    if config.transport in ("fetch", "bridge"):
        raise MCPConfigError(
            f"The '{config.transport}' transport exists only in the browser page; "
            "use 'http' or 'auto' here."
        )
    return cpython_transport()


TASKS_REQUIRED_NOTE = "needs task-augmented calls, which this client does not make"


def unusable_reason(tool: Tool) -> str | None:
    """Why the agent cannot call a tool, or None. A tool that requires task-augmented
    execution fails every plain call."""
    execution = tool.execution
    if execution is not None and execution.task_support == "required":
        return TASKS_REQUIRED_NOTE
    return None


def namespaced_tool_name(server: str, tool: str) -> str:
    """``<server>__<tool>``, safe as an OpenAI function name. A tool name that had to be
    changed (other characters, too long) gets a short hash of the original, so two tools
    that differ only in replaced characters stay apart."""
    safe = _UNSAFE_NAME_CHARS.sub("_", tool) or "tool"
    name = f"{server}__{safe}"
    if safe == tool and len(name) <= MAX_TOOL_NAME:
        return name
    digest = hashlib.sha1(tool.encode("utf-8")).hexdigest()[:6]
    room = MAX_TOOL_NAME - len(server) - len("__") - len(digest) - 1
    return f"{server}__{safe[:room]}_{digest}"


class MCPTool(ToolBase):
    """One tool of one MCP server, as the agent sees it."""

    remote = True

    def __init__(self, *, server: str, tool: Tool, client: MCPClient, call_timeout_s: float):
        self.name = namespaced_tool_name(server, tool.name)
        self.description = tool.description or tool.title or f"The {tool.name} tool of {server}."
        self.input_schema = tool.input_schema
        # Our own limit fires first, so the server gets notifications/cancelled and the
        # user a clear message; the agent's limit stays a little above it.
        self.timeout_s = call_timeout_s + TIMEOUT_GRACE_S
        self.server = server
        self.tool = tool
        self._client = client
        self._call_timeout_s = call_timeout_s

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        meta = {"server": self.server, "tool": self.tool.name}

        def on_progress(progress: float, total: float | None, message: str | None) -> None:
            text = message or (f"{progress:g} of {total:g}" if total else f"{progress:g}")
            ctx.report_progress(text, {**meta, "progress": progress, "total": total})

        try:
            result = await self._client.call_tool(
                self.tool.name, arguments, timeout_s=self._call_timeout_s, on_progress=on_progress
            )
        except MCPError as error:
            raise ToolError(str(error)) from error
        data = result_data(result)
        text = content_text(result.content)
        if not text and result.structured_content is not None:
            text = json.dumps(result.structured_content, ensure_ascii=False)
        return ToolResult(content=text, data=data, is_error=result.is_error, meta=meta)


@dataclass(eq=False)
class _Server:
    config: MCPServerConfig
    status: MCPServerStatus
    client: MCPClient | None = None
    tools: list[MCPTool] = field(default_factory=list)


class MCPClientHost:
    """The configured MCP servers and their tools."""

    def __init__(
        self,
        *,
        transport_factory: TransportFactory = default_transport_factory,
        on_status: StatusCallback | None = None,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        on_elicit: ElicitationHandler | None = None,
        authorizer_factory: AuthorizerFactory | None = None,
    ) -> None:
        self._transport_factory = transport_factory
        self._on_elicit = on_elicit
        self._authorizer_factory = authorizer_factory
        self._on_status = on_status
        self._request_timeout_s = request_timeout_s
        self._servers: dict[str, _Server] = {}

    async def add_server(self, config: MCPServerConfig) -> MCPServerStatus:
        """Add (or replace) a server and, if enabled, connect and list its tools.

        Never raises for a server's trouble: the returned status says what happened."""
        if config.name in self._servers:
            await self.remove_server(config.name)
        state: ServerState = "connecting" if config.enabled else "disabled"
        entry = _Server(config, MCPServerStatus(name=config.name, url=config.url, state=state))
        self._servers[config.name] = entry
        self._emit(entry)
        if config.enabled:
            await self._connect(entry)
        return entry.status

    async def add_servers(self, configs: Iterable[MCPServerConfig]) -> list[MCPServerStatus]:
        """Add several servers, connecting them concurrently (a later duplicate name wins)."""
        unique = {config.name: config for config in configs}
        return list(await asyncio.gather(*(self.add_server(c) for c in unique.values())))

    async def remove_server(self, name: str) -> None:
        entry = self._servers.pop(name, None)
        if entry is not None:
            await self._disconnect(entry)

    async def reconnect(self, name: str) -> MCPServerStatus:
        """Connect again (after an error, or to pick up a server that restarted)."""
        entry = self._servers[name]
        await self._disconnect(entry)
        if entry.config.enabled:
            entry.status = entry.status.model_copy(update={"state": "connecting", "error": None})
            self._emit(entry)
            await self._connect(entry)
        return entry.status

    def status(self, name: str) -> MCPServerStatus:
        return self._servers[name].status

    def statuses(self) -> list[MCPServerStatus]:
        return [entry.status for entry in self._servers.values()]

    def tools(self) -> list[MCPTool]:
        """The tools of every connected server."""
        return [tool for entry in self._servers.values() for tool in entry.tools]

    def client(self, name: str) -> MCPClient | None:
        """The session with a server, while it is connected."""
        return self._servers[name].client

    async def close(self) -> None:
        for name in list(self._servers):
            await self.remove_server(name)

    async def _connect(self, entry: _Server) -> None:
        config = entry.config
        client: MCPClient | None = None
        try:
            transport = self._transport_factory(config)
            auth = (
                self._authorizer_factory(config, transport)
                if self._authorizer_factory is not None
                else None
            )
            client = MCPClient(
                config.url,
                transport=transport,
                token=config.token,
                auth=auth,
                on_elicit=self._on_elicit,
                name=config.name,
                request_timeout_s=self._request_timeout_s,
                tool_timeout_s=config.timeout_s,
                on_tools_changed=lambda tools: self._tools_changed(entry, tools),
            )
            entry.client = client
            initialized = await client.connect()
            await client.refresh_tools()
        except Exception as error:  # one server's failure, whatever it is, stays its own
            entry.client = None
            entry.tools = []
            if client is not None:
                await _close_quietly(client)
            message = str(error) if isinstance(error, MCPError) else f"Unexpected error: {error!r}"
            entry.status = entry.status.model_copy(
                update={"state": "error", "error": message, "tool_count": 0, "left_out": []}
            )
            self._emit(entry)
            return
        if self._servers.get(config.name) is not entry:  # removed while connecting
            await _close_quietly(client)
            entry.client, entry.tools = None, []
            return
        entry.status = entry.status.model_copy(
            update={
                "state": "connected",
                "error": None,
                "protocol_version": initialized.protocol_version,
                "server_name": initialized.server_info.name if initialized.server_info else None,
            }
        )
        self._emit(entry)

    def _tools_changed(self, entry: _Server, tools: list[Tool]) -> None:
        client = entry.client
        if client is None:  # a listing that finished after the server was removed
            return
        timeout_s = entry.config.timeout_s
        left_out = [f"{t.name}: {why}" for t in tools if (why := unusable_reason(t)) is not None]
        entry.tools = [
            MCPTool(server=entry.config.name, tool=tool, client=client, call_timeout_s=timeout_s)
            for tool in tools
            if unusable_reason(tool) is None
        ]
        entry.status = entry.status.model_copy(
            update={"tool_count": len(entry.tools), "left_out": left_out}
        )
        if entry.status.state == "connected":
            self._emit(entry)

    async def _disconnect(self, entry: _Server) -> None:
        client, entry.client, entry.tools = entry.client, None, []
        if client is not None:
            await _close_quietly(client)

    def _emit(self, entry: _Server) -> None:
        if self._on_status is not None:
            self._on_status(entry.status)


async def _close_quietly(client: MCPClient) -> None:
    try:
        await client.close()
    except Exception:  # closing is best effort; the session is forgotten either way
        return
