"""The MCP project's reference servers for the suite's tasks, and the fixtures they read.

``reference_server(name, logs)`` runs the stdio server ``time``, ``fetch`` or ``git`` behind
mcp-proxy on a free loopback port, as a user puts a stdio server on the web for the page
(``mcp-proxy --port P --host 127.0.0.1 --allow-origin '*' -- mcp-server-time``), and yields its
Streamable HTTP URL once it answers. Both come from the venvs that
scripts/setup_reference_servers.sh makes under ``.artifacts/mcp-reference``. ``site_server``
serves a task file's ``site`` pages, ``make_repository`` makes its ``repo``. CPython only;
meant for a source checkout.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agent_py.cli.terminal import SetupError
from agent_py.evals.suite import RepoSpec, SitePage

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / ".artifacts" / "mcp-reference"
PROXY = INSTALL / "proxy" / "bin" / "mcp-proxy"
SERVERS_BIN = INSTALL / "servers" / "bin"
REFERENCE_SERVERS = ("time", "fetch", "git")
SETUP = "run 'bash scripts/setup.sh' (it runs scripts/setup_reference_servers.sh)"
START_S = 60.0
"""A hang guard: a server answers within a few seconds."""
STOP_S = 10.0


def missing_install() -> str | None:
    """What of the reference servers' install is missing; None when it is all there."""
    wanted = [PROXY, *(SERVERS_BIN / f"mcp-server-{name}" for name in REFERENCE_SERVERS)]
    absent = [path.name for path in wanted if not path.exists()]
    return f"{', '.join(absent)} not installed in {INSTALL}" if absent else None


def server_command(name: str, *, repository: Path | None = None) -> list[str]:
    """The stdio command of the reference server ``name``: time on UTC, fetch allowed to
    reach loopback pages (robots.txt not asked), git confined to ``repository``."""
    command = str(SERVERS_BIN / f"mcp-server-{name}")
    if name == "time":
        return [command, "--local-timezone", "UTC"]
    if name == "fetch":
        return [command, "--ignore-robots-txt", "--allow-private-ips"]
    if name == "git":
        if repository is None:
            raise ValueError("the git server needs a repository")
        return [command, "--repository", str(repository)]
    raise ValueError(f"no reference server named {name!r} (known: {', '.join(REFERENCE_SERVERS)})")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def reference_server(name: str, logs: Path, *, repository: Path | None = None) -> Iterator[str]:
    """The reference server ``name`` behind mcp-proxy on loopback, its output in
    ``logs/NAME-server.log``; yields ``http://127.0.0.1:P/mcp``. Raises SetupError when it is
    not installed, exits or does not answer."""
    command = server_command(name, repository=repository)
    absent = missing_install()
    if absent:
        raise SetupError(f"the MCP reference servers are missing ({absent}): {SETUP}")
    port = free_port()
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{name}-server.log"
    proxy = [str(PROXY), "--port", str(port), "--host", "127.0.0.1", "--allow-origin", "*"]
    with log.open("wb") as output:
        # A session of its own, so that stopping it reaches whatever it started.
        process = subprocess.Popen(
            [*proxy, "--", *command],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_until_it_answers(name, process, port, log)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        _stop(process)


def _wait_until_it_answers(
    name: str, process: subprocess.Popen[bytes], port: int, log: Path
) -> None:
    """Wait for mcp-proxy's status page, which it serves once the stdio server under it has
    answered its initialize."""
    deadline = time.monotonic() + START_S
    while True:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise SetupError(f"the MCP reference server {name!r} exited:\n{tail}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            raise SetupError(
                f"the MCP reference server {name!r} did not answer within {START_S:g} s"
            )
        time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to mcp-proxy's process group, SIGKILL past ``STOP_S``; then the same to the
    stdio server under it, which runs in a session of its own (mcp's stdio client starts it
    so) and would otherwise outlive the proxy for a moment."""
    servers = _children(process.pid)
    _end_group(process.pid, lambda: process.poll() is not None)
    if process.poll() is None:
        process.wait()
    for pid in servers:
        _end_group(pid, partial(_gone, pid))


def _end_group(pid: int, ended: Callable[[], bool]) -> None:
    for sent in (signal.SIGTERM, signal.SIGKILL):
        if ended():
            return
        try:
            os.killpg(pid, sent)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + STOP_S
        while not ended() and time.monotonic() < deadline:
            time.sleep(0.05)


def _children(pid: int) -> list[int]:
    try:
        listed = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in listed.split()]


def _gone(pid: int) -> bool:
    """Whether ``pid`` has ended (a zombie, waiting for its new parent to reap it, has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


@contextmanager
def site_server(
    pages: Mapping[str, SitePage | Mapping[str, Any]], *, log: Path | None = None
) -> Iterator[str]:
    """Serve ``pages`` (path: its type and body) on a free loopback port, 404 for any other
    path, every answer readable by any page (CORS); yields the base URL
    (``http://127.0.0.1:P``, no trailing slash). Requests go to ``log`` when given."""
    served = {path: SitePage.model_validate(page) for path, page in pages.items()}
    lines = log.open("a", encoding="utf-8") if log is not None else None

    class Pages(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer(body=True)

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def _answer(self, *, body: bool) -> None:
            page = served.get(self.path.split("?", 1)[0])
            status, kind = (200, page.type) if page else (404, "text/plain; charset=utf-8")
            data = (page.body if page else "not found\n").encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            # Any page may read it, as a public site with CORS headers lets it: the page's
            # fetch_page reads it without the bridge extension (which tests/web covers).
            self.send_header("Access-Control-Allow-Origin", "*")
            self.end_headers()
            if body:
                self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            if lines is not None:
                lines.write(f"{self.address_string()} {format % args}\n")
                lines.flush()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        if lines is not None:
            lines.close()


def make_repository(spec: RepoSpec | Mapping[str, Any], where: Path) -> Path:
    """Make the git repository of ``spec`` (its commits, in order) at ``where``, which must
    not exist or be empty; returns its absolute path. Each commit's author is its committer
    too, at its date: the same spec makes the same commits, on any machine."""
    repo = RepoSpec.model_validate(spec)
    where = where.resolve()
    if where.exists() and any(where.iterdir()):
        raise ValueError(f"{where} is not empty")
    where.mkdir(parents=True, exist_ok=True)
    # No user's or machine's git config: hooks, signing or templates would change the commits.
    quiet = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
    }
    git = ["git", "-C", str(where), "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false"]
    _git(git, ["init", "-q", "--initial-branch=main", "--template="], quiet)
    for commit in repo.commits:
        for name, text in commit.files.items():
            path = where / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text.encode("utf-8"))
        date = commit.date.isoformat()
        who = {
            "GIT_AUTHOR_NAME": commit.author,
            "GIT_AUTHOR_EMAIL": commit.email,
            "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_NAME": commit.author,
            "GIT_COMMITTER_EMAIL": commit.email,
            "GIT_COMMITTER_DATE": date,
        }
        _git(git, ["add", "--all"], quiet)
        _git(git, ["commit", "-q", "--no-verify", "-m", commit.message], {**quiet, **who})
    return where


def _git(git: list[str], arguments: list[str], env: Mapping[str, str]) -> None:
    try:
        subprocess.run(
            [*git, *arguments], env=dict(env), check=True, capture_output=True, text=True
        )
    except FileNotFoundError:
        raise SetupError("git is missing: install it (Debian's git package)") from None
    except subprocess.CalledProcessError as failed:
        raise SetupError(f"git {arguments[0]} failed: {failed.stderr.strip()}") from None
