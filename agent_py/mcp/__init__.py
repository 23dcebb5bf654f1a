"""MCP (Model Context Protocol) client: remote tools for the agent.

- :class:`MCPClient`: one session with one server over Streamable HTTP.
- :class:`MCPClientHost`: the configured servers; their tools as :class:`MCPTool`.
- :mod:`agent_py.mcp.transport`: the interface the HTTP transports implement (httpx in
  CPython; fetch and the extension bridge in the page).
- ``python -m agent_py.mcp URL tools|call``: the same from a terminal.

Importing this package never imports httpx; the CPython transport loads on first use.
"""

from agent_py.mcp.client import MCPClient
from agent_py.mcp.errors import (
    MCPAuthError,
    MCPConfigError,
    MCPConnectionError,
    MCPError,
    MCPHTTPError,
    MCPProtocolError,
    MCPRemoteError,
    MCPSessionExpiredError,
    MCPTimeoutError,
)
from agent_py.mcp.handshake import SUPPORTED_PROTOCOL_VERSIONS
from agent_py.mcp.host import (
    MCPClientHost,
    MCPServerConfig,
    MCPServerStatus,
    MCPTool,
    ServerState,
    ServerTransport,
    TransportFactory,
    default_transport_factory,
    namespaced_tool_name,
)
from agent_py.mcp.rpc import ProgressHandler
from agent_py.mcp.transport import (
    BufferedResponse,
    FallbackTransport,
    HTTPResponse,
    HTTPTransport,
)

__all__ = [
    "SUPPORTED_PROTOCOL_VERSIONS",
    "BufferedResponse",
    "FallbackTransport",
    "HTTPResponse",
    "HTTPTransport",
    "MCPAuthError",
    "MCPClient",
    "MCPClientHost",
    "MCPConfigError",
    "MCPConnectionError",
    "MCPError",
    "MCPHTTPError",
    "MCPProtocolError",
    "MCPRemoteError",
    "MCPServerConfig",
    "MCPServerStatus",
    "MCPSessionExpiredError",
    "MCPTimeoutError",
    "MCPTool",
    "ProgressHandler",
    "ServerState",
    "ServerTransport",
    "TransportFactory",
    "default_transport_factory",
    "namespaced_tool_name",
]
