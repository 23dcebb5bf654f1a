"""OAuth 2.1 for MCP servers (the 2025-11-25 authorization spec), on the standard library
and our own HTTP transports, so the same code runs in CPython and in the page.

What happens when a server answers 401 (:meth:`OAuthAuthorizer.challenge`):

1. Protected-resource metadata (RFC 9728): from the ``resource_metadata`` URL of the
   ``WWW-Authenticate`` header, else the well-known URLs under the server's path and
   root. It names the authorization server. A server without it (2025-03-26 style) is its
   own authorization server.
2. Authorization-server metadata (RFC 8414, then OpenID discovery), at the well-known URLs
   the spec lists; a server with neither kind of metadata gets the 2025-03-26 default
   endpoints ``/authorize``, ``/token`` and ``/register`` at its origin. PKCE with S256
   must be offered (assumed for those defaults), or we stop. When the default registration
   endpoint does not exist either, the server is taken not to use OAuth: its 401 stands.
3. The client: a pre-registered id (and secret), else a Client ID Metadata Document URL
   where the server supports them, else dynamic registration (RFC 7591).
4. The token: authorization code with PKCE (S256), ``state`` and ``resource`` (RFC 8707),
   the user's step done by an :class:`AuthorizationFrontEnd` (a loopback redirect in the
   terminal, a popup in the page); or client credentials for machine clients; or, for
   enterprise-managed clients (SEP-990, cross-app access), an identity assertion: the
   user's ID token is exchanged at their identity provider for an ID-JAG (RFC 8693), which
   the ``jwt-bearer`` grant (RFC 7523) turns into the token.

Scopes: those the ``WWW-Authenticate`` header names, else all the resource metadata lists.
A 403 ``insufficient_scope`` asks again for the union of what we hold and what the header
names (step-up). Expired tokens are refreshed before use; a refused refresh token starts
over. Tokens live in a :class:`TokenStore`, one record per server URL; nothing here logs
them, and their reprs hide them.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import re
import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qs, quote, urlencode, urlsplit, urlunsplit

from agent_py.mcp.auth import Authorizer
from agent_py.mcp.errors import MCPAuthorizationError, MCPError
from agent_py.mcp.transport import HTTPTransport

logger = logging.getLogger(__name__)

Grant = Literal["authorization_code", "client_credentials", "identity_assertion"]
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
METADATA_LIMIT = 256 * 1024
EXPIRY_MARGIN_S = 30.0
DEFAULT_CLIENT_NAME = "agent_py"
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


def pkce_pair() -> tuple[str, str]:
    """A PKCE code verifier and its S256 challenge (RFC 7636)."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


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


def _scopes(text: str | None) -> list[str]:
    return text.split() if text else []


def _join(*groups: list[str]) -> str | None:
    merged: list[str] = []
    for group in groups:
        merged.extend(scope for scope in group if scope not in merged)
    return " ".join(merged) or None


@dataclass
class OAuthSettings:
    """How to be a client of a server's authorization server."""

    client_id: str | None = None
    """A pre-registered client; when None, metadata documents or dynamic registration."""
    client_secret: str | None = field(default=None, repr=False)
    client_metadata_url: str | None = None
    """An https URL whose JSON document describes this client (it becomes the client id
    where the authorization server supports Client ID Metadata Documents)."""
    scope: str | None = None
    """Scopes to ask for, instead of those the server suggests."""
    grant: Grant = "authorization_code"
    client_name: str = DEFAULT_CLIENT_NAME
    idp_token_endpoint: str | None = None
    """``identity_assertion``: the identity provider's token endpoint."""
    idp_client_id: str | None = None
    idp_id_token: str | None = field(default=None, repr=False)
    """``identity_assertion``: the user's ID token from that identity provider."""


@dataclass
class StoredAuth:
    """What is kept per server: the client registration and the tokens."""

    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    token_auth_method: str | None = None
    redirect_uri: str | None = None
    issuer: str | None = None
    access_token: str | None = field(default=None, repr=False)
    refresh_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None
    scope: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> StoredAuth:
        known = {name: value.get(name) for name in cls.__dataclass_fields__ if name in value}
        return cls(**known)


class TokenStore(ABC):
    """Tokens and registrations per server URL."""

    @abstractmethod
    def load(self, server_url: str) -> StoredAuth | None: ...

    @abstractmethod
    def save(self, server_url: str, auth: StoredAuth) -> None: ...

    @abstractmethod
    def forget(self, server_url: str) -> None: ...


class MemoryTokenStore(TokenStore):
    def __init__(self) -> None:
        self._records: dict[str, StoredAuth] = {}

    def load(self, server_url: str) -> StoredAuth | None:
        return self._records.get(server_url)

    def save(self, server_url: str, auth: StoredAuth) -> None:
        self._records[server_url] = auth

    def forget(self, server_url: str) -> None:
        self._records.pop(server_url, None)


