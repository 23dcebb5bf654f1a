"""Helpers for the bridge extension tests (test_extension.py, test_page_mcp.py).

- :func:`launch_with_extension`: headless Chromium with extension/ loaded unpacked; its
  service worker is where tests set the policy (trusted chrome.storage, as the consent prompt
  and the options page would) and read the activity log.
- :func:`consent_page`: the extension's own prompt window, to answer as the user would.
- :func:`approve_in_browser`, :func:`grant_access`: the browser's host-permission dialog,
  answered in advance, and the extension's own request for an origin, as consent makes it.
- :class:`PlainServer`: a tiny HTTP server without CORS headers that echoes requests,
  redirects and stalls, so a test sees exactly what the extension sent.
- :func:`start_sdk_server`: the real MCP server of tests/mcp/sdk_server.py (official SDK),
  which sends no CORS headers. By default it has the SDK's DNS-rebinding protection for
  loopback, which refuses ``Origin: chrome-extension://...``; ``allow_origins`` adds origins
  to its allow-list, as a user would for the extension. ``cors=True`` adds CORS headers;
  ``legacy=True`` makes it a server of the 2025 revisions only.
- :func:`server_journal`: what that server received (method, headers, params), asked by a
  client of its own.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parents[2]
EXTENSION_DIR = ROOT / "extension"
MCP_TESTS = ROOT / "tests" / "mcp"
# Fixed by the "key" in extension/manifest.json, so servers can allow it once.
EXTENSION_ID = "kmieaifdmlncmjpphfmoolnpdnkcddpp"
EXTENSION_ORIGIN = f"chrome-extension://{EXTENSION_ID}"


# The loopback hosts the tests' pages and servers run on (any port).
LOOPBACK_PATTERNS = ["http://127.0.0.1/*", "http://localhost/*", "http://[::1]/*"]


def launch_with_extension(
    playwright: Any,
    user_data_dir: Path,
    launch_options: dict[str, Any],
    extension_dir: Path = EXTENSION_DIR,
    approve: tuple[str, ...] = (),
) -> tuple[Any, Any]:
    """A persistent context with the extension, and the extension's service worker. The user's
    answer to the browser's host dialog is "Allow" for loopback and for ``approve`` (match
    patterns): see approve_in_browser."""
    options = dict(launch_options)
    options["args"] = [
        *options.get("args", []),
        f"--disable-extensions-except={extension_dir}",
        f"--load-extension={extension_dir}",
    ]
    # Pages' own service workers (web/sw.js) would serve the page from its cache; the tests
    # want the files of this checkout. Extension service workers are not affected.
    context = playwright.chromium.launch_persistent_context(
        str(user_data_dir), service_workers="block", **options
    )
    workers = [w for w in context.service_workers if w.url.startswith(EXTENSION_ORIGIN)]
    worker = workers[0] if workers else context.wait_for_event("serviceworker", timeout=10_000)
    assert worker.url.startswith(EXTENSION_ORIGIN), worker.url
    approve_in_browser(context, [*LOOPBACK_PATTERNS, *approve])
    return context, worker


def approve_in_browser(context: Any, patterns: list[str]) -> None:
    """The user's "Allow" in Chromium's own host-permission dialog, said in advance.

    The extension holds no host access from install: it asks the browser for a server's origin
    (chrome.permissions.request) when the user allows that server, and the browser shows its
    dialog, which headless Chromium cannot show or answer. chrome://extensions can add a site to
    the extension's "site access" (what the dialog's Allow does); a later request for it, or for
    an origin under it, is then granted without the dialog. Nothing is granted here: the
    extension still holds only what it asks for (chrome.permissions.contains stays false)."""
    page = context.new_page()
    try:
        page.goto("chrome://extensions")
        for pattern in patterns:
            said = page.evaluate(
                """([id, pattern]) => new Promise((resolve) =>
                    chrome.developerPrivate.addHostPermission(id, pattern, () =>
                        resolve(chrome.runtime.lastError?.message || "ok")))""",
                [EXTENSION_ID, pattern],
            )
            assert said == "ok", f"site access for {pattern}: {said}"
    finally:
        page.close()


def grant_access(context: Any, origins: list[str]) -> None:
    """What the consent prompt and the options page do when the user allows an origin: ask the
    browser for host access to it (chrome.permissions.request, in a click on an extension
    page). Origins the manifest cannot ask for (plain http off this machine) are left out: the
    bridge refuses them by its rules."""
    wanted = [f"{origin}/*" for origin in origins if _askable(origin)]
    if not wanted:
        return
    page = context.new_page()
    try:
        page.goto(f"{EXTENSION_ORIGIN}/options.html")
        page.evaluate(
            """(origins) => {
                const button = document.createElement("button");
                button.id = "grant-for-test";
                button.textContent = "grant";
                button.onclick = () => chrome.permissions.request({ origins }).then(
                    (granted) => { window.granted = granted; },
                    (error) => { window.granted = String(error); });
                document.body.prepend(button);
            }""",
            wanted,
        )
        page.click("#grant-for-test")
        page.wait_for_function("window.granted !== undefined")
        granted = page.evaluate("window.granted")
        assert granted is True, f"host access to {wanted}: {granted}"
    finally:
        page.close()


def _askable(origin: str) -> bool:
    parts = urlsplit(origin)
    return parts.scheme == "https" or parts.hostname in ("127.0.0.1", "localhost", "::1")


def holds_access(worker: Any, origin: str) -> bool:
    """Whether the extension holds host access to ``origin`` now."""
    asked = "(o) => chrome.permissions.contains({origins: [o]})"
    return bool(worker.evaluate(asked, f"{origin}/*"))


def set_policy(
    extension: tuple[Any, Any], pages: dict[str, list[str]], *, paused: bool = False
) -> None:
    """What the consent prompt and the options page do: the browser's host access to each page
    and server, then the pages that may use the bridge, each with the servers it may always
    reach. Answers of this browser session (once, denied) are forgotten. Returns once the
    content script is registered for exactly those pages."""
    context, worker = extension
    servers = {server for listed in pages.values() for server in listed}
    grant_access(context, sorted({*pages, *servers}))
    worker.evaluate(
        """async ([pages, paused]) => {
            await chrome.storage.session.set({once: [], denied: []});
            await chrome.storage.local.set({pages, paused});
        }""",
        [pages, paused],
    )
    wanted = sorted(pages)
    deadline = time.monotonic() + 10
    while True:
        registered = worker.evaluate(
            "async () => (await chrome.scripting.getRegisteredContentScripts())"
            ".map(s => s.matches[0].replace(/\\/\\*$/, '')).sort()"
        )
        if registered == wanted:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"content scripts {registered}, wanted {wanted}")
        time.sleep(0.05)


def set_lists(extension: tuple[Any, Any], *, pages: list[str], targets: list[str]) -> None:
    """Every page in ``pages`` may always reach every server in ``targets``."""
    set_policy(extension, {page: list(targets) for page in pages})


def policy(worker: Any) -> dict[str, Any]:
    return dict(
        worker.evaluate(
            """async () => ({...(await chrome.storage.local.get(["pages", "paused"])),
                ...(await chrome.storage.session.get(["once", "denied"]))})"""
        )
    )


def activity(worker: Any) -> list[dict[str, Any]]:
    """The activity log, newest first."""
    by_page = worker.evaluate(
        "async () => (await chrome.storage.session.get('activity')).activity || {}"
    )
    entries = [entry for page in by_page.values() for entry in page]
    return sorted(entries, key=lambda entry: entry["time"], reverse=True)


def wait_activity(worker: Any, predicate: Any, timeout_s: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        for entry in activity(worker):
            if predicate(entry):
                return entry
        if time.monotonic() > deadline:
            raise AssertionError(f"no such activity entry; the log: {activity(worker)}")
        time.sleep(0.1)


def consent_page(context: Any, page: str, server: str) -> Any:
    """The prompt the bridge opened for ``page`` -> ``server`` (waits for it)."""
    question = f"Allow {page} to reach {server} through the bridge?"
    deadline = time.monotonic() + 15
    while True:
        for candidate in context.pages:
            if candidate.url.startswith(f"{EXTENSION_ORIGIN}/consent.html"):
                try:
                    text = candidate.locator("#question").inner_text(timeout=2_000)
                except Exception:  # closed meanwhile, or still loading
                    continue
                if text == question:
                    return candidate
        if time.monotonic() > deadline:
            raise AssertionError(f"no prompt asked {question!r}; pages: {context.pages}")
        # Not time.sleep: Playwright delivers new pages only while one of its calls runs.
        context.pages[0].wait_for_timeout(50)


class _PlainHandler(BaseHTTPRequestHandler):
    """GET/POST/DELETE /echo -> the request as JSON; /redirect?to=URL&status=307 -> a redirect;
    /hang?s=3 -> no answer for that long; /slow -> headers, then only SSE comments for 30 s
    (the server notes when the client went away)."""

    server: PlainServer

    def log_message(self, format: str, *args: object) -> None:
        return

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        self.server.seen.append(
            {"method": self.command, "path": parts.path, "headers": dict(self.headers)}
        )
        if parts.path == "/redirect":
            self.send_response(int(query.get("status", ["307"])[0]))
            self.send_header("Location", query["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if parts.path == "/hang":
            time.sleep(float(query.get("s", ["3"])[0]))
            self.send_response(204)
            self.end_headers()
            return
        if parts.path == "/slow":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.flush()
            try:
                for _ in range(300):
                    time.sleep(0.1)
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.server.disconnects.append(time.monotonic())
            return
        answer = json.dumps(
            {
                "method": self.command,
                "path": parts.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body.decode("utf-8", "replace"),
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    do_GET = do_POST = do_DELETE = do_OPTIONS = _handle


class PlainServer(ThreadingHTTPServer):
    """An HTTP server on 127.0.0.1 that sends no CORS headers."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _PlainHandler)
        self.seen: list[dict[str, Any]] = []
        self.disconnects: list[float] = []
        self.origin = f"http://127.0.0.1:{self.server_address[1]}"
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> PlainServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


