"""Who this client is at an authorization server, for the authorization code grant: a
pre-registered client id (and secret), else a Client ID Metadata Document URL where the
server supports them, else dynamic registration (RFC 7591). The registration is kept in
the :class:`~agent_py.mcp.oauth_store.StoredAuth` with the redirect URI it was made for."""

from __future__ import annotations

import json

from agent_py.mcp.errors import MCPAuthorizationError
from agent_py.mcp.oauth_http import AuthorizationHTTP, join_scopes, json_object, said, scopes
from agent_py.mcp.oauth_metadata import Discovery, NoOAuthError
from agent_py.mcp.oauth_settings import OAuthSettings
from agent_py.mcp.oauth_store import StoredAuth


async def ensure_client(
    http: AuthorizationHTTP,
    settings: OAuthSettings,
    found: Discovery,
    stored: StoredAuth,
    redirect: str,
    scope: str | None,
) -> None:
    """Put a client id (and secret) usable with ``redirect`` into ``stored``."""
    if settings.client_id:
        stored.client_id = settings.client_id
        stored.client_secret = settings.client_secret
        return
    if stored.client_id and stored.redirect_uri == redirect:
        return  # registered before, with this redirect
    metadata_url = settings.client_metadata_url
    if metadata_url and found.metadata.get("client_id_metadata_document_supported"):
        stored.client_id, stored.client_secret = metadata_url, None
        stored.token_auth_method = "none"
        stored.redirect_uri = redirect
        return
    endpoint = found.metadata.get("registration_endpoint")
    if not isinstance(endpoint, str):
        raise MCPAuthorizationError(
            f"The authorization server {found.issuer} offers no dynamic registration: "
            "register a client there and give its client id."
        )
    request = {
        "client_name": settings.client_name,
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    # Some servers let a client ask only for the scopes it registered: register all the
    # server lists, so a later step-up needs no new registration.
    offered = found.metadata.get("scopes_supported")
    wanted = join_scopes(
        [str(s) for s in offered] if isinstance(offered, list) else [], scopes(scope)
    )
    if wanted:
        request["scope"] = wanted
    status, body = await http.send(
        "POST",
        endpoint,
        {"Content-Type": "application/json", "Accept": "application/json"},
        json.dumps(request).encode(),
    )
    reply = json_object(body)
    if found.guessed and status in (404, 405):
        raise NoOAuthError()  # nothing at the default endpoint: not an OAuth server
    if status not in (200, 201) or not isinstance(reply.get("client_id"), str):
        raise MCPAuthorizationError(
            f"Registering with {found.issuer} failed (HTTP {status}){said(reply)}."
        )
    stored.client_id = reply["client_id"]
    stored.client_secret = reply.get("client_secret")
    stored.token_auth_method = reply.get("token_endpoint_auth_method") or (
        "client_secret_post" if stored.client_secret else "none"
    )
    stored.redirect_uri = redirect
