"""Serve web/ on 127.0.0.1 for development, the terminal runner and browser tests.

    python scripts/serve.py [--port 8765] [--no-isolation] [--verbose]

CPython only (http.server, threads); never imported on the Pyodide path.

Sends COOP/COEP headers by default: cross-origin isolation gives SharedArrayBuffer, which
the CPU engine needs for more than one thread. `Cache-Control: no-cache` makes the browser
revalidate every file, so edits show up on reload while unchanged files still come back as 304.

Tests import it:  server, url = start_server(port=0)  ...  server.shutdown()
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

WEB_ROOT = Path(__file__).resolve().parents[2] / "web"
HOST = "127.0.0.1"
DEFAULT_PORT = 8765

MIME_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".wasm": "application/wasm",
    ".whl": "application/zip",
    ".zip": "application/zip",
    ".gguf": "application/octet-stream",
    ".md": "text/markdown; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".webmanifest": "application/manifest+json",
}

ISOLATION_HEADERS = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "same-origin",
}


class WebRequestHandler(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, **MIME_TYPES}
    isolation = True
    verbose = False

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")
        if self.isolation:
            for name, value in ISOLATION_HEADERS.items():
                self.send_header(name, value)
        super().end_headers()

    def log_message(self, format: str, *args: object) -> None:
        if self.verbose:
            super().log_message(format, *args)

    def handle(self) -> None:
        # A browser that closes a connection mid-transfer (page closed, fetch aborted) is normal.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            super().handle()


def make_server(
    port: int = DEFAULT_PORT,
    directory: Path = WEB_ROOT,
    isolation: bool = True,
    verbose: bool = False,
) -> tuple[ThreadingHTTPServer, str]:
    handler = type(
        "ConfiguredWebRequestHandler",
        (WebRequestHandler,),
        {"isolation": isolation, "verbose": verbose},
    )
    server = ThreadingHTTPServer((HOST, port), functools.partial(handler, directory=str(directory)))
    server.daemon_threads = True
    return server, f"http://{HOST}:{server.server_address[1]}/"


def start_server(
    port: int = 0,
    directory: Path = WEB_ROOT,
    isolation: bool = True,
    verbose: bool = False,
) -> tuple[ThreadingHTTPServer, str]:
    """Serve in a daemon thread; port 0 picks a free port. Stop with server.shutdown()."""
    server, url = make_server(port, directory, isolation, verbose)
    thread = threading.Thread(target=server.serve_forever, name="web-server", daemon=True)
    thread.start()
    return server, url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve web/ on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="0 picks a free port")
    parser.add_argument(
        "--no-isolation",
        action="store_true",
        help="drop the COOP/COEP headers (no SharedArrayBuffer: the CPU engine runs on one thread)",
    )
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    if not (WEB_ROOT / "vendor").is_dir():
        print("web/vendor is missing: run `python scripts/vendor.py` first", file=sys.stderr)
    server, url = make_server(args.port, isolation=not args.no_isolation, verbose=args.verbose)
    print(f"Serving {WEB_ROOT} at {url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
