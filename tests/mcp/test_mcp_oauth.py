"""OAuth 2.1 against a server built from ``mcp.server.auth`` (tests/mcp/oauth_server.py):
discovery from the 401, dynamic registration, the code flow with PKCE and ``resource``,
refresh, the 403 step-up; the 2026-07-28 rules (the RFC 9207 ``iss`` of the answer, the
metadata's ``issuer``, registrations bound to their authorization server, metadata
documents before registration, ``application_type``, ``offline_access``); and the terminal
command's loopback redirect and token file."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from mcp_servers import free_port
from mcp_types import TextContent
from test_mcp_cli import run_cli

from agent_py.mcp import MCPClient
from agent_py.mcp.errors import MCPAuthorizationError
from agent_py.mcp.local import cpython_transport
from agent_py.mcp.oauth import OAuthAuthorizer
from agent_py.mcp.oauth_metadata import Discovery, parse_www_authenticate
from agent_py.mcp.oauth_registration import application_type, preregistered
from agent_py.mcp.oauth_settings import OAuthSettings
from agent_py.mcp.oauth_store import ClientRegistration, MemoryTokenStore, StoredAuth, TokenStore
from agent_py.mcp.terminal_auth import FileTokenStore, LoopbackFrontEnd

HERE = Path(__file__).parent
DOCUMENT_URL = "https://agent.example/oauth/client.json"
Controls = Callable[..., Awaitable[None]]


async def server_log(base: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient() as http:
        entries: list[dict[str, Any]] = (await http.get(f"{base}/test/log")).json()
        return entries


async def browse(url: str) -> None:
    """The user's browser: follow the redirects to the loopback listener."""
    async with httpx.AsyncClient(follow_redirects=True, timeout=30) as http:
        (await http.get(url)).raise_for_status()


@pytest.fixture
async def controls(oauth_server: str) -> AsyncIterator[Controls]:
    """Set how the test authorization servers behave (oauth_server.py, ``/test/controls``);
    back to the defaults after the test."""

    async def control(**values: Any) -> None:
        async with httpx.AsyncClient() as http:
            (await http.post(f"{oauth_server}/test/controls", json=values)).raise_for_status()

    yield control
    await control()


async def call_whoami(
    url: str,
    *,
    store: TokenStore | None = None,
    settings: OAuthSettings | None = None,
    port: int = 0,
) -> None:
    """Sign in (the browser follows every redirect) and call ``whoami``."""
    transport = cpython_transport()
    front_end = LoopbackFrontEnd(port=port, opener=browse)
    authorizer = OAuthAuthorizer(
        url, transport, store=store, settings=settings, front_end=front_end
    )
    try:
        async with MCPClient(url, transport=transport, auth=authorizer) as client:
            result = await client.call_tool("whoami")
            assert result.content == [TextContent(text="an authorized client")]
    finally:
        await front_end.close()


def test_the_bearer_challenge_is_parsed() -> None:
    header = (
        'Bearer error="insufficient_scope", scope="a b", '
        'resource_metadata="https://x.example/.well-known/oauth-protected-resource/mcp", '
        'error_description="say \\"please\\""'
    )
    assert parse_www_authenticate(header) == {
        "error": "insufficient_scope",
        "scope": "a b",
        "resource_metadata": "https://x.example/.well-known/oauth-protected-resource/mcp",
        "error_description": 'say "please"',
    }
    assert parse_www_authenticate('Basic realm="x"') == {}


