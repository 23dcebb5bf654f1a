"""Who this client is at an authorization server, in the order the spec prefers: a
pre-registered client id (and secret); else, for the authorization code grant, a Client ID
Metadata Document URL where the server supports them; else a registration made earlier
with that same server for this redirect URI; else dynamic registration (RFC 7591, kept for
servers without metadata documents). A registration is bound to the ``issuer`` of the
server that made it (:attr:`~agent_py.mcp.oauth_store.StoredAuth.clients`): another
server never sees it, and gets a registration of its own."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from agent_py.mcp.errors import MCPAuthorizationError, MCPConfigError
from agent_py.mcp.oauth_http import AuthorizationHTTP, join_scopes, json_object, said, scopes
from agent_py.mcp.oauth_metadata import Discovery, NoOAuthError
from agent_py.mcp.oauth_settings import OAuthSettings
from agent_py.mcp.oauth_store import ClientRegistration, StoredAuth

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def preregistered(settings: OAuthSettings, found: Discovery) -> ClientRegistration | None:
    """The client the settings name, if any, and only for the server that issued it."""
    if not settings.client_id:
        return None
    if settings.client_issuer is not None and settings.client_issuer != found.issuer:
        raise MCPAuthorizationError(
            f"The client id {settings.client_id!r} is registered with {settings.client_issuer}, "
            f"but the server's authorization server is now {found.issuer}: register a client "
            "there and give its id."
        )
    return ClientRegistration(settings.client_id, settings.client_secret)


def metadata_document_client(
    settings: OAuthSettings, found: Discovery
) -> ClientRegistration | None:
    """Our Client ID Metadata Document URL as the client id, where the server reads them."""
    url = settings.client_metadata_url
    if not url or found.metadata.get("client_id_metadata_document_supported") is not True:
        return None
    _check_metadata_url(url)
    # The URL is the client id at any server that reads it: nothing to register or keep.
    return ClientRegistration(url, None, "none")


async def ensure_client(
    http: AuthorizationHTTP,
    settings: OAuthSettings,
    found: Discovery,
    stored: StoredAuth,
    redirect: str,
    scope: str | None,
) -> ClientRegistration:
    """A client usable with ``redirect`` at ``found``'s authorization server; a new dynamic
    registration is added to ``stored``."""
    client = preregistered(settings, found) or metadata_document_client(settings, found)
    if client is not None:
        return client
    kept = stored.clients.get(found.issuer)
    if kept is not None and kept.redirect_uri == redirect:
        return kept
    client = await register(http, settings, found, redirect, scope)
    stored.clients[found.issuer] = client
    return client


def application_type(redirect_uri: str) -> str:
    """OpenID's ``application_type`` for a redirect URI (SEP-837): ``native`` for a loopback
    or private-scheme redirect (the terminal, a page served from localhost), ``web`` for a
    page served from another host."""
    parts = urlsplit(redirect_uri)
    if parts.scheme not in ("http", "https"):
        return "native"
    return "native" if (parts.hostname or "") in LOOPBACK_HOSTS else "web"


async def register(
    http: AuthorizationHTTP,
    settings: OAuthSettings,
    found: Discovery,
    redirect: str,
    scope: str | None,
) -> ClientRegistration:
    """Dynamic client registration (RFC 7591) at ``found``'s authorization server."""
    endpoint = found.metadata.get("registration_endpoint")
    if not isinstance(endpoint, str):
        raise MCPAuthorizationError(
            f"The authorization server {found.issuer} offers no dynamic registration: "
            "register a client there and give its client id."
        )
    kind = application_type(redirect)
    request = {
        "client_name": settings.client_name,
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": kind,
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
            f"Registering with {found.issuer} as a {kind} application failed "
            f"(HTTP {status}){said(reply)}."
        )
    secret = reply.get("client_secret")
    secret = secret if isinstance(secret, str) and secret else None
    method = reply.get("token_endpoint_auth_method")
    return ClientRegistration(
        reply["client_id"],
        secret,
        method if isinstance(method, str) else ("client_secret_post" if secret else "none"),
        redirect,
    )


def _check_metadata_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme != "https" or parts.path in ("", "/"):
        raise MCPConfigError(
            f"The client metadata document URL {url} must be an https URL with a path "
            "(it becomes the client id)."
        )
