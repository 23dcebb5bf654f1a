"""OAuth 2.1 against a server built from ``mcp.server.auth`` (tests/mcp/oauth_server.py):
discovery from the 401, dynamic registration, the code flow with PKCE and ``resource``,
refresh, the 403 step-up; and the terminal command's loopback redirect and token file."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp_types import TextContent
from test_mcp_cli import run_cli

from agent_py.mcp import MCPClient
from agent_py.mcp.local import cpython_transport
from agent_py.mcp.oauth import OAuthAuthorizer
from agent_py.mcp.oauth_metadata import parse_www_authenticate
from agent_py.mcp.oauth_store import MemoryTokenStore
from agent_py.mcp.terminal_auth import LoopbackFrontEnd

HERE = Path(__file__).parent


async def server_log(base: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient() as http:
        entries: list[dict[str, Any]] = (await http.get(f"{base}/test/log")).json()
        return entries


async def browse(url: str) -> None:
    """The user's browser: follow the redirects to the loopback listener."""
    async with httpx.AsyncClient(follow_redirects=True, timeout=30) as http:
        (await http.get(url)).raise_for_status()


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
    assert (code, out, err) == (0, "an authorized client\n", "")
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
        async with httpx.AsyncClient() as http:
            await http.get(f"{redirect}?error=access_denied&error_description=The+user+said+no")

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
