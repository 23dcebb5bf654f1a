"""OAuth 2.1 for MCP servers (the 2025-11-25 and 2026-07-28 authorization specs), on the
standard library and our own HTTP transports, so the same code runs in CPython and in the
page.

What happens when a server answers 401 (:meth:`OAuthAuthorizer.challenge`):

1. Protected-resource metadata (RFC 9728): from the ``resource_metadata`` URL of the
   ``WWW-Authenticate`` header, else the well-known URLs under the server's path and
   root. It names the authorization server. A server without it (2025-03-26 style) is its
   own authorization server.
2. Authorization-server metadata (RFC 8414, then OpenID discovery), at the well-known URLs
   the spec lists, refused unless its ``issuer`` is the one it was looked up for; a server
   with neither kind of metadata gets the 2025-03-26 default endpoints ``/authorize``,
   ``/token`` and ``/register`` at its origin. PKCE with S256 must be offered (assumed for
   those defaults), or we stop. When the default registration endpoint does not exist
   either, the server is taken not to use OAuth: its 401 stands.
3. The client: a pre-registered id (and secret), else a Client ID Metadata Document URL
   where the server supports them, else dynamic registration (RFC 7591, ``application_type``
   after the redirect URI). Registrations are kept by the authorization server's issuer and
   never offered to another: a server that moves to a new one gets a new registration.
4. The token: authorization code with PKCE (S256), ``state`` and ``resource`` (RFC 8707),
   the user's step done by an :class:`AuthorizationFrontEnd` (a loopback redirect in the
   terminal, a popup in the page), its answer used only if its ``iss`` names the server we
   asked, or lacks it where that server never sends one (RFC 9207); ``offline_access`` is
   asked for too where the server lists it; or client credentials for machine clients; or, for
   enterprise-managed clients (SEP-990, cross-app access), an identity assertion: the
   user's ID token is exchanged at their identity provider for an ID-JAG (RFC 8693), which
   the ``jwt-bearer`` grant (RFC 7523) turns into the token.

Scopes: those the ``WWW-Authenticate`` header names, else all the resource metadata lists.
A 403 ``insufficient_scope`` asks again for the union of what we hold and what the header
names (step-up). Each challenge discovers anew, so a move to another authorization server is
seen. Expired tokens are refreshed before use, at the server that issued them only; a
refused refresh token starts over. Tokens live in a :class:`TokenStore`, one record per
server URL; nothing here logs them, and their reprs hide them.

This module decides when to do what; each step has its own: discovery in
:mod:`~agent_py.mcp.oauth_metadata`, registration in :mod:`~agent_py.mcp.oauth_registration`,
the grants in :mod:`~agent_py.mcp.oauth_grants`, the records in :mod:`~agent_py.mcp.oauth_store`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from agent_py.mcp.auth import Authorizer
from agent_py.mcp.errors import MCPAuthorizationError
from agent_py.mcp.oauth_grants import (
    AuthorizationFrontEnd,
    authorization_code,
    client_credentials,
    identity_assertion,
    refresh_token,
)
from agent_py.mcp.oauth_http import AuthorizationHTTP, join_scopes, scopes
from agent_py.mcp.oauth_metadata import Discovery, NoOAuthError, discover, parse_www_authenticate
from agent_py.mcp.oauth_settings import OAuthSettings
from agent_py.mcp.oauth_store import MemoryTokenStore, StoredAuth, TokenStore
from agent_py.mcp.transport import HTTPTransport

logger = logging.getLogger(__name__)

EXPIRY_MARGIN_S = 30.0


class OAuthAuthorizer(Authorizer):
    """OAuth for one MCP server (see the module docstring)."""

    def __init__(
        self,
        server_url: str,
        transport: HTTPTransport,
        *,
        settings: OAuthSettings | None = None,
        store: TokenStore | None = None,
        front_end: AuthorizationFrontEnd | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.server_url = server_url
        self.settings = settings or OAuthSettings()
        self.store = store or MemoryTokenStore()
        self._http = AuthorizationHTTP(transport, timeout_s)
        self._front_end = front_end
        self._discovery: Discovery | None = None
        self._renewing = asyncio.Lock()

    @property
    def stored(self) -> StoredAuth:
        return self.store.load(self.server_url) or StoredAuth()

    async def access_token(self) -> str | None:
        stored = self.stored
        if stored.access_token is None or not self._expired(stored):
            return stored.access_token
        async with self._renewing:
            stored = self.stored  # another request may have refreshed it meanwhile
            if self._expired(stored):
                if stored.refresh_token is None:
                    return None
                try:
                    found = self._discovery or await self._discover({})
                except (MCPAuthorizationError, NoOAuthError):
                    return None
                if not await self._refresh(stored, found):
                    return None
                stored = self.stored
        return stored.access_token

    async def challenge(self, status: int, www_authenticate: str) -> bool:
        refused = self.stored.access_token
        # One renewal at a time: requests refused together share the first one's token (a
        # second refresh would spend a rotated refresh token, a second sign-in the user's time).
        async with self._renewing:
            current = self.stored.access_token
            if current is not None and current != refused:
                return True
            return await self._renew(status, www_authenticate)

    @staticmethod
    def _expired(stored: StoredAuth) -> bool:
        return stored.expires_at is not None and time.time() > stored.expires_at - EXPIRY_MARGIN_S

    async def _renew(self, status: int, www_authenticate: str) -> bool:
        params = parse_www_authenticate(www_authenticate)
        if status == 403 and params.get("error") != "insufficient_scope":
            return False  # not about the token's scope: nothing a new token would fix
        if status not in (401, 403):
            return False
        try:
            # Found anew: the server may have moved to another authorization server.
            found = await self._discover(params)
            stored = self.stored
            if status == 403:
                scope = join_scopes(scopes(stored.scope), scopes(params.get("scope")))
                await self._obtain(found, params, scope)
            elif not await self._refresh(stored, found):
                await self._obtain(found, params, None)
        except NoOAuthError:
            return False
        return True

    def forget(self) -> None:
        self.store.forget(self.server_url)

    async def _discover(self, params: Mapping[str, str]) -> Discovery:
        self._discovery = await discover(self.server_url, params, self._http)
        return self._discovery

    # Tokens.

    async def _obtain(self, found: Discovery, params: Mapping[str, str], scope: str | None) -> None:
        settings = self.settings
        if scope is None:
            scope = settings.scope or params.get("scope") or join_scopes(found.scopes_supported)
            if settings.grant == "authorization_code" and not settings.scope:
                scope = with_offline_access(scope, found)
        stored = self.stored
        if settings.grant == "client_credentials":
            tokens = await client_credentials(self._http, settings, found, scope)
        elif settings.grant == "identity_assertion":
            tokens = await identity_assertion(self._http, settings, found, scope)
        else:
            tokens = await authorization_code(
                self._http, settings, self._front_end, self.server_url, found, stored, scope
            )
        self._keep(stored, tokens, found.issuer, scope)

    async def _refresh(self, stored: StoredAuth, found: Discovery) -> bool:
        """Use the refresh token; False (and the tokens dropped) if the server refuses it.
        Only the server that issued it sees it: after a move to another, False."""
        if stored.refresh_token is None or stored.issuer != found.issuer:
            return False
        try:
            tokens = await refresh_token(self._http, self.settings, found, stored)
        except MCPAuthorizationError as error:
            logger.info("%s: refreshing the token failed: %s", self.server_url, error)
            stored.access_token = stored.refresh_token = None
            self.store.save(self.server_url, stored)
            return False
        if "refresh_token" not in tokens:
            tokens["refresh_token"] = stored.refresh_token  # the old one stays valid
        self._keep(stored, tokens, found.issuer, stored.scope)
        return True

    def _keep(
        self, stored: StoredAuth, tokens: Mapping[str, Any], issuer: str, asked: str | None
    ) -> None:
        """Save the tokens (and any new registration); ``asked``: the scopes asked for, which
        the server granted if it names none (RFC 6749 §5.1)."""
        stored.issuer = issuer
        stored.access_token = tokens["access_token"]
        refresh = tokens.get("refresh_token")
        stored.refresh_token = refresh if isinstance(refresh, str) else None
        expires_in = tokens.get("expires_in")
        stored.expires_at = (
            time.time() + float(expires_in) if isinstance(expires_in, int | float) else None
        )
        granted = tokens.get("scope")
        stored.scope = granted if isinstance(granted, str) else asked
        self.store.save(self.server_url, stored)


def with_offline_access(scope: str | None, found: Discovery) -> str | None:
    """Add ``offline_access`` (a refresh token) to the scopes asked for, where the
    authorization server lists it; a request that names no scopes is left so."""
    offered = found.metadata.get("scopes_supported")
    if not scope or not isinstance(offered, list) or "offline_access" not in offered:
        return scope
    return join_scopes(scopes(scope), ["offline_access"])
