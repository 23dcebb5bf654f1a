"""An OAuth-protected MCP server built from the ``mcp`` package's own auth components.

Run as ``python oauth_server.py PORT [--cors]``. On 127.0.0.1:PORT it is both the authorization
server (``mcp.server.auth`` routes: metadata, dynamic registration, /authorize, /token)
and the protected resource (``/mcp`` behind the SDK's bearer middleware, with
protected-resource metadata). Tokens are bound to the resource they were asked for.

- /authorize sends the browser to ``/approve``, a page of this server that approves at
  once and redirects to the client with a code: the user's step, without a user.
- Calling the tool ``admin_report`` needs the scope ``mcp:admin`` as well; without it
  the answer is 403 ``insufficient_scope`` naming both scopes (a step-up).
- ``--cors``: ``/mcp`` answers browsers of any origin and lets them read
  ``Mcp-Session-Id`` and ``WWW-Authenticate`` (the auth routes send their own CORS headers).
- ``/test/log`` (no token needed) lists registrations, authorizations and grants, each with
  the issuer it happened at; ``POST /test/expire`` makes every access token expire, so the
  next call needs a refresh.
- A second authorization server, issuer ``{base}/second``, with its own clients (metadata at
  ``/.well-known/oauth-authorization-server/second``, endpoints under ``/second/``).
- ``POST /test/controls`` (a JSON object; ``{}`` for the defaults, :data:`DEFAULT_CONTROLS`)
  sets how the authorization servers behave: the RFC 9207 ``iss`` they put in redirects
  (``correct``, ``omit``, ``wrong``, ``normalized``: with a trailing slash) and whether their
  metadata promises it; an ``issuer`` their metadata names instead of their own; whether they
  list ``offline_access``; whether they read Client ID Metadata Documents, and the documents
  (``{url: document}``) they would find at those URLs; and which of the two servers the
  protected-resource metadata names (``first`` or ``second``). The resource takes only the
  tokens of the server it names.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import sys
import time
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlencode

import uvicorn
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.routes import build_metadata, cors_middleware
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

READ, ADMIN, OFFLINE = "mcp:read", "mcp:admin", "offline_access"
ACCESS_TTL_S = 3600
SECOND = "/second"
WRONG_ISSUER = "https://evil.example.com"
DEFAULT_CONTROLS: dict[str, Any] = {
    "iss": "omit",
    "advertise_iss": False,
    "metadata_issuer": None,
    "offline_access": False,
    "metadata_documents": False,
    "client_documents": {},
    "authorization_server": "first",
}

log: list[dict[str, Any]] = []
controls: dict[str, Any] = dict(DEFAULT_CONTROLS)
# Which authorization server a request is for, and what a registration request asked for.
serving_issuer: ContextVar[str] = ContextVar("serving_issuer")
registration_request: ContextVar[dict[str, Any]] = ContextVar("registration_request")


class MemoryProvider:
    """Two authorization servers that approve every request, each with its own clients."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.clients: dict[str, dict[str, OAuthClientInformationFull]] = {}
        self.pending: dict[str, tuple[str, str, AuthorizationParams]] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.token_issuer: dict[str, str] = {}

    @property
    def issuer(self) -> str:
        """The issuer of the authorization server this request is for."""
        return serving_issuer.get(self.base)

    def named_issuer(self) -> str:
        """The issuer the protected-resource metadata names."""
        return self.base + SECOND if controls["authorization_server"] == "second" else self.base

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        found = self.clients.get(self.issuer, {}).get(client_id)
        if found is None and controls["metadata_documents"]:
            found = self._from_document(client_id)
        if found is None:
            log.append({"event": "unknown client", "issuer": self.issuer, "client_id": client_id})
        return found

    def _from_document(self, url: str) -> OAuthClientInformationFull | None:
        """A client described by the metadata document at ``url`` (the test's stand-in for
        fetching it)."""
        document = controls["client_documents"].get(url)
        if not isinstance(document, dict) or document.get("client_id") != url:
            return None
        log.append({"event": "client document", "issuer": self.issuer, "client_id": url})
        return OAuthClientInformationFull(
            **{"token_endpoint_auth_method": "none", "scope": f"{READ} {ADMIN} {OFFLINE}"}
            | document
        )

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients.setdefault(self.issuer, {})[client_info.client_id] = client_info
        log.append(
            {
                "event": "register",
                "issuer": self.issuer,
                "client_id": client_info.client_id,
                "redirect_uris": [str(u) for u in client_info.redirect_uris or []],
                "application_type": registration_request.get({}).get("application_type"),
            }
        )

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        ticket = secrets.token_urlsafe(16)
        assert client.client_id is not None
        self.pending[ticket] = (self.issuer, client.client_id, params)
        log.append(
            {
                "event": "authorize",
                "issuer": self.issuer,
                "client_id": client.client_id,
                "scopes": params.scopes,
                "resource": params.resource,
                "has_state": params.state is not None,
            }
        )
        return f"{self.base}/approve?{urlencode({'ticket': ticket})}"

    def approve(self, ticket: str) -> str:
        issuer, client_id, params = self.pending.pop(ticket)
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [READ],
            expires_at=time.time() + 300,
            client_id=client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        iss = {"correct": issuer, "wrong": WRONG_ISSUER, "normalized": issuer + "/"}
        return construct_redirect_uri(
            str(params.redirect_uri), code=code, state=params.state, iss=iss.get(controls["iss"])
        )

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        log.append(
            {
                "event": "grant",
                "grant": "authorization_code",
                "issuer": self.issuer,
                "client_id": client.client_id,
                "scopes": authorization_code.scopes,
            }
        )
        return self._issue(
            authorization_code.client_id, authorization_code.scopes, authorization_code.resource
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        found = self.refresh.get(refresh_token)
        if found is not None and self.token_issuer.get(refresh_token) != self.issuer:
            log.append({"event": "foreign refresh token", "issuer": self.issuer})
            return None
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        log.append(
            {
                "event": "grant",
                "grant": "refresh_token",
                "issuer": self.issuer,
                "client_id": client.client_id,
                "scopes": refresh_token.scopes,
            }
        )
        return self._issue(
            refresh_token.client_id, scopes or refresh_token.scopes, refresh_token.resource
        )

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        if self.token_issuer.get(token) != self.named_issuer():
            return None  # the resource trusts only the authorization server it names
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def expire_all(self) -> None:
        for token in self.access.values():
            token.expires_at = int(time.time()) - 1

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.token_issuer[access] = self.token_issuer[refresh] = self.issuer
        expires = int(time.time()) + ACCESS_TTL_S
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires, resource=resource
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(
            access_token=access,
            expires_in=ACCESS_TTL_S,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )


async def read_body(receive: Receive) -> bytes:
    chunks, more = [], True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)


