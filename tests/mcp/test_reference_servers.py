"""The MCP project's reference servers (time, fetch, git), each behind mcp-proxy as the suite
starts them (agent_py.evals.reference_servers), reached with the project's own MCP client:
their tools are listed and a call answers as the suite's tasks expect; the fixtures they read
(loopback pages, a made repository) are what the task files say; a server that cannot run
says so, and a stopped one leaves no process behind."""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_types import CallToolResult, TextContent

from agent_py.cli.terminal import SetupError
from agent_py.evals import reference_servers
from agent_py.evals.reference_servers import (
    SETUP,
    make_repository,
    missing_install,
    reference_server,
    site_server,
)
from agent_py.evals.suite import HELD_OUT_FILE, load_fixtures
from agent_py.mcp import MCPClient
from tests.needs import need

PAGES = {
    "/shop/kettle.html": {
        "type": "text/html; charset=utf-8",
        "body": "<html><head><title>Kettle</title></head><body><h1>Steel kettle</h1>"
        "<p>Price: <strong>34.90 EUR</strong></p></body></html>",
    }
}
REPO = {
    "commits": [
        {
            "author": "Ravi Menon",
            "email": "ravi@example.org",
            "date": "2026-03-02T10:15:00+00:00",
            "message": "Start the recipe collection",
            "files": {"README.md": "# Family recipes\n"},
        },
        {
            "author": "Dana Okafor",
            "email": "dana@example.org",
            "date": "2026-03-09T08:05:00+01:00",
            "message": "Add the miso soup recipe",
            "files": {"recipes/miso.md": "# Miso soup\n"},
        },
    ]
}


@pytest.fixture
def installed() -> None:
    need(missing_install(), SETUP)


async def list_and_call(url: str, tool: str, arguments: dict[str, Any]) -> tuple[set[str], Any]:
    async with MCPClient(url) as client:
        names = {listed.name for listed in await client.refresh_tools()}
        return names, await client.call_tool(tool, arguments)


def text_of(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def processes() -> dict[int, tuple[int, list[bytes]]]:
    """Each running process (zombies left out): its parent and its command line."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if proc.name.isdigit() and fields[0] != "Z":
            found[int(proc.name)] = (int(fields[1]), argv)
    return found


def proxy_and_server(url: str) -> set[int]:
    """The mcp-proxy process that serves ``url`` and the processes it started."""
    port = url.rsplit(":", 1)[1].split("/", 1)[0].encode()
    running = processes()
    proxies = {pid for pid, (_, argv) in running.items() if b"--port" in argv and port in argv}
    return proxies | {pid for pid, (parent, _) in running.items() if parent in proxies}


@pytest.fixture
def repository(tmp_path: Path) -> Iterator[Path]:
    yield make_repository(REPO, tmp_path / "repo")


@pytest.mark.usefixtures("installed")
async def test_the_time_server_converts_tokyo_to_kolkata(tmp_path: Path) -> None:
    with reference_server("time", tmp_path) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        names, result = await list_and_call(
            url,
            "convert_time",
            {"source_timezone": "Asia/Tokyo", "time": "09:30", "target_timezone": "Asia/Kolkata"},
        )
    assert {"get_current_time", "convert_time"} <= names
    assert not result.is_error, text_of(result)
    assert result.structured_content["target"]["datetime"].endswith("T06:00:00+05:30")
    assert (tmp_path / "time-server.log").exists()


@pytest.mark.usefixtures("installed")
async def test_the_fetch_server_reads_a_loopback_page_and_fails_a_missing_one(
    tmp_path: Path,
) -> None:
    with site_server(PAGES) as site, reference_server("fetch", tmp_path) as url:
        names, page = await list_and_call(url, "fetch", {"url": f"{site}/shop/kettle.html"})
        _, missing = await list_and_call(url, "fetch", {"url": f"{site}/shop/hours.html"})
    assert names == {"fetch"}
    assert not page.is_error and "34.90 EUR" in text_of(page)
    assert missing.is_error and "404" in text_of(missing)


@pytest.mark.usefixtures("installed")
async def test_the_git_server_names_the_last_author_of_a_made_repository(
    tmp_path: Path, repository: Path
) -> None:
    with reference_server("git", tmp_path, repository=repository) as url:
        names, log = await list_and_call(
            url, "git_log", {"repo_path": str(repository), "max_count": 10}
        )
    assert "git_log" in names
    authors = [line for line in text_of(log).splitlines() if line.startswith("Author:")]
    assert authors == ["Author: Dana Okafor", "Author: Ravi Menon"]


@pytest.mark.usefixtures("installed")
def test_a_stopped_server_leaves_no_process_behind(tmp_path: Path) -> None:
    with reference_server("time", tmp_path) as url:
        started = proxy_and_server(url)
        commands = [b" ".join(processes()[pid][1]) for pid in started]
        assert len(started) == 2, commands
        assert any(b"servers/bin/mcp-server-time" in command.split()[1] for command in commands)
    assert not started & set(processes())


@pytest.mark.usefixtures("installed")
def test_a_server_that_exits_is_a_setup_error_with_its_log(tmp_path: Path) -> None:
    not_a_repository = tmp_path / "empty"
    not_a_repository.mkdir()
    with (
        pytest.raises(SetupError, match="reference server 'git' exited"),
        reference_server("git", tmp_path, repository=not_a_repository),
    ):
        pass


def test_a_missing_install_says_to_run_the_setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reference_servers, "PROXY", tmp_path / "no-proxy")
    with (
        pytest.raises(SetupError, match=r"no-proxy not installed.*bash scripts/setup\.sh"),
        reference_server("time", tmp_path),
    ):
        pass
    with (
        pytest.raises(ValueError, match="no reference server named 'weather'"),
        reference_server("weather", tmp_path),
    ):
        pass


def test_the_site_serves_its_pages_and_404_for_anything_else() -> None:
    with site_server(load_fixtures(HELD_OUT_FILE).site) as site:
        assert not site.endswith("/")
        with urllib.request.urlopen(f"{site}/blog/rivers.html") as answer:
            assert answer.headers["Content-Type"] == "text/html; charset=utf-8"
            assert b"Why Rivers Bend" in answer.read()
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(f"{site}/blog/")


def test_a_made_repository_has_the_commits_as_written_and_the_same_ids(tmp_path: Path) -> None:
    first = make_repository(REPO, tmp_path / "a")
    again = make_repository(REPO, tmp_path / "b")

    def log(repo: Path) -> list[str]:
        done = subprocess.run(
            ["git", "-C", str(repo), "log", "--format=%H|%an|%ae|%aI|%cn|%cI|%s"],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.splitlines()

    assert first.is_absolute() and log(first) == log(again)
    lines = [line.split("|", 1)[1] for line in log(first)]
    assert lines == [
        "Dana Okafor|dana@example.org|2026-03-09T08:05:00+01:00|Dana Okafor|"
        "2026-03-09T08:05:00+01:00|Add the miso soup recipe",
        "Ravi Menon|ravi@example.org|2026-03-02T10:15:00+00:00|Ravi Menon|"
        "2026-03-02T10:15:00+00:00|Start the recipe collection",
    ]
    assert (first / "recipes" / "miso.md").read_text() == "# Miso soup\n"
    with pytest.raises(ValueError, match="not empty"):
        make_repository(REPO, first)
