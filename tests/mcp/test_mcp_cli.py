"""``python -m agent_py.mcp``: output and exit status, run as a real subprocess."""

from __future__ import annotations

import asyncio
import os
import sys

from mcp_servers import TOKEN, SDKServers


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
    out, err = await asyncio.wait_for(process.communicate(), timeout=30)
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
    assert added == (0, "42\n", "")  # --token before the command
    assert echoed == (0, "hi\n", "")  # --token after it
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
