"""How a token is obtained at the token endpoint, one function per grant:

- authorization code with PKCE (S256), ``state`` and ``resource`` (RFC 8707), the user's
  step done by an :class:`AuthorizationFrontEnd` (a loopback redirect in the terminal, a
  popup in the page); the answer is used only if it comes from the authorization server we
  sent the user to (RFC 9207 ``iss``, compared as a plain string);
- client credentials, for machine clients;
- identity assertion, for enterprise-managed clients (SEP-990, cross-app access): the
  user's ID token is exchanged at their identity provider for an ID-JAG (RFC 8693), which
  the ``jwt-bearer`` grant (RFC 7523) turns into the token;
- refresh token.

Each returns the token endpoint's JSON reply; keeping the tokens is the caller's job.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from agent_py.mcp.errors import MCPAuthorizationError
from agent_py.mcp.oauth_http import AuthorizationHTTP, json_object, said
from agent_py.mcp.oauth_metadata import Discovery
from agent_py.mcp.oauth_registration import (
    ensure_client,
    metadata_document_client,
    preregistered,
)
from agent_py.mcp.oauth_settings import OAuthSettings
from agent_py.mcp.oauth_store import ClientRegistration, StoredAuth

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"


class AuthorizationFrontEnd(ABC):
    """The user's part of the code flow: open the authorization page, bring back where it
    redirected to."""

    @abstractmethod
    async def redirect_uri(self) -> str:
        """The redirect URI to register and send (ready to receive once this returns)."""

    @abstractmethod
    async def authorize(self, url: str) -> str:
        """Show ``url`` to the user; return the full URL the authorization server redirected
        to, its query unchanged (``code``, ``state``, ``iss``, or ``error``)."""


def pkce_pair() -> tuple[str, str]:
    """A PKCE code verifier and its S256 challenge (RFC 7636)."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


async def client_credentials(
    http: AuthorizationHTTP,
    settings: OAuthSettings,
    found: Discovery,
    scope: str | None,
) -> dict[str, Any]:
    client = preregistered(settings, found)
    if client is None:
        raise MCPAuthorizationError(
            "Client credentials need a pre-registered client id and secret."
        )
    form = {"grant_type": "client_credentials", "resource": found.resource}
    if scope:
        form["scope"] = scope
    return await token_request(http, found, client, form)


