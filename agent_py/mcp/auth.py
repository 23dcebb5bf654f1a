"""How the HTTP binding asks for a token: the small interface OAuth plugs into.

:class:`~agent_py.mcp.streamable_http.StreamableHTTPConnection` puts
``Authorization: Bearer <access_token()>`` on every request. When the server answers 401,
or 403 with ``error="insufficient_scope"``, the client's
:class:`~agent_py.mcp.rpc.RequestChannel` calls :meth:`Authorizer.challenge` with the
status and the ``WWW-Authenticate`` header, outside the request's time limit (the user may
have a page to approve); if that returns True (a new token is there), the request goes
once more. The OAuth 2.1 implementation is
:class:`agent_py.mcp.oauth.OAuthAuthorizer`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod


class Authorizer(ABC):
    @abstractmethod
    async def access_token(self) -> str | None:
        """The token to send now (refreshed first when it has expired), or None."""

    @abstractmethod
    async def challenge(self, status: int, www_authenticate: str) -> bool:
        """The server refused the token: get a better one. True if the request should be
        sent again; False leaves the refusal to be reported as it is."""
