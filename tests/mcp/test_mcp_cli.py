"""``python -m agent_py.mcp``: output and exit status, run as a real subprocess."""

from __future__ import annotations

import asyncio
import os
import pty
import select
import subprocess
import sys
import time

from mcp_servers import TOKEN, ScriptedServers, SDKServers
from scripted_server import MCPScript, Reply, Request, sse_reply


async def run_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent_py.mcp",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_the_cli_lists_tools_calls_them_and_exits_with_a_meaningful_status(
    sdk_servers: SDKServers, closed_port_url: str
) -> None:
    url, secured = sdk_servers.open_url, sdk_servers.secured_url
    # Independent runs, started together: each pays Python's start-up once.
    listed, added, echoed, failed, unreachable, locked, bad_json = await asyncio.gather(
        run_cli(url, "tools"),
        run_cli("--token", TOKEN, secured, "call", "add", '{"a": 2, "b": 40}'),
        run_cli(secured, "call", "echo", '{"text": "hi"}', "--token", TOKEN),
        run_cli(url, "call", "fail", '{"reason": "no disk"}'),
        run_cli(closed_port_url, "tools"),
        run_cli(secured, "tools"),
        run_cli(url, "call", "add", "{a: 2}"),
    )
    code, out, _ = listed
    assert code == 0
    assert "add\n    Add two integers.\n    arguments: a: integer, b: integer" in out
    slow = "slow\n    Sleep, reporting progress each step.\n    arguments: steps?: integer"
    assert slow + ", delay_s?: number" in out
    revision = "test-server: MCP 2026-07-28 (stateless)\n"  # the SDK server speaks both eras
    assert added == (0, "42\n", revision)  # --token before the command
    assert echoed == (0, "hi\n", revision)  # --token after it
    code, out, err = failed
    assert (code, out) == (1, "")
    assert "no disk" in err
    code, _, err = unreachable
    assert code == 2
    assert err.startswith("error: Cannot reach http://127.0.0.1:")
    code, _, err = locked
    assert code == 2
    assert "needs a token (HTTP 401)" in err
    code, _, err = bad_json
    assert code == 2
    assert "not valid JSON" in err


async def test_a_malformed_url_is_a_usage_error_without_a_traceback() -> None:
    port, bracket = await asyncio.gather(
        run_cli("http://127.0.0.1:99999/mcp", "tools"), run_cli("http://[::1:3924/mcp", "tools")
    )
    assert port == (
        2,
        "",
        "error: the URL 'http://127.0.0.1:99999/mcp' is malformed (Port out of range 0-65535)\n",
    )
    assert bracket[0] == 2
    assert bracket[2] == "error: the URL 'http://[::1:3924/mcp' is malformed (Invalid IPv6 URL)\n"


async def test_timeout_bounds_the_handshake_and_the_tool_listing(
    scripted: ScriptedServers,
) -> None:
    never = asyncio.Event()

    def hang_listing(request: Request) -> Reply:
        return sse_reply(never)

    silent = await scripted(lambda request: sse_reply(never))
    slow_list = await scripted(MCPScript(hang_listing))
    started = time.monotonic()
    at_handshake, at_listing = await asyncio.gather(
        run_cli(silent.url, "tools", "--timeout", "1"),
        run_cli(slow_list.url, "tools", "--timeout", "1"),
    )
    elapsed = time.monotonic() - started
    never.set()
    assert at_handshake[0] == 2
    assert "did not answer server/discover within 1 s" in at_handshake[2]  # the first request
    assert at_listing[0] == 2
    assert "did not answer tools/list within 1 s" in at_listing[2]
    # Python's start-up on a busy machine is most of this; the old default was 30 s.
    assert elapsed < 20


async def test_the_401_message_names_the_cli_options(sdk_servers: SDKServers) -> None:
    code, _, err = await run_cli(sdk_servers.secured_url, "tools")
    assert code == 2
    assert "needs a token (HTTP 401). Pass one with --token or in the MCP_TOKEN" in err
    code, _, err = await run_cli(sdk_servers.secured_url, "tools", env={"MCP_TOKEN": "wrong"})
    assert code == 2
    assert "refused the token (HTTP 401). Pass one with --token" in err


async def test_a_question_from_the_server_takes_the_defaults_under_yes_or_is_declined(
    sdk_servers: SDKServers,
) -> None:
    """``ask_preferences`` has a default for everything; ``ask_user`` needs a name, which
    has none, so --yes cannot answer it. Without a terminal the question is declined."""
    url = sdk_servers.open_url
    defaults, with_yes, no_terminal = await asyncio.gather(
        run_cli(url, "--yes", "call", "ask_preferences"),
        run_cli(url, "call", "ask_user", "--yes"),
        run_cli(url, "call", "ask_user"),
    )
    assert defaults == (
        0,
        'accept {"colour":"blue","count":3,"notify":true}\n',
        "test-server: MCP 2026-07-28 (stateless)\n",  # asked with an input_required round
    )
    assert with_yes[:2] == (0, "decline\n")
    assert "--yes cannot answer it: Name is required. Declined." in with_yes[2]
    assert no_terminal[:2] == (0, "decline\n")
    assert "no terminal to answer on; declined (pass --yes" in no_terminal[2]


def test_a_question_from_the_server_is_asked_on_the_terminal(sdk_servers: SDKServers) -> None:
    """The CLI under a pseudo-terminal: the questions appear, a wrong answer is asked again,
    an empty one takes the default."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "agent_py.mcp", sdk_servers.open_url, "call", "ask_user"],
        stdin=terminal,
        stderr=terminal,
        stdout=subprocess.PIPE,
    )
    os.close(terminal)
    seen = b""
    deadline = time.monotonic() + 60  # a hang guard only

    def expect(text: str) -> None:
        nonlocal seen
        while text.encode() not in seen:
            assert time.monotonic() < deadline, f"no {text!r} in {seen.decode()!r}"
            ready, _, _ = select.select([controller], [], [], 1)
            if ready:
                seen += os.read(controller, 4096)
        seen = seen[seen.index(text.encode()) + len(text) :]

    try:
        expect("asks: Who are you?")
        expect("Answer it?")
        os.write(controller, b"y\n")
        expect("Name (Your name): ")
        os.write(controller, b"Ada\n")
        expect("Age (Your age) (default: 30): ")
        os.write(controller, b"two hundred\n")
        expect("Age must be an integer.")
        os.write(controller, b"\n")
        expect("Subscribe (Send me news) [yes/no] (default: False): ")
        os.write(controller, b"yes\n")
        out, _ = process.communicate(timeout=60)
    finally:
        os.close(controller)
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    assert out.decode() == 'accept {"name":"Ada","age":30,"subscribe":true}\n'
