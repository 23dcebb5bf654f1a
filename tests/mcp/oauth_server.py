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
- ``/test/log`` (no token needed) lists registrations, authorizations and grants;
  ``POST /test/expire`` makes every access token expire, so the next call needs a refresh.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
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
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

READ, ADMIN = "mcp:read", "mcp:admin"
ACCESS_TTL_S = 3600

log: list[dict[str, Any]] = []


class MemoryProvider:
    """An authorization server that approves every request."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.pending: dict[str, tuple[str, AuthorizationParams]] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info
        log.append(
            {
                "event": "register",
                "redirect_uris": [str(u) for u in client_info.redirect_uris or []],
            }
        )

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        ticket = secrets.token_urlsafe(16)
        assert client.client_id is not None
        self.pending[ticket] = (client.client_id, params)
        log.append(
            {
                "event": "authorize",
                "scopes": params.scopes,
                "resource": params.resource,
                "has_state": params.state is not None,
            }
        )
        return f"{self.base}/approve?{urlencode({'ticket': ticket})}"

    def approve(self, ticket: str) -> str:
        client_id, params = self.pending.pop(ticket)
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
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        log.append(
            {"event": "grant", "grant": "authorization_code", "scopes": authorization_code.scopes}
        )
        return self._issue(
            authorization_code.client_id, authorization_code.scopes, authorization_code.resource
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        log.append({"event": "grant", "grant": "refresh_token", "scopes": refresh_token.scopes})
        return self._issue(
            refresh_token.client_id, scopes or refresh_token.scopes, refresh_token.resource
        )

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def expire_all(self) -> None:
        for token in self.access.values():
            token.expires_at = int(time.time()) - 1

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
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
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
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
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

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
    server = MCPServer(
        "oauth-test-server",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            validate_token_resource=True,
            required_scopes=[READ],
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=[READ, ADMIN], default_scopes=[READ]
            ),
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

    app = server.streamable_http_app()
    return AdminScopeGate(app, provider, f"{base}/.well-known/oauth-protected-resource/mcp")


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