def replaying(body: bytes, receive: Receive) -> Receive:
    """``receive`` for an app after the body was read: the body once, then the rest."""
    replayed = False

    async def replay() -> dict[str, Any]:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


class AuthorizationServers:
    """The metadata of both authorization servers and of the resource, as the controls say;
    the second server's endpoints (the SDK's, under its issuer's path); and what each
    registration request asked for, for the log."""

    AS_METADATA = "/.well-known/oauth-authorization-server"
    RESOURCE_METADATA = "/.well-known/oauth-protected-resource/mcp"

    def __init__(
        self, app: ASGIApp, provider: MemoryProvider, options: ClientRegistrationOptions
    ) -> None:
        self.app = app
        self.provider = provider
        self.options = options
        self.metadata = cors_middleware(self._metadata, ["GET", "OPTIONS"])
        self.resource = cors_middleware(self._resource, ["GET", "OPTIONS"])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path in (self.AS_METADATA, self.AS_METADATA + SECOND):
            await self.metadata(scope, receive, send)
            return
        if path == self.RESOURCE_METADATA:
            await self.resource(scope, receive, send)
            return
        issuer = self.provider.base
        if path.startswith(SECOND + "/"):
            issuer += SECOND
            path = path.removeprefix(SECOND)
            scope = {**scope, "path": path, "raw_path": path.encode()}
        serving = serving_issuer.set(issuer)
        try:
            if scope["method"] == "POST" and path == "/register":
                body = await read_body(receive)
                with contextlib.suppress(ValueError):
                    registration_request.set(json.loads(body))
                receive = replaying(body, receive)
            await self.app(scope, receive, send)
        finally:
            serving_issuer.reset(serving)

    def _metadata(self, request: Request) -> Response:
        issuer = self.provider.base
        if request.url.path.endswith(SECOND):
            issuer += SECOND
        metadata = build_metadata(AnyHttpUrl(issuer), None, self.options, RevocationOptions())
        document = metadata.model_dump(mode="json", exclude_none=True)
        document["issuer"] = controls["metadata_issuer"] or issuer
        if not controls["offline_access"]:
            document["scopes_supported"] = [s for s in document["scopes_supported"] if s != OFFLINE]
        if controls["advertise_iss"]:
            document["authorization_response_iss_parameter_supported"] = True
        if controls["metadata_documents"]:
            document["client_id_metadata_document_supported"] = True
        return JSONResponse(document)

    def _resource(self, request: Request) -> Response:
        base = self.provider.base
        return JSONResponse(
            {
                "resource": f"{base}/mcp",
                "authorization_servers": [self.provider.named_issuer()],
                "scopes_supported": [READ],
                "bearer_methods_supported": ["header"],
            }
        )


