"""Talk to an MCP server from a terminal.

    python -m agent_py.mcp URL tools                 list the server's tools
    python -m agent_py.mcp URL call NAME '{"a": 1}'  call one and print what it returned
    python -m agent_py.mcp URL logout                forget this server's OAuth tokens

The token comes from ``--token`` or the ``MCP_TOKEN`` environment variable (which keeps it
out of the process list). ``--timeout`` bounds every request, the handshake included.
Without a token, a server that answers 401 is authorized with OAuth 2.1: the
authorization page opens in the browser (``$BROWSER``; the URL is printed too) and
redirects back to a listener on 127.0.0.1; ``--client-credentials`` uses the client's own
credentials instead. Registrations and tokens are kept per server in
``$XDG_CONFIG_HOME/agent_py/mcp-auth.json`` (``--auth-file``), never printed.
The client speaks the newest MCP revision the server speaks (2026-07-28, stateless, or an
``initialize`` revision down to 2024-11-05); ``--protocol-version`` pins one. The revision
spoken is printed on standard error.
A server that asks the user for values (elicitation) is answered on the terminal, or with
the schema's defaults under ``--yes``. Exit status: 0 success, 1 the tool reported an
error (``isError``), 2 the server could not be reached, answered wrongly, or the command
line was wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcp_types import CallToolResult, Tool

from agent_py.mcp.client import DEFAULT_TOOL_TIMEOUT_S, MCPClient
from agent_py.mcp.errors import MCPError
from agent_py.mcp.handshake import AUTO, SUPPORTED_PROTOCOL_VERSIONS
from agent_py.mcp.host import unusable_reason
from agent_py.mcp.local import cpython_transport
from agent_py.mcp.oauth import OAuthAuthorizer
from agent_py.mcp.oauth_settings import OAuthSettings
from agent_py.mcp.results import content_text
from agent_py.mcp.terminal_auth import FileTokenStore, LoopbackFrontEnd, default_token_file
from agent_py.mcp.terminal_form import terminal_handler
from agent_py.mcp.transport import HTTPTransport

EXIT_OK, EXIT_TOOL_ERROR, EXIT_FAILURE = 0, 1, 2
TOKEN_HINT = "Pass one with --token or in the MCP_TOKEN environment variable."


def _add_options(options: argparse.ArgumentParser, late: bool) -> None:
    """The options, accepted before and after the command. After it, SUPPRESS keeps an
    omitted one from overwriting a value given before the command."""
    help_of = (lambda text: argparse.SUPPRESS) if late else (lambda text: text)
    options.add_argument("--token", help=help_of("bearer token (default: $MCP_TOKEN)"))
    options.add_argument(
        "--timeout",
        type=float,
        help=help_of("seconds for each request, the handshake included (default: 60)"),
    )
    options.add_argument(
        "--yes",
        action="store_true",
        help=help_of("answer the server's questions (elicitation) with the schema's defaults"),
    )
    options.add_argument("--client-id", help=help_of("OAuth: a pre-registered client id"))
    options.add_argument(
        "--client-secret", help=help_of("OAuth: its secret (default: $MCP_CLIENT_SECRET)")
    )
    options.add_argument(
        "--client-metadata-url",
        help=help_of("OAuth: https URL of this client's metadata document (used as client id)"),
    )
    options.add_argument("--scope", help=help_of("OAuth: the scopes to ask for"))
    options.add_argument(
        "--client-credentials",
        action="store_true",
        help=help_of("OAuth: the client credentials grant (needs --client-id and a secret)"),
    )
    options.add_argument(
        "--idp-token-endpoint",
        help=help_of(
            "OAuth cross-app access: the identity provider's token endpoint (the ID token "
            "comes from $MCP_IDP_ID_TOKEN)"
        ),
    )
    options.add_argument(
        "--idp-client-id", help=help_of("OAuth cross-app access: the client id at the IdP")
    )
    options.add_argument(
        "--redirect-port", type=int, help=help_of("OAuth: loopback port (default: any free)")
    )
    options.add_argument(
        "--no-browser",
        action="store_true",
        help=help_of("OAuth: only print the authorization URL"),
    )
    options.add_argument("--auth-file", help=help_of("OAuth: where tokens are kept"))
    options.add_argument(
        "--protocol-version",
        choices=[AUTO, *SUPPORTED_PROTOCOL_VERSIONS],
        help=help_of("the MCP revision to speak (default: auto, the newest the server speaks)"),
    )


def _parser() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    _add_options(options, late=False)
    options.set_defaults(timeout=DEFAULT_TOOL_TIMEOUT_S, protocol_version=AUTO)
    parser = argparse.ArgumentParser(
        prog="python -m agent_py.mcp",
        description="List or call the tools of an MCP server (Streamable HTTP).",
        parents=[options],
    )
    parser.add_argument("url", help="the server's MCP endpoint, e.g. http://127.0.0.1:8000/mcp")
    commands = parser.add_subparsers(dest="command", required=True)
    # Options are accepted after the command too; SUPPRESS keeps an omitted one from
    # overwriting a value given before the command.
    late = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    _add_options(late, late=True)
    commands.add_parser("tools", parents=[late], help="list the tools")
    commands.add_parser("logout", parents=[late], help="forget this server's OAuth tokens")
    call = commands.add_parser("call", parents=[late], help="call a tool")
    call.add_argument("name", help="the tool's name")
    call.add_argument("arguments", nargs="?", default="{}", help="JSON object (default: {})")
    return parser


def schema_summary(schema: dict[str, Any]) -> str:
    """``name: type`` for each property; optional ones marked with ``?``."""
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        return "(no arguments)"
    required = set(schema.get("required") or [])
    parts = []
    for name, spec in properties.items():
        kind = spec.get("type", "any") if isinstance(spec, dict) else "any"
        if isinstance(kind, list):
            kind = " | ".join(str(k) for k in kind)
        parts.append(f"{name}{'' if name in required else '?'}: {kind}")
    return ", ".join(parts)


def format_tools(tools: list[Tool]) -> str:
    if not tools:
        return "The server offers no tools."
    blocks = []
    for tool in tools:
        lines = [tool.name]
        if tool.description:
            lines.extend(f"    {line}" for line in tool.description.strip().splitlines())
        lines.append(f"    arguments: {schema_summary(tool.input_schema)}")
        reason = unusable_reason(tool)
        if reason is not None:
            lines.append(f"    (not offered to the agent: {reason})")
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def describe_revision(client: MCPClient) -> str:
    """The line that says which server this is and which MCP revision it is spoken to in."""
    name = client.server_info.name if client.server_info else client.url
    kind = "stateless" if client.stateless else "session"
    return f"{name}: MCP {client.protocol_version} ({kind})"


def format_result(result: CallToolResult) -> str:
    text = content_text(result.content)
    if result.structured_content is not None and not text:
        text = json.dumps(result.structured_content, indent=2, ensure_ascii=False)
    return text


def url_problem(url: str) -> str | None:
    """What is wrong with an endpoint URL, or None."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a port out of range
    except ValueError as error:
        return f"the URL {url!r} is malformed ({error})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"the URL {url!r} must start with http:// or https:// and name a host"
    return None