_SDK_LAUNCHER = """
import json
import sys

import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.middleware.cors import CORSMiddleware

sys.path.insert(0, sys.argv[1])
from sdk_server import build_server

config = json.loads(sys.argv[2])
security = None
if config["allow_origins"]:
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", *config["allow_origins"]],
    )
app = build_server(None).streamable_http_app(transport_security=security, host="127.0.0.1")


def only_2025(app):
    # What a server written for the 2025 revisions answers a 2026-07-28 request (the SDK's
    # own words for a request outside any session), so the client falls back to initialize.
    refusal = json.dumps(
        {"jsonrpc": "2.0", "id": None,
         "error": {"code": -32000, "message": "Bad Request: Server not initialized"}}
    ).encode()

    async def refuse_2026(scope, receive, send):
        headers = dict(scope.get("headers", ())) if scope["type"] == "http" else {}
        modern = headers.get(b"mcp-protocol-version", b"").strip() == b"2026-07-28"
        if scope["type"] != "http" or scope["method"] != "POST" or not modern:
            return await app(scope, receive, send)
        await send({"type": "http.response.start", "status": 400, "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(refusal)).encode()),
        ]})
        await send({"type": "http.response.body", "body": refusal})

    return refuse_2026


if config["legacy"]:
    app = only_2025(app)
if config["cors"]:
    app = CORSMiddleware(  # outermost: the 2025 server's refusal carries CORS headers too
        app,
        allow_origins=["*"],
        allow_methods=["GET", "POST", "DELETE"],
        allow_headers=config["cors"],
        expose_headers=["Mcp-Session-Id"],
    )
uvicorn.run(app, host="127.0.0.1", port=config["port"], log_level="warning")
"""


