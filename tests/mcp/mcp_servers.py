"""The servers the MCP tests talk to, and what the tests need to know about them."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from scripted_server import Handler, ScriptedServer

HERE = Path(__file__).parent
TOKEN = "test-token-7f3a"
START_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class SDKServers:
    open_url: str
    """SSE answers, no token needed."""
    secured_url: str
    """JSON answers; needs ``Authorization: Bearer TOKEN``."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the MCP test server exited:\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the MCP test server did not start:\n{log.read_text()}")


@contextmanager
def serving(
    command: list[str], log: Path, *, port: int, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server process that listens on ``port`` (output to ``log``) until it accepts
    connections, and stop it afterwards."""
    with log.open("wb") as output:
        process = subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
    try:
        wait_for_port(port, process, log)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()


class ScriptedServers:
    """Starts scripted servers for one test and stops them after it."""

    def __init__(self) -> None:
        self.started: list[ScriptedServer] = []

    async def __call__(self, handler: Handler) -> ScriptedServer:
        server = ScriptedServer(handler)
        await server.start()
        self.started.append(server)
        return server
