"""Servers for the MCP tests.

Two real MCP servers from the official SDK (tests/mcp/sdk_server.py) start once per test
session, side by side, on free 127.0.0.1 ports: an open one that answers with SSE streams,
and one that needs a bearer token and answers with plain JSON. ``scripted`` gives a test
its own tiny HTTP server whose answers it writes (tests/mcp/scripted_server.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator

import pytest
from mcp_servers import (
    HERE,
    TOKEN,
    ScriptedServers,
    SDKServers,
    free_port,
    serving,
    wait_for_port,
)


@pytest.fixture(scope="session")
def sdk_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SDKServers]:
    logs = tmp_path_factory.mktemp("mcp-servers")
    launches = [([], free_port()), (["--token", TOKEN, "--json-response"], free_port())]
    started = []
    try:
        for extra, port in launches:
            log = logs / f"server-{port}.log"
            with log.open("wb") as output:
                process = subprocess.Popen(
                    [sys.executable, str(HERE / "sdk_server.py"), str(port), *extra],
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                )
            started.append((process, port, log))
        for process, port, log in started:
            wait_for_port(port, process, log)
        yield SDKServers(
            open_url=f"http://127.0.0.1:{started[0][1]}/mcp",
            secured_url=f"http://127.0.0.1:{started[1][1]}/mcp",
        )
    finally:
        for process, _, _ in started:
            process.terminate()
        for process, _, _ in started:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture(scope="session")
def oauth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The OAuth-protected server (tests/mcp/oauth_server.py); yields its base URL."""
    log = tmp_path_factory.mktemp("oauth-server") / "server.log"
    port = free_port()
    with serving([sys.executable, str(HERE / "oauth_server.py"), str(port)], log, port=port):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedServers]:
    servers = ScriptedServers()
    yield servers
    for server in servers.started:
        await server.stop()


@pytest.fixture
def closed_port_url() -> str:
    """A URL where nothing listens."""
    return f"http://127.0.0.1:{free_port()}/mcp"
