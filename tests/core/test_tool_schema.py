"""A tool's input schema is a server's text: its ``$ref`` to a network URL is never fetched
(an SSRF door; MCP 2026-07-28, SEP-2106), while same-document references still check."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from agent_py.core.tool_schema import validate_arguments


@pytest.fixture
def canary() -> Iterator[tuple[str, list[str]]]:
    """A loopback URL that records every fetch of it."""
    fetched: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.end_headers()
            self.wfile.write(b'{"type": "string"}')

        def log_message(self, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/profile-schema.json", fetched
    finally:
        server.shutdown()
        server.server_close()


def test_a_network_ref_is_never_fetched_and_a_local_one_still_checks(
    canary: tuple[str, list[str]],
) -> None:
    url, fetched = canary
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"userId": {"type": "string", "pattern": "^[a-z0-9-]+$"}},
        "properties": {"id": {"$ref": "#/$defs/userId"}, "profile": {"$ref": url}},
        "required": ["id"],
    }
    assert validate_arguments(schema, {"id": "ada-1"}) is None
    assert validate_arguments(schema, {"id": "Ada!"}) == "id: 'Ada!' does not match '^[a-z0-9-]+$'"
    refused = validate_arguments(schema, {"id": "ada", "profile": "x"})
    assert refused == f"the tool's input schema refers to {url}, which is not fetched"
    assert fetched == []