@contextmanager
def start_sdk_server(
    log_dir: Path,
    allow_origins: list[str] | None = None,
    *,
    cors: bool | list[str] = False,
    legacy: bool = False,
) -> Iterator[str]:
    """The tests/mcp SDK server on a free port; yields its MCP endpoint URL. With ``cors``
    it sends CORS headers (any origin, ``Mcp-Session-Id`` exposed), as a server meant for
    browser clients does: ``True`` allows any request header, a list only those. It speaks
    2026-07-28 and the 2025 revisions; ``legacy`` makes it a server of the 2025 revisions
    only, which answers any 2026-07-28 request with 400 and a JSON-RPC error."""
    sys.path.insert(0, str(MCP_TESTS))
    try:
        from mcp_servers import free_port, serving
    finally:
        sys.path.remove(str(MCP_TESTS))
    port = free_port()
    log = log_dir / f"sdk-server-{port}.log"
    config = {
        "port": port,
        "allow_origins": allow_origins or [],
        "cors": ["*"] if cors is True else (cors or []),
        "legacy": legacy,
    }
    launch = [sys.executable, "-c", _SDK_LAUNCHER, str(MCP_TESTS), json.dumps(config)]
    with serving(launch, log, port=port):
        yield f"http://127.0.0.1:{port}/mcp"


def server_journal(url: str) -> list[dict[str, Any]]:
    """What the SDK server at ``url`` received so far, oldest first (its ``journal_entries``
    tool), asked by a CPython client of its own, whose requests come last. Playwright's sync
    API holds this thread's event loop, so that client runs in a thread of its own."""
    from agent_py.mcp.client import MCPClient

    async def ask() -> list[dict[str, Any]]:
        async with MCPClient(url) as client:
            result = await client.call_tool("journal_entries")
        assert isinstance(result.structured_content, dict), result
        return list(result.structured_content["result"])

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(ask())).result(timeout=60)