async def identity_assertion(
    http: AuthorizationHTTP,
    settings: OAuthSettings,
    found: Discovery,
    scope: str | None,
) -> dict[str, Any]:
    client = preregistered(settings, found)
    if not (settings.idp_token_endpoint and settings.idp_id_token and client):
        raise MCPAuthorizationError(
            "Cross-app access needs the identity provider's token endpoint, an ID token "
            "and this client's id at the authorization server."
        )
    exchange = {
        "grant_type": TOKEN_EXCHANGE,
        "requested_token_type": ID_JAG,
        "subject_token": settings.idp_id_token,
        "subject_token_type": ID_TOKEN,
        "audience": found.issuer,
        "resource": found.resource,
    }
    if settings.idp_client_id:
        exchange["client_id"] = settings.idp_client_id
    if scope:
        exchange["scope"] = scope
    status, body = await http.send(
        "POST",
        settings.idp_token_endpoint,
        {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"},
        urlencode(exchange).encode(),
    )
    reply = json_object(body)
    if status != 200 or not isinstance(reply.get("access_token"), str):
        raise MCPAuthorizationError(
            f"The identity provider refused the token exchange (HTTP {status}){said(reply)}."
        )
    form = {"grant_type": JWT_BEARER, "assertion": reply["access_token"]}
    if scope:
        form["scope"] = scope
    return await token_request(http, found, client, form)


async def authorization_code(
    http: AuthorizationHTTP,
    settings: OAuthSettings,
    front_end: AuthorizationFrontEnd | None,
    server_url: str,
    found: Discovery,
    stored: StoredAuth,
    scope: str | None,
) -> dict[str, Any]:
    if front_end is None:
        raise MCPAuthorizationError(
            f"{server_url} needs the user's authorization, and nothing here can show its page."
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
    redirect_uri = await front_end.redirect_uri()
    client = await ensure_client(http, settings, found, stored, redirect_uri, scope)
    verifier, challenge = pkce_pair()
    state = secrets.token_urlsafe(24)
    expected_issuer = found.issuer  # kept with them: whom the answer must come from (RFC 9207)
    query = {
        "response_type": "code",
        "client_id": client.client_id,
        "redirect_uri": redirect_uri,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": state,
        "resource": found.resource,
    }
    if scope:
        query["scope"] = scope
    separator = "&" if "?" in endpoint else "?"
    returned = await front_end.authorize(f"{endpoint}{separator}{urlencode(query)}")
    answer = authorization_answer(returned)
    # Before anything else in the answer is believed, even its error (a mix-up attack).
    check_issuer(answer, expected_issuer, found.metadata)
    if answer.get("state") != state:
        raise MCPAuthorizationError(
            "The authorization answer does not carry the state we sent; it was ignored."
        )
    if "error" in answer:
        detail = answer.get("error_description") or answer["error"]
        raise MCPAuthorizationError(f"The authorization was not granted: {detail}.")
    if not answer.get("code"):
        raise MCPAuthorizationError("The authorization answer carries no code.")
    form = {
        "grant_type": "authorization_code",
        "code": answer["code"],
        "redirect_uri": redirect_uri,
        "code_verifier": verifier,
        "resource": found.resource,
    }
    return await token_request(http, found, client, form)


def authorization_answer(url: str) -> dict[str, str]:
    """The parameters of the redirect back from the authorization server, each given once
    (OAuth 2.1 §3.1); a parameter with an empty value is there, and counts."""
    answer: dict[str, str] = {}
    for name, values in parse_qs(urlsplit(url).query, keep_blank_values=True).items():
        if len(values) > 1:
            raise MCPAuthorizationError(
                f"The authorization answer gives {name} more than once; it was ignored."
            )
        answer[name] = values[0]
    return answer


def check_issuer(answer: Mapping[str, str], expected: str, metadata: Mapping[str, Any]) -> None:
    """RFC 9207 §2.4 as MCP 2026-07-28 applies it: a present ``iss`` must be the recorded
    issuer, character for character (no URL normalization), advertised or not; an absent one
    is refused only where the server's metadata promises it."""
    issuer = answer.get("iss")
    if issuer is None:
        if metadata.get("authorization_response_iss_parameter_supported") is True:
            raise MCPAuthorizationError(
                f"The authorization answer does not name its issuer (iss), which {expected} "
                "says it always does; it was not used."
            )
        return
    if issuer != expected:
        raise MCPAuthorizationError(
            f"The authorization answer names the issuer {issuer!r}, not {expected}, where the "
            "authorization was asked for; it was not used (it may come from another "
            "authorization server)."
        )


async def refresh_token(
    http: AuthorizationHTTP, settings: OAuthSettings, found: Discovery, stored: StoredAuth
) -> dict[str, Any]:
    """The refresh grant, by the client that ``found``'s server knows us as; the caller has
    made sure the tokens come from that server."""
    client = (
        preregistered(settings, found)
        or metadata_document_client(settings, found)
        or stored.clients.get(found.issuer)
    )
    if client is None:
        raise MCPAuthorizationError(f"No client is registered with {found.issuer} to refresh with.")
    form = {
        "grant_type": "refresh_token",
        "refresh_token": stored.refresh_token or "",
        "resource": found.resource,
    }
    return await token_request(http, found, client, form)


async def token_request(
    http: AuthorizationHTTP, found: Discovery, client: ClientRegistration, form: dict[str, str]
) -> dict[str, Any]:
    endpoint = found.metadata.get("token_endpoint")
    if not isinstance(endpoint, str):
        raise MCPAuthorizationError(f"{found.issuer} names no token endpoint.")
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "Accept": "application/json",
    }
    method = client.token_auth_method or _auth_method(found, client)
    if client.client_secret and method == "client_secret_basic":
        pair = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    else:
        form = {**form, "client_id": client.client_id}
        if client.client_secret:
            form["client_secret"] = client.client_secret
    status, body = await http.send("POST", endpoint, headers, urlencode(form).encode())
    reply = json_object(body)
    if status != 200 or not isinstance(reply.get("access_token"), str):
        raise MCPAuthorizationError(
            f"The token endpoint of {found.issuer} refused the {form['grant_type']} grant "
            f"(HTTP {status}){said(reply)}."
        )
    if str(reply.get("token_type", "bearer")).lower() != "bearer":
        raise MCPAuthorizationError(
            f"{found.issuer} issued a {reply.get('token_type')} token; only bearer tokens "
            "are supported."
        )
    return reply


def _auth_method(found: Discovery, client: ClientRegistration) -> str:
    if not client.client_secret:
        return "none"
    offered = found.metadata.get("token_endpoint_auth_methods_supported")
    if isinstance(offered, list) and "client_secret_basic" not in offered:
        return "client_secret_post"
    return "client_secret_basic"
