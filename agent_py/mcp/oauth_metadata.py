"""Where a server's authorization lives: metadata discovery for OAuth.

From the ``WWW-Authenticate`` challenge of a 401 (:func:`parse_www_authenticate`),
:func:`discover` reads the protected-resource metadata (RFC 9728), which names the
authorization server, then that server's metadata (RFC 8414, then OpenID discovery), used
only when the ``issuer`` it names is the one it was looked up for. A server without
resource metadata (2025-03-26 style) is its own authorization server; one with no metadata
of either kind gets the 2025-03-26 default endpoints, marked ``guessed``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from agent_py.mcp.errors import MCPAuthorizationError, MCPError
from agent_py.mcp.oauth_http import AuthorizationHTTP

logger = logging.getLogger(__name__)

_AUTH_PARAM = re.compile(r'([A-Za-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


def parse_www_authenticate(header: str) -> dict[str, str]:
    """The parameters of a ``Bearer`` challenge (``resource_metadata``, ``scope``,
    ``error``...); empty when the header holds no Bearer challenge."""
    match = re.search(r"(?i)\bbearer\b", header)
    if match is None:
        return {}
    params: dict[str, str] = {}
    for found in _AUTH_PARAM.finditer(header, match.end()):
        name, quoted, plain = found.groups()
        value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else plain
        params.setdefault(name.lower(), value)
    return params


def canonical_resource(url: str) -> str:
    """The server's URL as a resource indicator: lower-case scheme and host, no fragment."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, parts.query, ""))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _path(url: str) -> str:
    path = urlsplit(url).path
    return "" if path == "/" else path.rstrip("/")


def protected_resource_urls(server_url: str) -> list[str]:
    origin, path = _origin(server_url), _path(server_url)
    urls = [f"{origin}/.well-known/oauth-protected-resource{path}"] if path else []
    return [*urls, f"{origin}/.well-known/oauth-protected-resource"]


def authorization_server_urls(issuer: str) -> list[str]:
    origin, path = _origin(issuer), _path(issuer)
    if not path:
        return [
            f"{origin}/.well-known/oauth-authorization-server",
            f"{origin}/.well-known/openid-configuration",
        ]
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]


class NoOAuthError(Exception):
    """The server publishes no OAuth metadata at all."""


@dataclass
class Discovery:
    resource: str
    issuer: str
    """The authorization server's ``issuer``, as its validated metadata names it."""
    metadata: dict[str, Any]
    scopes_supported: list[str]
    guessed: bool = False
    """The 2025-03-26 default endpoints, not published metadata."""


async def discover(
    server_url: str, params: Mapping[str, str], http: AuthorizationHTTP
) -> Discovery:
    """The resource indicator, the authorization server and its metadata for a server."""
    resource_metadata: dict[str, Any] | None = None
    candidates = protected_resource_urls(server_url)
    if params.get("resource_metadata"):
        candidates = [params["resource_metadata"], *candidates]
    for url in candidates:
        resource_metadata = await _get_json(http, url)
        if resource_metadata is not None:
            break
    resource = canonical_resource(server_url)
    scopes: list[str] = []
    if resource_metadata is not None:
        servers = resource_metadata.get("authorization_servers")
        if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
            raise MCPAuthorizationError(
                f"The protected-resource metadata of {server_url} names no authorization server."
            )
        issuer = servers[0]
        named = resource_metadata.get("resource")
        if isinstance(named, str) and named:
            if not _covers(named, server_url):
                raise MCPAuthorizationError(
                    f"The protected-resource metadata is for {named}, not for "
                    f"{server_url}; refusing to send a token there."
                )
            resource = canonical_resource(named)
        listed = resource_metadata.get("scopes_supported")
        if isinstance(listed, list):
            scopes = [str(scope) for scope in listed]
    else:
        issuer = _origin(server_url)  # 2025-03-26: the server is its own
    metadata: dict[str, Any] | None = None
    for url in authorization_server_urls(issuer):
        metadata = await _get_json(http, url)
        if metadata is not None:
            issuer = _validated_issuer(metadata, issuer, url, derived=resource_metadata is None)
            break
    guessed = False
    if metadata is None:
        if resource_metadata is not None:
            raise MCPAuthorizationError(
                f"The authorization server {issuer} publishes no metadata (RFC 8414 or "
                "OpenID discovery)."
            )
        guessed = True
        metadata = {
            "issuer": issuer,
            "authorization_endpoint": f"{issuer}/authorize",
            "token_endpoint": f"{issuer}/token",
            "registration_endpoint": f"{issuer}/register",
            "code_challenge_methods_supported": ["S256"],
        }
    return Discovery(resource, issuer, metadata, scopes, guessed)


def _validated_issuer(metadata: Mapping[str, Any], issuer: str, url: str, *, derived: bool) -> str:
    """The issuer the metadata names, which must be the one its URL was built from (RFC 8414
    §3.3, OpenID Discovery §4.3): else a server could pass off another's endpoints.

    ``derived``: a 2025-03-26 server is its own authorization server, its issuer our guess
    from its origin, so a trailing slash on the origin is let pass."""
    named = metadata.get("issuer")
    if named == issuer or (derived and named == issuer + "/"):
        return str(named)
    names = f"names the issuer {named!r}" if isinstance(named, str) else "names no issuer"
    raise MCPAuthorizationError(
        f"The authorization server metadata at {url} {names}, but was looked up for "
        f"{issuer}; it was not used (RFC 8414 §3.3)."
    )


async def _get_json(http: AuthorizationHTTP, url: str) -> dict[str, Any] | None:
    try:
        status, body = await http.send("GET", url, {"Accept": "application/json"}, None)
    except MCPError as error:
        logger.info("OAuth discovery: %s: %s", url, error)
        return None
    if status != 200:
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _covers(resource: str, server_url: str) -> bool:
    """Whether a resource identifier names the server: same origin, path a prefix."""
    named, server = urlsplit(canonical_resource(resource)), urlsplit(canonical_resource(server_url))
    if (named.scheme, named.netloc) != (server.scheme, server.netloc):
        return False
    prefix = named.path.rstrip("/")
    return server.path == prefix or server.path.startswith(prefix + "/") or not prefix
