"""The MCP servers a terminal command adds to the page (``--mcp NAME=URL``, ``--mcp-config
FILE``), and the line it prints for each once the page has connected it (or why not).

Each server becomes an entry of the page's servers list, as the MCP panel saves one: its
name, its Streamable HTTP URL, a bearer token, and the page's own fetch as the transport (the
terminal's browser has no bridge extension). Bad options raise ValueError, which the
commands report as a usage problem (exit code 2).
"""

from __future__ import annotations

import ipaddress
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import urlsplit

from pydantic import ValidationError

from agent_py.cli.browser_launch import NETWORK_VARIABLE
from agent_py.cli.checkout import load_browser_config
from agent_py.mcp.host import MCPServerConfig

if TYPE_CHECKING:
    from agent_py.cli.terminal import PageAgent

STDIO_HINT = (
    "mcp-proxy puts a stdio server on Streamable HTTP with the CORS headers the page needs, "
    "e.g. mcp-proxy --port 8931 --allow-origin '*' -- mcp-server-time, then "
    "--mcp time=http://127.0.0.1:8931/mcp"
)
NAME_RULE = (
    "a server's name may use letters, digits, _ and - (at most 32, no __): it names the "
    "server's tools (name__tool)"
)
STREAMABLE_HTTP_TYPES = ("http", "streamable-http", "streamableHttp")
"""The ``type`` values of a config entry that mean Streamable HTTP (absent means it too)."""


def server_entry(name: str, url: str, token: str | None = None) -> dict[str, Any]:
    """One server as the page's servers list holds it; ValueError (in words) when the name or
    the URL cannot be used. The page's own validation (MCPServerConfig) is the rule."""
    entry: dict[str, Any] = {"name": name, "url": url.strip(), "transport": "fetch"}
    if token:
        entry["token"] = token
    try:
        MCPServerConfig.model_validate(entry)
    except ValidationError as error:
        first = error.errors()[0]
        if first["loc"] and first["loc"][0] == "name":
            raise ValueError(f"MCP server {name!r}: {NAME_RULE}") from None
        why = str(first["msg"]).removeprefix("Value error, ")
        raise ValueError(f"MCP server {name!r}: {why} (got {url!r})") from None
    return entry


def parse_server_option(option: str) -> dict[str, Any]:
    """``--mcp NAME=URL`` as a server entry."""
    name, equals, url = option.partition("=")
    if not equals or not name.strip() or not url.strip():
        raise ValueError(
            f"--mcp {option!r}: write NAME=URL, e.g. --mcp time=http://127.0.0.1:8931/mcp"
        )
    return server_entry(name.strip(), url)


