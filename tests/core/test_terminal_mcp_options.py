"""``--mcp NAME=URL`` and ``--mcp-config FILE``: the MCP servers a terminal command adds to
the page, the errors of bad ones (exit code 2), and the line printed for each server."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agent_py.cli.main import NETWORK_VARIABLE, main
from agent_py.cli.mcp_servers import (
    collect_servers,
    cors_refusal,
    describe_server,
    parse_server_option,
    read_server_config,
    why_unreachable,
)


def config_file(tmp_path: Path, servers: object) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_a_name_and_url_become_a_server_the_page_reaches_with_its_own_fetch() -> None:
    assert parse_server_option("time=http://127.0.0.1:8931/mcp") == {
        "name": "time",
        "url": "http://127.0.0.1:8931/mcp",
        "transport": "fetch",
    }


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ("http://127.0.0.1:8931/mcp", "write NAME=URL"),
        ("time=", "write NAME=URL"),
        ("my time=http://127.0.0.1:1/mcp", "letters, digits, _ and -"),
        ("a__b=http://127.0.0.1:1/mcp", "letters, digits, _ and -"),
        ("time=ftp://127.0.0.1/mcp", "must start with http:// or https://"),
        ("time=127.0.0.1:8931/mcp", "must start with http:// or https://"),
    ],
)
def test_a_bad_option_is_refused_in_words(option: str, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        parse_server_option(option)


def test_a_config_file_gives_its_servers_and_a_bearer_token(tmp_path: Path) -> None:
    path = config_file(
        tmp_path,
        {
            "time": {"url": "http://127.0.0.1:8931/mcp"},
            "search": {
                "type": "http",
                "url": "https://search.example/mcp",
                "headers": {"Authorization": "Bearer s3cret"},
            },
            "old": {"url": "http://127.0.0.1:1/mcp", "disabled": True},
        },
    )
    assert read_server_config(path) == [
        {"name": "time", "url": "http://127.0.0.1:8931/mcp", "transport": "fetch"},
        {
            "name": "search",
            "url": "https://search.example/mcp",
            "transport": "fetch",
            "token": "s3cret",
        },
    ]


def test_a_stdio_server_is_refused_with_the_way_to_put_it_on_http(tmp_path: Path) -> None:
    path = config_file(tmp_path, {"time": {"command": "uvx", "args": ["mcp-server-time"]}})
    with pytest.raises(ValueError, match="stdio server") as refused:
        read_server_config(path)
    assert "mcp-proxy --port 8931 --allow-origin '*' -- mcp-server-time" in str(refused.value)


@pytest.mark.parametrize(
    ("servers", "said"),
    [
        ({"x": {"url": "http://h/mcp", "headers": {"X-Api-Key": "k"}}}, "cannot send 'X-Api-Key'"),
        ({"x": {"url": "http://h/mcp", "headers": {"Authorization": "Basic a"}}}, "bearer token"),
        ({"x": {"url": "http://h/mcp", "type": "sse"}}, "type 'sse' is not spoken"),
        ({"x": {"args": []}}, "has no url"),
        ({"x": "http://h/mcp"}, "expected an object"),
        ({"bad name": {"url": "http://h/mcp"}}, "letters, digits"),
        ([], "expected"),
    ],
)
def test_a_bad_config_entry_is_refused_in_words(tmp_path: Path, servers: object, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        read_server_config(config_file(tmp_path, servers))


def test_a_config_file_that_is_not_json_or_missing_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="is not JSON"):
        read_server_config(broken)
    with pytest.raises(ValueError, match="cannot read it"):
        read_server_config(tmp_path / "absent.json")


def test_two_servers_cannot_share_a_name(tmp_path: Path) -> None:
    path = config_file(tmp_path, {"time": {"url": "http://127.0.0.1:2/mcp"}})
    with pytest.raises(ValueError, match="two MCP servers are named 'time'"):
        collect_servers(["time=http://127.0.0.1:1/mcp"], path)


def test_bad_server_options_exit_2_before_any_browser_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_file(tmp_path, {"time": {"command": "mcp-server-time"}})
    assert main(["run", "task", "--mcp-config", str(path)]) == 2
    assert "stdio server" in capsys.readouterr().err
    assert main(["run", "task", "--mcp", "nourl"]) == 2
    assert "write NAME=URL" in capsys.readouterr().err
    taken = ["eval", "--mcp", "atlas=http://127.0.0.1:1/mcp", "--out", str(tmp_path / "e")]
    assert main(taken) == 2  # the suite's own server's name
    assert "'atlas'" in capsys.readouterr().err


def test_a_server_off_this_machine_opens_the_browser_network_unless_told_not_to(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_py.cli.main import mcp_server_options

    class Options:
        mcp = ["near=http://127.0.0.1:1/mcp"]
        mcp_config = None

    monkeypatch.setenv(NETWORK_VARIABLE, "placeholder")
    monkeypatch.delenv(NETWORK_VARIABLE)  # put back as it was after the test
    mcp_server_options(Options())  # type: ignore[arg-type]
    assert NETWORK_VARIABLE not in os.environ
    Options.mcp = ["far=https://search.example/mcp"]
    mcp_server_options(Options())  # type: ignore[arg-type]
    assert os.environ[NETWORK_VARIABLE] == "open"
    assert "https://search.example/mcp is not on this machine" in capsys.readouterr().err


def test_each_server_is_described_as_the_panel_shows_it() -> None:
    connected = {
        "name": "atlas",
        "state": "connected",
        "tool_count": 2,
        "tools": ["add", "multiply"],
        "protocol_version": "2025-11-25",
    }
    assert describe_server(connected) == (
        "MCP server atlas: MCP 2025-11-25, 2 tools (add, multiply)"
    )
    one = {**connected, "tool_count": 1, "tools": ["add"]}
    assert describe_server(one) == "MCP server atlas: MCP 2025-11-25, 1 tool (add)"
    failed = {"name": "time", "state": "error", "error": "It cannot be reached."}
    assert describe_server(failed) == "MCP server time: error: It cannot be reached."
    assert "Bearer" in describe_server({"name": "x", "state": "sign-in"})


class Preflight(BaseHTTPRequestHandler):
    allow_origin: str | None = None

    def do_OPTIONS(self) -> None:
        self.send_response(200 if self.allow_origin else 405)
        if self.allow_origin:
            self.send_header("Access-Control-Allow-Origin", self.allow_origin)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def preflight_server() -> Iterator[tuple[str, type[Preflight]]]:
    handler = type("Handler", (Preflight,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/mcp", handler
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_without_cors_headers_is_told_apart_from_one_not_running(
    preflight_server: tuple[str, type[Preflight]],
) -> None:
    url, handler = preflight_server
    origin = "http://127.0.0.1:8765"
    refused = cors_refusal(url, origin)
    assert refused is not None and "sends no CORS headers" in refused
    assert "bridge extension" in refused
    handler.allow_origin = "*"
    assert cors_refusal(url, origin) is None  # CORS is not the cause: the page's error stands

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    absent = cors_refusal(f"http://127.0.0.1:{free}/mcp", origin)
    assert absent is not None and "is it running?" in absent


def test_a_browser_kept_on_loopback_is_named_for_a_server_off_this_machine() -> None:
    why = why_unreachable("https://search.example/mcp", "http://127.0.0.1:1", loopback_only=True)
    assert why is not None and f"{NETWORK_VARIABLE}=loopback" in why