def _print_log(level: str, data: Any) -> None:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    print(f"server log ({level}): {text}", file=sys.stderr)


def _authorizer(
    args: argparse.Namespace, transport: HTTPTransport
) -> tuple[OAuthAuthorizer, LoopbackFrontEnd]:
    store = FileTokenStore(Path(args.auth_file) if args.auth_file else default_token_file())
    settings = OAuthSettings(
        client_id=args.client_id,
        client_secret=args.client_secret or os.environ.get("MCP_CLIENT_SECRET") or None,
        client_metadata_url=args.client_metadata_url,
        scope=args.scope,
        grant="client_credentials"
        if args.client_credentials
        else "identity_assertion"
        if args.idp_token_endpoint
        else "authorization_code",
        idp_token_endpoint=args.idp_token_endpoint,
        idp_client_id=args.idp_client_id,
        idp_id_token=os.environ.get("MCP_IDP_ID_TOKEN") or None,
    )
    front_end = LoopbackFrontEnd(port=args.redirect_port or 0, open_browser=not args.no_browser)
    authorizer = OAuthAuthorizer(
        args.url,
        transport,
        settings=settings,
        store=store,
        front_end=front_end,
        timeout_s=args.timeout,
    )
    return authorizer, front_end


async def _run(args: argparse.Namespace) -> int:
    token = args.token if args.token is not None else os.environ.get("MCP_TOKEN")
    transport = cpython_transport()
    authorizer, front_end = _authorizer(args, transport)
    if args.command == "logout":
        authorizer.forget()
        await transport.aclose()
        print(f"Forgot the OAuth tokens of {args.url}.", file=sys.stderr)
        return EXIT_OK
    try:
        return await _use(args, token, transport, None if token else authorizer)
    finally:
        await front_end.close()


async def _use(
    args: argparse.Namespace,
    token: str | None,
    transport: HTTPTransport,
    authorizer: OAuthAuthorizer | None,
) -> int:
    client = MCPClient(
        args.url,
        transport=transport,
        auth=authorizer,
        token=token,
        token_hint=TOKEN_HINT,
        request_timeout_s=args.timeout,
        tool_timeout_s=args.timeout,
        on_elicit=terminal_handler(assume_yes=args.yes),
        on_log=_print_log,
        protocol=args.protocol_version,
    )
    async with client:
        print(describe_revision(client), file=sys.stderr)
        if args.command == "tools":
            print(format_tools(await client.refresh_tools()))
            return EXIT_OK
        result = await client.call_tool(args.name, args.call_arguments)
    output = format_result(result)
    if result.is_error:
        print(output or "The tool reported an error without a message.", file=sys.stderr)
        return EXIT_TOOL_ERROR
    print(output)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    problem = url_problem(args.url)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_FAILURE
    if not args.timeout > 0:
        print("error: --timeout must be a positive number of seconds", file=sys.stderr)
        return EXIT_FAILURE
    if args.command == "call":
        try:
            args.call_arguments = json.loads(args.arguments)
        except ValueError as error:
            print(f"error: the arguments are not valid JSON: {error}", file=sys.stderr)
            return EXIT_FAILURE
        if not isinstance(args.call_arguments, dict):
            print("error: the arguments must be a JSON object, e.g. '{\"a\": 1}'", file=sys.stderr)
            return EXIT_FAILURE
    try:
        return asyncio.run(_run(args))
    except MCPError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
