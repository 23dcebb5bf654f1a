"""OAuth for ``python -m agent_py.mcp``: the loopback redirect and the token file.

:class:`LoopbackFrontEnd` listens on 127.0.0.1 (a free port unless one is given), prints
the authorization URL on stderr, asks the system's browser to open it (``$BROWSER`` is
honoured, as Python's :mod:`webbrowser` does) and waits for the redirect.
:class:`FileTokenStore` keeps registrations and tokens in one JSON file readable only by
its owner. CPython only: the page has its own popup and storage.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import webbrowser
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agent_py.mcp.errors import MCPAuthorizationError
from agent_py.mcp.oauth_grants import AuthorizationFrontEnd
from agent_py.mcp.oauth_store import StoredAuth, TokenStore

CALLBACK_PATH = "/callback"
DONE_PAGE = (
    b"<!doctype html><meta charset=utf-8><title>agent_py</title>"
    b"<p>Authorization received. You can close this window and return to the terminal.</p>"
)


def default_token_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "agent_py" / "mcp-auth.json"


class FileTokenStore(TokenStore):
    """One JSON object: server URL -> :class:`StoredAuth`. Written with mode 0600."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, Any]:
        try:
            value = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    def _write(self, records: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as output:
            json.dump(records, output, indent=1)
        os.replace(temporary, self.path)

    def load(self, server_url: str) -> StoredAuth | None:
        record = self._read().get(server_url)
        return StoredAuth.from_json(record) if isinstance(record, dict) else None

    def save(self, server_url: str, auth: StoredAuth) -> None:
        records = self._read()
        records[server_url] = auth.to_json()
        self._write(records)

    def forget(self, server_url: str) -> None:
        records = self._read()
        if records.pop(server_url, None) is not None:
            self._write(records)


class LoopbackFrontEnd(AuthorizationFrontEnd):
    def __init__(
        self,
        *,
        port: int = 0,
        wait_s: float = 300.0,
        open_browser: bool = True,
        opener: Callable[[str], Awaitable[object]] | None = None,
    ) -> None:
        """``opener`` shows the URL instead of the system's browser (a program that drives
        its own browser)."""
        self._port = port
        self._wait_s = wait_s
        self._open_browser = open_browser
        self._opener = opener
        self._server: asyncio.Server | None = None
        self._arrived: asyncio.Future[str] | None = None

    async def redirect_uri(self) -> str:
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", self._port)
            self._port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{self._port}{CALLBACK_PATH}"

    async def authorize(self, url: str) -> str:
        redirect = await self.redirect_uri()
        self._arrived = asyncio.get_running_loop().create_future()
        print(
            f"Authorize agent_py in your browser:\n  {url}\n"
            f"(waiting for the redirect to {redirect})",
            file=sys.stderr,
            flush=True,
        )
        if self._opener is not None:
            await self._opener(url)
        elif self._open_browser:
            with contextlib.suppress(Exception):  # no browser: the printed URL is enough
                await asyncio.to_thread(webbrowser.open, url)
        try:
            async with asyncio.timeout(self._wait_s):
                return await self._arrived
        except TimeoutError:
            raise MCPAuthorizationError(
                f"No authorization arrived within {self._wait_s:g} s."
            ) from None

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            ours = method == "GET" and target.split("?", 1)[0] == CALLBACK_PATH
            if ours and self._arrived is not None and not self._arrived.done():
                self._arrived.set_result(f"http://127.0.0.1:{self._port}{target}")
                status, body = b"200 OK", DONE_PAGE
            else:
                status, body = b"404 Not Found", b"Not found"
            writer.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: text/html; charset=utf-8\r\n"
                b"Connection: close\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\n\r\n"
                + body
            )
            await writer.drain()
        except (OSError, ValueError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            writer.close()