async def test_the_code_flow_with_pkce_then_one_refresh_for_three_calls_then_a_step_up(
    oauth_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"{oauth_server}/mcp"
    before = len(await server_log(oauth_server))
    store = MemoryTokenStore()
    transport = cpython_transport()
    front_end = LoopbackFrontEnd(opener=browse)
    authorizer = OAuthAuthorizer(url, transport, store=store, front_end=front_end)
    try:
        async with MCPClient(url, transport=transport, auth=authorizer) as client:
            tools = {tool.name for tool in await client.refresh_tools()}
            assert {"whoami", "admin_report"} <= tools
            first_token = store.load(url).access_token  # type: ignore[union-attr]

            async with httpx.AsyncClient() as http:
                await http.post(f"{oauth_server}/test/expire")
            # Three calls refused together: one refresh serves them all.
            for again in await asyncio.gather(*(client.call_tool("whoami") for _ in range(3))):
                assert again.content == [TextContent(text="an authorized client")]
            refreshed = store.load(url)
            assert refreshed is not None and refreshed.access_token != first_token

            report = await client.call_tool("admin_report")
            assert report.content == [TextContent(text="admin report: all well")]
            assert set((store.load(url) or refreshed).scope.split()) == {"mcp:read", "mcp:admin"}  # type: ignore[union-attr]
    finally:
        await front_end.close()
    events = (await server_log(oauth_server))[before:]
    names = [event["event"] for event in events]
    assert names == [
        "register",
        "authorize",
        "approve page",
        "grant",
        "expired",
        "grant",
        "step-up demanded",
        "authorize",
        "approve page",
        "grant",
    ]
    register, first, _, code, _, refresh, _, second, _, stepped = events
    assert register["redirect_uris"][0].startswith("http://127.0.0.1:")
    assert first["resource"] == url and first["has_state"]
    assert first["scopes"] == ["mcp:read"]
    assert (code["grant"], refresh["grant"]) == ("authorization_code", "refresh_token")
    assert second["scopes"] == ["mcp:read", "mcp:admin"]
    assert stepped["grant"] == "authorization_code"
    stored = store.load(url)
    assert stored is not None and stored.access_token and stored.refresh_token
    for secret in (stored.access_token, stored.refresh_token, first_token):
        assert secret not in caplog.text
        assert secret not in repr(stored)


async def test_the_terminal_command_authorizes_through_the_browser_and_keeps_the_token(
    oauth_server: str, tmp_path: Path
) -> None:
    url = f"{oauth_server}/mcp"
    env = {
        "XDG_CONFIG_HOME": str(tmp_path),
        "BROWSER": f"{sys.executable} {HERE / 'browser_stand_in.py'} %s",
    }
    before = len(await server_log(oauth_server))
    code, out, err = await run_cli(url, "call", "whoami", env=env)
    assert (code, out) == (0, "an authorized client\n"), err
    assert "Authorize agent_py in your browser:" in err
    token_file = tmp_path / "agent_py" / "mcp-auth.json"
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    saved = json.loads(token_file.read_text())[url]
    assert saved["access_token"] and saved["refresh_token"]
    for secret in (saved["access_token"], saved["refresh_token"]):
        assert secret not in out + err  # tokens are kept, never printed

    # The kept token is used: no new authorization.
    code, out, err = await run_cli(url, "call", "whoami", env={**env, "BROWSER": "false"})
    assert (code, out) == (0, "an authorized client\n") and "Authorize" not in err, err
    authorizations = [
        e for e in (await server_log(oauth_server))[before:] if e["event"] == "authorize"
    ]
    assert len(authorizations) == 1

    code, _, err = await run_cli(url, "logout", env=env)
    assert code == 0 and "Forgot the OAuth tokens" in err
    assert url not in token_file.read_text()


async def test_a_denied_authorization_is_a_clear_error(oauth_server: str) -> None:
    url = f"{oauth_server}/mcp"

    async def deny(authorize_url: str) -> None:
        redirect = await front_end.redirect_uri()
        state = parse_qs(urlsplit(authorize_url).query)["state"][0]
        query = f"error=access_denied&error_description=The+user+said+no&state={state}"
        async with httpx.AsyncClient() as http:
            await http.get(f"{redirect}?{query}")

    front_end = LoopbackFrontEnd(opener=deny)
    transport = cpython_transport()
    authorizer = OAuthAuthorizer(url, transport, front_end=front_end)
    try:
        with pytest.raises(Exception, match="The authorization was not granted: The user said no"):
            async with MCPClient(url, transport=transport, auth=authorizer):
                pass
    finally:
        await front_end.close()
    await asyncio.sleep(0)


ISSUER_ANSWERS = {
    "a matching iss, advertised": (True, "correct", None),
    "no iss, none advertised": (False, "omit", None),
    "no iss where advertised": (True, "omit", "does not name its issuer"),
    "another issuer": (True, "wrong", "names the issuer 'https://evil.example.com'"),
    "another issuer, unadvertised": (False, "wrong", "names the issuer 'https://evil"),
    "the issuer with a trailing slash": (True, "normalized", r"names the issuer 'http://\S+/'"),
}


@pytest.mark.parametrize("case", ISSUER_ANSWERS.values(), ids=ISSUER_ANSWERS.keys())
async def test_the_code_is_redeemed_only_from_an_answer_of_the_issuer_asked(
    oauth_server: str, controls: Controls, case: tuple[bool, str, str | None]
) -> None:
    advertised, iss, refusal = case
    await controls(advertise_iss=advertised, iss=iss)
    before = len(await server_log(oauth_server))
    if refusal is None:
        await call_whoami(f"{oauth_server}/mcp")
    else:
        with pytest.raises(MCPAuthorizationError, match=refusal):
            await call_whoami(f"{oauth_server}/mcp")
    names = [event["event"] for event in (await server_log(oauth_server))[before:]]
    assert names[:3] == ["register", "authorize", "approve page"]
    assert ("grant" in names) == (refusal is None)  # a refused answer's code is never redeemed


async def test_an_error_answer_naming_another_issuer_is_not_shown(oauth_server: str) -> None:
    url = f"{oauth_server}/mcp"

    async def answer_as_another(authorize_url: str) -> None:
        redirect = await front_end.redirect_uri()
        query = "error=access_denied&error_description=Sign+in+at+evil&iss=https://evil.example"
        async with httpx.AsyncClient() as http:
            await http.get(f"{redirect}?{query}")

    front_end = LoopbackFrontEnd(opener=answer_as_another)
    transport = cpython_transport()
    authorizer = OAuthAuthorizer(url, transport, front_end=front_end)
    try:
        with pytest.raises(MCPAuthorizationError, match="names the issuer") as refused:
            async with MCPClient(url, transport=transport, auth=authorizer):
                pass
    finally:
        await front_end.close()
    assert "Sign in at evil" not in str(refused.value)


async def test_metadata_that_names_another_issuer_is_not_used(
    oauth_server: str, controls: Controls
) -> None:
    await controls(metadata_issuer="https://attacker.example.com")
    before = len(await server_log(oauth_server))
    with pytest.raises(MCPAuthorizationError, match="names the issuer 'https://attacker"):
        await call_whoami(f"{oauth_server}/mcp")
    assert (await server_log(oauth_server))[before:] == []  # no endpoint of it was used


async def test_a_server_that_moves_to_another_authorization_server_gets_a_new_registration(
    oauth_server: str, controls: Controls
) -> None:
    url = f"{oauth_server}/mcp"
    first, second = oauth_server, f"{oauth_server}/second"
    store = MemoryTokenStore()
    port = free_port()  # one redirect URI throughout: only the issuer tells the servers apart
    before = len(await server_log(oauth_server))
    await call_whoami(url, store=store, port=port)
    # The resource now names the second server and refuses the first one's tokens.
    await controls(authorization_server="second")
    await call_whoami(url, store=store, port=port)

    events = (await server_log(oauth_server))[before:]
    assert [e["event"] for e in events] == ["register", "authorize", "approve page", "grant"] * 2
    registered = [e for e in events if e["event"] == "register"]
    assert [e["issuer"] for e in registered] == [first, second]
    assert [e["application_type"] for e in registered] == ["native", "native"]
    first_client, second_client = (e["client_id"] for e in registered)
    assert first_client != second_client
    at_second = [e for e in events if e.get("issuer") == second]
    assert {e["client_id"] for e in at_second} == {second_client}  # nothing of the first's
    stored = store.load(url)
    assert stored is not None and stored.issuer == second
    assert {issuer: c.client_id for issuer, c in stored.clients.items()} == {
        first: first_client,
        second: second_client,
    }

    # Back to the first: its registration serves again; the second's refresh token stays home.
    await controls(authorization_server="first")
    before = len(await server_log(oauth_server))
    await call_whoami(url, store=store, port=port)
    events = (await server_log(oauth_server))[before:]
    assert [e["event"] for e in events] == ["authorize", "approve page", "grant"]
    assert {(e["issuer"], e["client_id"]) for e in events if "issuer" in e} == {
        (first, first_client)
    }


async def test_client_id_metadata_documents_come_before_registration(
    oauth_server: str, controls: Controls
) -> None:
    url = f"{oauth_server}/mcp"
    port = free_port()
    settings = OAuthSettings(client_metadata_url=DOCUMENT_URL)
    store = MemoryTokenStore()
    # A server that does not read the documents gets a registration.
    before = len(await server_log(oauth_server))
    await call_whoami(url, store=store, settings=settings, port=port)
    events = (await server_log(oauth_server))[before:]
    assert [e["event"] for e in events] == ["register", "authorize", "approve page", "grant"]
    assert events[1]["client_id"] == events[0]["client_id"] != DOCUMENT_URL

    # Once it reads them, the document's URL is the client, before that registration.
    document = {
        "client_id": DOCUMENT_URL,
        "client_name": "agent_py",
        "redirect_uris": [f"http://127.0.0.1:{port}/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    await controls(metadata_documents=True, client_documents={DOCUMENT_URL: document})
    signed_out = store.load(url)
    assert signed_out is not None and signed_out.clients
    signed_out.access_token = signed_out.refresh_token = None
    before = len(await server_log(oauth_server))
    await call_whoami(url, store=store, settings=settings, port=port)
    async with httpx.AsyncClient() as http:
        await http.post(f"{oauth_server}/test/expire")
    await call_whoami(url, store=store, settings=settings, port=port)  # refreshed as the URL
    events = (await server_log(oauth_server))[before:]
    assert "register" not in [e["event"] for e in events]
    used = [e for e in events if e["event"] in ("authorize", "grant")]
    assert [(e["event"], e["client_id"]) for e in used] == [
        ("authorize", DOCUMENT_URL),
        ("grant", DOCUMENT_URL),
        ("grant", DOCUMENT_URL),
    ]
    assert used[-1]["grant"] == "refresh_token"


async def test_offline_access_is_asked_for_where_the_server_lists_it(
    oauth_server: str, controls: Controls
) -> None:
    await controls(offline_access=True)
    before = len(await server_log(oauth_server))
    await call_whoami(f"{oauth_server}/mcp")
    (authorized,) = [e for e in (await server_log(oauth_server))[before:] if "scopes" in e][:1]
    assert authorized["scopes"] == ["mcp:read", "offline_access"]


async def test_a_record_kept_before_registrations_named_their_issuer_means_a_new_one(
    oauth_server: str, tmp_path: Path
) -> None:
    url = f"{oauth_server}/mcp"
    port = free_port()
    token_file = tmp_path / "mcp-auth.json"
    stale = {
        "client_id": "stale-client",
        "client_secret": "stale-secret",
        "redirect_uri": f"http://127.0.0.1:{port}/callback",
        "access_token": "stale-token",
        "refresh_token": "stale-refresh",
    }
    token_file.write_text(json.dumps({url: stale}))
    before = len(await server_log(oauth_server))
    await call_whoami(url, store=FileTokenStore(token_file), port=port)
    events = (await server_log(oauth_server))[before:]
    assert [e["event"] for e in events] == ["register", "authorize", "approve page", "grant"]
    kept = json.loads(token_file.read_text())[url]
    assert kept["issuer"] == oauth_server
    assert list(kept["clients"]) == [oauth_server]
    assert kept["clients"][oauth_server]["client_id"] == events[0]["client_id"]


def test_kept_records_are_read_in_either_layout() -> None:
    flat = {"client_id": "c", "client_secret": "s", "issuer": "https://as", "scope": "a"}
    assert StoredAuth.from_json(flat).clients == {"https://as": ClientRegistration("c", "s")}
    assert StoredAuth.from_json({**flat, "issuer": None}).clients == {}  # unknown: register anew
    assert StoredAuth.from_json({"clients": "nonsense", "expires_at": "soon"}) == StoredAuth()
    stored = StoredAuth(issuer="https://as", access_token="t", scope="a")
    stored.clients["https://as"] = ClientRegistration("c", "s", "none", "http://127.0.0.1/cb")
    assert StoredAuth.from_json(json.loads(json.dumps(stored.to_json()))) == stored


def test_registration_names_a_native_client_for_loopback_redirects_and_web_otherwise() -> None:
    assert application_type("http://127.0.0.1:8123/callback") == "native"
    assert application_type("http://localhost:8000/oauth-callback.html") == "native"
    assert application_type("http://[::1]:9/cb") == "native"
    assert application_type("com.example.agent:/callback") == "native"
    assert application_type("https://agent.example/oauth-callback.html") == "web"


def test_a_pre_registered_client_is_not_offered_to_another_authorization_server() -> None:
    found = Discovery("https://mcp.example/mcp", "https://new-as.example", {}, [])
    settings = OAuthSettings(client_id="ours", client_issuer="https://old-as.example")
    with pytest.raises(MCPAuthorizationError, match="register a client there"):
        preregistered(settings, found)
    settings.client_issuer = "https://new-as.example"
    assert preregistered(settings, found) == ClientRegistration("ours")
