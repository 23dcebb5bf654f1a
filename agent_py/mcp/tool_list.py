"""Listing a server's tools: ``tools/list`` followed through every ``nextCursor`` page (a
cursor seen twice, or more than :data:`MAX_TOOL_PAGES` pages, is a protocol error), and
each tool validated on its own, so one malformed tool does not hide the others. A tool
whose ``x-mcp-header`` annotations break MCP 2026-07-28's rules is left out too (the
revision requires it), with a warning."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp_types import Tool
from pydantic import ValidationError

from agent_py.mcp.errors import MCPProtocolError
from agent_py.mcp.request_headers import header_problem
from agent_py.mcp.results import describe_validation_error

logger = logging.getLogger(__name__)

MAX_TOOL_PAGES = 100

Request = Callable[[str, Mapping[str, Any] | None], Awaitable[dict[str, Any]]]
"""Sends a request in the session and returns its raw result."""


async def list_tools(request: Request, label: str) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    cursors_seen: set[str] = set()
    for _ in range(MAX_TOOL_PAGES):
        raw = await request("tools/list", {"cursor": cursor} if cursor else None)
        tools.extend(parse_tools(raw.get("tools"), label))
        cursor = raw.get("nextCursor")
        if not cursor:
            return tools
        if not isinstance(cursor, str) or cursor in cursors_seen:
            raise MCPProtocolError(
                f"{label} sent a tool list whose pages never end (cursor {cursor!r})."
            )
        cursors_seen.add(cursor)
    raise MCPProtocolError(f"{label} lists tools on more than {MAX_TOOL_PAGES} pages.")


def parse_tools(raw_tools: Any, label: str) -> list[Tool]:
    if not isinstance(raw_tools, list):
        raise MCPProtocolError(f"{label} answered tools/list without a list of tools.")
    tools = []
    for raw in raw_tools:
        try:
            tool = Tool.model_validate(raw)
        except ValidationError as error:
            # One malformed tool should not hide the others.
            name = raw.get("name") if isinstance(raw, dict) else None
            logger.warning(
                "%s: skipping tool %r: %s", label, name, describe_validation_error(error)
            )
            continue
        problem = header_problem(tool)
        if problem is not None:
            logger.warning("%s: skipping tool %r: %s", label, tool.name, problem)
            continue
        tools.append(tool)
    return tools