class AdminScopeGate:
    """403 ``insufficient_scope`` for a call of ``admin_report`` without ``mcp:admin``."""

    def __init__(self, app: ASGIApp, provider: MemoryProvider, metadata_url: str) -> None:
        self.app = app
        self.provider = provider
        self.metadata_url = metadata_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/mcp":
            await self.app(scope, receive, send)
            return
        body = await read_body(receive)
        if self._needs_admin(scope, body):
            challenge = (
                f'Bearer error="insufficient_scope", scope="{READ} {ADMIN}", '
                f'resource_metadata="{self.metadata_url}", '
                'error_description="admin_report needs mcp:admin"'
            )
            log.append({"event": "step-up demanded"})
            response = Response(
                json.dumps({"error": "insufficient_scope"}),
                status_code=403,
                headers={"WWW-Authenticate": challenge, "Content-Type": "application/json"},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, replaying(body, receive), send)

    def _needs_admin(self, scope: Scope, body: bytes) -> bool:
        try:
            message = json.loads(body)
        except ValueError:
            return False
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return False
        if (message.get("params") or {}).get("name") != "admin_report":
            return False
        headers = dict(scope["headers"])
        token = headers.get(b"authorization", b"").decode().removeprefix("Bearer ")
        found = self.provider.access.get(token)
        return found is None or ADMIN not in found.scopes


def build(port: int) -> ASGIApp:
    base = f"http://127.0.0.1:{port}"
    provider = MemoryProvider(base)
    registration = ClientRegistrationOptions(
        enabled=True, valid_scopes=[READ, ADMIN, OFFLINE], default_scopes=[READ]
    )
    server = MCPServer(
        "oauth-test-server",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            validate_token_resource=True,
            required_scopes=[READ],
            client_registration_options=registration,
        ),
    )

    @server.tool(description="Say who is asking.")
    def whoami() -> str:
        return "an authorized client"

    @server.tool(description="Needs the mcp:admin scope.")
    def admin_report() -> str:
        return "admin report: all well"

    @server.custom_route("/approve", methods=["GET"])
    async def approve(request: Request) -> Response:
        log.append({"event": "approve page"})
        return RedirectResponse(provider.approve(request.query_params["ticket"]), status_code=302)

    @server.custom_route("/test/log", methods=["GET"])
    async def show_log(request: Request) -> Response:
        return JSONResponse(log)

    @server.custom_route("/test/expire", methods=["POST"])
    async def expire(request: Request) -> Response:
        provider.expire_all()
        log.append({"event": "expired"})
        return JSONResponse({"ok": True})

    @server.custom_route("/test/controls", methods=["POST"])
    async def control(request: Request) -> Response:
        controls.clear()
        controls.update(DEFAULT_CONTROLS, **await request.json())
        return JSONResponse(controls)

    app = server.streamable_http_app()
    gated = AdminScopeGate(app, provider, f"{base}{AuthorizationServers.RESOURCE_METADATA}")
    return AuthorizationServers(gated, provider, registration)


def with_cors(app: ASGIApp) -> ASGIApp:
    from starlette.middleware.cors import CORSMiddleware

    endpoint = CORSMiddleware(
        app,
        allow_origins=["*"],
        allow_methods=["GET", "POST", "DELETE"],
        allow_headers=["*"],
        expose_headers=["Mcp-Session-Id", "WWW-Authenticate"],
    )

    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        target = endpoint if scope.get("path") == "/mcp" else app
        await target(scope, receive, send)

    return route


def main() -> None:
    port = int(sys.argv[1])
    app = build(port)
    if "--cors" in sys.argv[2:]:
        app = with_cors(app)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