def read_server_config(path: Path) -> list[dict[str, Any]]:
    """The servers of an ``{"mcpServers": {name: {"url": ..., "headers": {...}}}}`` file.
    Entries with ``"disabled": true`` are left out; stdio servers (``command``) and headers
    other than a bearer token are refused."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"--mcp-config {path}: cannot read it: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"--mcp-config {path} is not JSON: {exc}") from None
    servers = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(servers, dict):
        raise ValueError(
            f'--mcp-config {path}: expected {{"mcpServers": {{"NAME": {{"url": "..."}}}}}}'
        )
    entries = []
    for name, spec in servers.items():
        where = f"--mcp-config {path}: server {name!r}"
        if not isinstance(spec, dict):
            raise ValueError(f'{where}: expected an object such as {{"url": "..."}}')
        if spec.get("disabled") is True:
            continue
        if "command" in spec:
            raise ValueError(
                f"{where} is a stdio server (command), which the page cannot start: {STDIO_HINT}"
            )
        kind = spec.get("type", spec.get("transport"))
        if kind is not None and kind not in STREAMABLE_HTTP_TYPES:
            raise ValueError(
                f"{where}: type {kind!r} is not spoken; the page speaks Streamable HTTP "
                "(type 'http'): give the server's Streamable HTTP endpoint"
            )
        url = spec.get("url")
        if not isinstance(url, str) or not url.strip():
            raise ValueError(f"{where} has no url (its Streamable HTTP endpoint)")
        entries.append(server_entry(name, url, bearer_token(spec.get("headers"), where)))
    return entries


def bearer_token(headers: object, where: str) -> str | None:
    """The token of ``{"Authorization": "Bearer …"}``: the only header the page's server
    settings can send. Any other header is refused."""
    if headers is None or headers == {}:
        return None
    if not isinstance(headers, dict):
        raise ValueError(f"{where}: headers must be an object of header names and values")
    token = None
    for header, value in headers.items():
        scheme, _, credential = str(value).strip().partition(" ")
        if header.lower() != "authorization" or scheme.lower() != "bearer" or not credential:
            raise ValueError(
                f"{where}: the page sends a server one header, a bearer token "
                f'("Authorization": "Bearer …"); it cannot send {header!r} as given'
            )
        token = credential.strip()
    return token


def collect_servers(options: list[str], config: Path | None) -> list[dict[str, Any]]:
    """The servers of ``--mcp`` options and a ``--mcp-config`` file, each name once."""
    entries = [parse_server_option(option) for option in options]
    if config is not None:
        entries += read_server_config(config)
    seen: set[str] = set()
    for entry in entries:
        if entry["name"] in seen:
            raise ValueError(f"two MCP servers are named {entry['name']!r}: give each its own")
        seen.add(entry["name"])
    return entries


def off_this_machine(entries: list[dict[str, Any]]) -> list[str]:
    """The URLs of ``entries`` that are not on loopback (the browser must leave it)."""
    return [entry["url"] for entry in entries if not on_loopback(entry["url"])]


def on_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: only localhost is known to stay here
        return False


def describe_server(state: dict[str, Any]) -> str:
    """A server as the MCP panel shows it: connected with its revision and tools, or why not."""
    name = state["name"]
    match state["state"]:
        case "connected":
            count = int(state.get("tool_count") or 0)
            tools = ", ".join(state.get("tools") or [])
            listed = f" ({tools})" if tools else ""
            revision = state.get("protocol_version") or "unknown revision"
            return f"MCP server {name}: MCP {revision}, {count} tool{'s' * (count != 1)}{listed}"
        case "error":
            return f"MCP server {name}: error: {state.get('error') or 'unknown error'}"
        case "sign-in":
            return (
                f"MCP server {name}: asks for an OAuth sign-in, which the terminal cannot "
                'give: pass its token ("headers": {"Authorization": "Bearer …"} in '
                "--mcp-config)"
            )
        case other:
            return f"MCP server {name}: {other} (its tools may be missing from the plan)"


def report_servers(
    agent: PageAgent, servers: list[dict[str, Any]], out: TextIO, err: TextIO
) -> list[str]:
    """Print each of ``servers`` (entries of the page's list) as the MCP panel shows it; the
    names of those that did not connect. For each of them, say on ``err`` why when the cause
    is the browser's reach (its network, CORS, no server at the URL)."""
    wanted = {server["name"]: server["url"] for server in servers}
    states = [state for state in agent.server_states() if state["name"] in wanted]
    for state in states:
        print(describe_server(state), file=out, flush=True)
    failed = [state for state in states if state["state"] != "connected"]
    if not failed:
        return []
    origin = str(agent.page.evaluate("location.origin"))
    loopback_only = bool(load_browser_config().LOOPBACK_ONLY)
    for state in failed:
        if state["state"] == "error":
            why = why_unreachable(wanted[state["name"]], origin, loopback_only=loopback_only)
            if why:
                print(f"MCP server {state['name']}: {why}", file=err, flush=True)
    return [state["name"] for state in failed]


def why_unreachable(url: str, origin: str, *, loopback_only: bool) -> str | None:
    """Why the page (at ``origin``) could not reach the server at ``url``, when the cause is
    the terminal's browser kept on loopback, a server without CORS headers or no server at
    all; None when it is none of these (the page's own error then says it all)."""
    if loopback_only and off_this_machine([{"url": url}]):
        return (
            f"{url} is not on this machine, and the terminal's browser is kept on it "
            f"({NETWORK_VARIABLE}=loopback): unset it, or set it to open"
        )
    return cors_refusal(url, origin)


def cors_refusal(url: str, origin: str, timeout_s: float = 5) -> str | None:
    """Why the page's fetch cannot reach ``url`` when the cause is CORS or a server that is
    not there, asked from CPython (which CORS does not bind); None when neither is the cause.
    """
    preflight = urllib.request.Request(
        url,
        method="OPTIONS",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )
    try:
        with urllib.request.urlopen(preflight, timeout=timeout_s) as response:
            allowed = response.headers.get("Access-Control-Allow-Origin")
    except urllib.error.HTTPError as refusal:
        allowed = refusal.headers.get("Access-Control-Allow-Origin")
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"nothing answers at {url} from this machine either ({reason}): is it running?"
    if allowed in ("*", origin):
        return None
    return (
        f"{url} answers, but sends no CORS headers for the page ({origin}), so the page's "
        "own fetch is refused. The bridge extension reaches such servers from the page "
        "(bash scripts/start.sh; see extension/README.md), but the terminal's browser has "
        "none: serve it with CORS headers (mcp-proxy --allow-origin '*' does for a stdio "
        "server) to use it here"
    )