class AuthorizationFrontEnd(ABC):
    """The user's part of the code flow: open the authorization page, bring back where it
    redirected to."""

    @abstractmethod
    async def redirect_uri(self) -> str:
        """The redirect URI to register and send (ready to receive once this returns)."""

    @abstractmethod
    async def authorize(self, url: str) -> str:
        """Show ``url`` to the user; return the full URL the authorization server redirected
        to (its query holds ``code`` and ``state``, or ``error``)."""


class _NoOAuth(Exception):
    """The server publishes no OAuth metadata at all."""


@dataclass
class _Discovery:
    resource: str
    issuer: str
    metadata: dict[str, Any]
    scopes_supported: list[str]
    guessed: bool = False
    """The 2025-03-26 default endpoints, not published metadata."""


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
        self._transport = transport
        self._front_end = front_end
        self._timeout_s = timeout_s
        self._discovery: _Discovery | None = None
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
                if stored.refresh_token is None or not await self._refresh(stored):
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
        stored = self.stored
        if status == 403:
            if params.get("error") != "insufficient_scope":
                return False  # not about the token's scope: nothing a new token would fix
            scope = _join(_scopes(stored.scope), _scopes(params.get("scope")))
            try:
                await self._obtain(params, scope)
            except _NoOAuth:
                return False
            return True
        if status != 401:
            return False
        if stored.refresh_token is not None and await self._refresh(stored):
            return True
        try:
            await self._obtain(params, None)
        except _NoOAuth:
            return False
        return True

    def forget(self) -> None:
        self.store.forget(self.server_url)

    # Discovery.

    async def _discover(self, params: Mapping[str, str]) -> _Discovery:
        if self._discovery is not None and "resource_metadata" not in params:
            return self._discovery
        resource_metadata: dict[str, Any] | None = None
        candidates = protected_resource_urls(self.server_url)
        if params.get("resource_metadata"):
            candidates = [params["resource_metadata"], *candidates]
        for url in candidates:
            resource_metadata = await self._get_json(url)
            if resource_metadata is not None:
                break
        resource = canonical_resource(self.server_url)
        scopes: list[str] = []
        if resource_metadata is not None:
            servers = resource_metadata.get("authorization_servers")
            if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
                raise MCPAuthorizationError(
                    f"The protected-resource metadata of {self.server_url} names no "
                    "authorization server."
                )
            issuer = servers[0]
            named = resource_metadata.get("resource")
            if isinstance(named, str) and named:
                if not _covers(named, self.server_url):
                    raise MCPAuthorizationError(
                        f"The protected-resource metadata is for {named}, not for "
                        f"{self.server_url}; refusing to send a token there."
                    )
                resource = canonical_resource(named)
            listed = resource_metadata.get("scopes_supported")
            if isinstance(listed, list):
                scopes = [str(scope) for scope in listed]
        else:
            issuer = _origin(self.server_url)  # 2025-03-26: the server is its own
        metadata: dict[str, Any] | None = None
        for url in authorization_server_urls(issuer):
            metadata = await self._get_json(url)
            if metadata is not None:
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
        self._discovery = _Discovery(resource, issuer, metadata, scopes, guessed)
        return self._discovery

    async def _get_json(self, url: str) -> dict[str, Any] | None:
        try:
            status, body = await self._http("GET", url, {"Accept": "application/json"}, None)
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

    # Tokens.

    async def _obtain(self, params: Mapping[str, str], scope: str | None) -> None:
        found = await self._discover(params)
        if scope is None:
            scope = self.settings.scope or params.get("scope") or _join(found.scopes_supported)
        stored = self.stored
        if stored.issuer not in (None, found.issuer):
            stored = StoredAuth()  # another authorization server: its client is not ours
        if self.settings.grant == "client_credentials":
            tokens = await self._client_credentials(found, stored, scope)
        elif self.settings.grant == "identity_assertion":
            tokens = await self._identity_assertion(found, stored, scope)
        else:
            tokens = await self._authorization_code(found, stored, scope)
        self._keep(stored, tokens, found.issuer)

    async def _client_credentials(
        self, found: _Discovery, stored: StoredAuth, scope: str | None
    ) -> dict[str, Any]:
        if not self.settings.client_id:
            raise MCPAuthorizationError(
                "Client credentials need a pre-registered client id and secret."
            )
        stored.client_id = self.settings.client_id
        stored.client_secret = self.settings.client_secret
        form = {"grant_type": "client_credentials", "resource": found.resource}
        if scope:
            form["scope"] = scope
        return await self._token_request(found, stored, form)

    async def _identity_assertion(
        self, found: _Discovery, stored: StoredAuth, scope: str | None
    ) -> dict[str, Any]:
        settings = self.settings
        if not (settings.idp_token_endpoint and settings.idp_id_token and settings.client_id):
            raise MCPAuthorizationError(
                "Cross-app access needs the identity provider's token endpoint, an ID token "
                "and this client's id at the authorization server."
            )
        exchange = {
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": ID_JAG,
            "subject_token": settings.idp_id_token,
            "subject_token_type": ID_TOKEN,
            "audience": str(found.metadata.get("issuer") or found.issuer),
            "resource": found.resource,
        }
        if settings.idp_client_id:
            exchange["client_id"] = settings.idp_client_id
        if scope:
            exchange["scope"] = scope
        status, body = await self._http(
            "POST",
            settings.idp_token_endpoint,
            {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"},
            urlencode(exchange).encode(),
        )
        reply = _json_object(body)
        if status != 200 or not isinstance(reply.get("access_token"), str):
            raise MCPAuthorizationError(
                f"The identity provider refused the token exchange (HTTP {status}){_said(reply)}."
            )
        stored.client_id, stored.client_secret = settings.client_id, settings.client_secret
        form = {"grant_type": JWT_BEARER, "assertion": reply["access_token"]}
        if scope:
            form["scope"] = scope
        return await self._token_request(found, stored, form)

    async def _authorization_code(
        self, found: _Discovery, stored: StoredAuth, scope: str | None
    ) -> dict[str, Any]:
        if self._front_end is None:
            raise MCPAuthorizationError(
                f"{self.server_url} needs the user's authorization, and nothing here can show "
                "its page."
            )
        methods = found.metadata.get("code_challenge_methods_supported")
        if not isinstance(methods, list) or "S256" not in methods:
            raise MCPAuthorizationError(
                f"The authorization server {found.issuer} does not offer PKCE with S256, which "
                "OAuth 2.1 requires; not proceeding."
            )
        endpoint = found.metadata.get("authorization_endpoint")
        if not isinstance(endpoint, str):
            raise MCPAuthorizationError(f"{found.issuer} names no authorization endpoint.")
        redirect_uri = await self._front_end.redirect_uri()
        await self._ensure_client(found, stored, redirect_uri, scope)
        assert stored.client_id is not None
        verifier, challenge = pkce_pair()
        state = secrets.token_urlsafe(24)
        query = {
            "response_type": "code",
            "client_id": stored.client_id,
            "redirect_uri": redirect_uri,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": state,
            "resource": found.resource,
        }
        if scope:
            query["scope"] = scope
        separator = "&" if "?" in endpoint else "?"
        returned = await self._front_end.authorize(f"{endpoint}{separator}{urlencode(query)}")
        answer = {k: v[0] for k, v in parse_qs(urlsplit(returned).query).items()}
        if "error" in answer:
            detail = answer.get("error_description") or answer["error"]
            raise MCPAuthorizationError(f"The authorization was not granted: {detail}.")
        if answer.get("state") != state:
            raise MCPAuthorizationError(
                "The authorization answer does not carry the state we sent; it was ignored."
            )
        issuer_named = found.metadata.get("issuer")
        if "iss" in answer and answer["iss"] != issuer_named:
            raise MCPAuthorizationError(
                f"The authorization answer comes from {answer['iss']}, not {issuer_named}."
            )
        if found.metadata.get("authorization_response_iss_parameter_supported") and (
            "iss" not in answer
        ):
            raise MCPAuthorizationError("The authorization answer lacks its issuer (iss).")
        if not answer.get("code"):
            raise MCPAuthorizationError("The authorization answer carries no code.")
        form = {
            "grant_type": "authorization_code",
            "code": answer["code"],
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
            "resource": found.resource,
        }
        return await self._token_request(found, stored, form)

    async def _ensure_client(
        self, found: _Discovery, stored: StoredAuth, redirect: str, scope: str | None
    ) -> None:
        if self.settings.client_id:
            stored.client_id = self.settings.client_id
            stored.client_secret = self.settings.client_secret
            return
        if stored.client_id and stored.redirect_uri == redirect:
            return  # registered before, with this redirect
        metadata_url = self.settings.client_metadata_url
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
            "client_name": self.settings.client_name,
            "redirect_uris": [redirect],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
        # Some servers let a client ask only for the scopes it registered: register all the
        # server lists, so a later step-up needs no new registration.
        offered = found.metadata.get("scopes_supported")
        wanted = _join(
            [str(s) for s in offered] if isinstance(offered, list) else [], _scopes(scope)
        )
        if wanted:
            request["scope"] = wanted
        status, body = await self._http(
            "POST",
            endpoint,
            {"Content-Type": "application/json", "Accept": "application/json"},
            json.dumps(request).encode(),
        )
        reply = _json_object(body)
        if found.guessed and status in (404, 405):
            raise _NoOAuth()  # nothing at the default endpoint: not an OAuth server
        if status not in (200, 201) or not isinstance(reply.get("client_id"), str):
            raise MCPAuthorizationError(
                f"Registering with {found.issuer} failed (HTTP {status}){_said(reply)}."
            )
        stored.client_id = reply["client_id"]
        stored.client_secret = reply.get("client_secret")
        stored.token_auth_method = reply.get("token_endpoint_auth_method") or (
            "client_secret_post" if stored.client_secret else "none"
        )
        stored.redirect_uri = redirect

    async def _refresh(self, stored: StoredAuth) -> bool:
        """Use the refresh token; False (and the tokens dropped) if the server refuses it."""
        try:
            found = await self._discover({})
        except (MCPAuthorizationError, _NoOAuth):
            return False
        form = {
            "grant_type": "refresh_token",
            "refresh_token": stored.refresh_token or "",
            "resource": found.resource,
        }
        try:
            tokens = await self._token_request(found, stored, form)
        except MCPAuthorizationError as error:
            logger.info("%s: refreshing the token failed: %s", self.server_url, error)
            stored.access_token = stored.refresh_token = None
            self.store.save(self.server_url, stored)
            return False
        if "refresh_token" not in tokens:
            tokens["refresh_token"] = stored.refresh_token  # the old one stays valid
        self._keep(stored, tokens, found.issuer)
        return True

    async def _token_request(
        self, found: _Discovery, stored: StoredAuth, form: dict[str, str]
    ) -> dict[str, Any]:
        endpoint = found.metadata.get("token_endpoint")
        if not isinstance(endpoint, str):
            raise MCPAuthorizationError(f"{found.issuer} names no token endpoint.")
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        }
        client_id = stored.client_id or ""
        method = stored.token_auth_method or self._auth_method(found, stored)
        if stored.client_secret and method == "client_secret_basic":
            pair = f"{quote(client_id, safe='')}:{quote(stored.client_secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            form = {**form, "client_id": client_id}
            if stored.client_secret:
                form["client_secret"] = stored.client_secret
        status, body = await self._http("POST", endpoint, headers, urlencode(form).encode())
        reply = _json_object(body)
        if status != 200 or not isinstance(reply.get("access_token"), str):
            raise MCPAuthorizationError(
                f"The token endpoint of {found.issuer} refused the {form['grant_type']} grant "
                f"(HTTP {status}){_said(reply)}."
            )
        if str(reply.get("token_type", "bearer")).lower() != "bearer":
            raise MCPAuthorizationError(
                f"{found.issuer} issued a {reply.get('token_type')} token; only bearer tokens "
                "are supported."
            )
        return reply

    def _auth_method(self, found: _Discovery, stored: StoredAuth) -> str:
        if not stored.client_secret:
            return "none"
        offered = found.metadata.get("token_endpoint_auth_methods_supported")
        if isinstance(offered, list) and "client_secret_basic" not in offered:
            return "client_secret_post"
        return "client_secret_basic"

    def _keep(self, stored: StoredAuth, tokens: Mapping[str, Any], issuer: str) -> None:
        stored.issuer = issuer
        stored.access_token = tokens["access_token"]
        refresh = tokens.get("refresh_token")
        stored.refresh_token = refresh if isinstance(refresh, str) else None
        expires_in = tokens.get("expires_in")
        stored.expires_at = (
            time.time() + float(expires_in) if isinstance(expires_in, int | float) else None
        )
        if isinstance(tokens.get("scope"), str):
            stored.scope = tokens["scope"]
        self.store.save(self.server_url, stored)

    async def _http(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes | None
    ) -> tuple[int, bytes]:
        scheme = urlsplit(url).scheme
        if scheme not in ("http", "https"):
            raise MCPAuthorizationError(f"Refusing an authorization URL that is not http(s): {url}")
        response = await self._transport.send(method, url, headers, body, self._timeout_s)
        data, too_long = await response.read(METADATA_LIMIT)
        if too_long:
            raise MCPAuthorizationError(f"{url} answered with more than {METADATA_LIMIT} bytes.")
        return response.status, data


def _covers(resource: str, server_url: str) -> bool:
    """Whether a resource identifier names the server: same origin, path a prefix."""
    named, server = urlsplit(canonical_resource(resource)), urlsplit(canonical_resource(server_url))
    if (named.scheme, named.netloc) != (server.scheme, server.netloc):
        return False
    prefix = named.path.rstrip("/")
    return server.path == prefix or server.path.startswith(prefix + "/") or not prefix


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _said(reply: Mapping[str, Any]) -> str:
    detail = reply.get("error_description") or reply.get("error")
    return f": {detail}" if isinstance(detail, str) and detail else ""
