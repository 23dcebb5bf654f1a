"""What can go wrong when talking to an MCP server.

Every error's message is meant for the user: it says what happened and, where there is
something to do, what to do. The classes let code react (reconnect, ask for a token)
without parsing messages.

    MCPError (an agent_py.core.errors.AgentError)
    ├── MCPConfigError          the server's settings cannot work here
    ├── MCPConnectionError      the server cannot be reached, or the connection broke
    ├── MCPTimeoutError         no answer in time (the request was cancelled)
    ├── MCPHTTPError            an HTTP status that is not a success
    │   ├── MCPAuthError        401 / 403
    │   └── MCPSessionExpiredError  404 (or a 400 naming the session) for a request that
    │                               carried a session id
    ├── MCPAuthorizationError   OAuth: no token could be had (discovery, consent, exchange)
    ├── MCPProtocolError        an answer that is not MCP: garbage, cut off, wrong version
    └── MCPRemoteError          the server answered with a JSON-RPC error
"""

from __future__ import annotations

from typing import Any

from agent_py.core.errors import AgentError


class MCPError(AgentError):
    """Base class; ``str(error)`` is a sentence for the user."""


class MCPConfigError(MCPError):
    """The server's settings cannot work (a transport that does not exist here, a bad URL)."""


class MCPConnectionError(MCPError):
    """The server could not be reached, or the connection broke in the middle of an answer.

    Transports raise it for every network-level failure (refused, DNS, TLS, and in the
    browser a request blocked by CORS, which fetch reports the same way)."""


class MCPTimeoutError(MCPError):
    """The server did not answer in time."""


class MCPHTTPError(MCPError):
    """The server answered with an HTTP status that is not a success."""

    def __init__(self, message: str, *, status: int, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class MCPAuthError(MCPHTTPError):
    """The server wants a (different) token: HTTP 401 or 403. ``www_authenticate`` is the
    challenge header (where OAuth discovery starts)."""

    def __init__(
        self, message: str, *, status: int, body: str = "", www_authenticate: str = ""
    ) -> None:
        super().__init__(message, status=status, body=body)
        self.www_authenticate = www_authenticate


class MCPSessionExpiredError(MCPHTTPError):
    """HTTP 404 for a request with a session id: the server ended the session. Some servers
    answer 400 with a message about the session instead; that counts too.

    The client starts a new session and replays the request once; users see this only if
    that fails too."""

    def __init__(self, message: str, *, session_id: str, status: int = 404, body: str = "") -> None:
        super().__init__(message, status=status, body=body)
        self.session_id = session_id


class MCPAuthorizationError(MCPError):
    """Getting a token failed: discovery, registration, the user's consent, or the token
    endpoint. The message says which step and what the server said."""


class MCPProtocolError(MCPError):
    """The server's answer is not what MCP prescribes: not JSON, cut off, an unknown
    protocol version, a result of the wrong shape."""


class MCPRemoteError(MCPError):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, message: str, *, code: int, remote_message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.remote_message = remote_message
        self.data = data
