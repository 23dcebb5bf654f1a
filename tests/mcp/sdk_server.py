"""A real MCP server (the official ``mcp`` SDK) for the client tests.

Run as ``python sdk_server.py PORT [--token TOKEN] [--json-response]``. It listens on
127.0.0.1 only. Besides its tools it keeps a journal of what it received (methods, the
``MCP-Protocol-Version`` header, cancellations) that the ``journal`` tool returns, so a
test can assert what the client sent.

It keeps its events in memory, so streams can be resumed: ``process_batch`` closes its
own response stream at every checkpoint, as the SDK's ``sse-polling-demo`` does, and
``announce_later`` speaks outside any request: on the standalone GET stream of a 2025
session, on the ``subscriptions/listen`` streams of 2026-07-28 clients. The tools that ask
the user do so with ``elicitation/create`` in a 2025 session and with an ``input_required``
result in 2026-07-28.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
from dataclasses import replace
from typing import Any, Literal

import mcp_types as types
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field

PAGE_SIZE = 4

journal: list[dict[str, Any]] = []


class MemoryEventStore(EventStore):
    """Every event of every stream, kept for replay after ``Last-Event-ID``."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._events: list[tuple[str, str, Any]] = []  # (event id, stream id, message)

    async def store_event(self, stream_id: str, message: Any) -> str:
        event_id = str(next(self._ids))
        self._events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> Any:
        stream = next((s for e, s, _ in self._events if e == last_event_id), None)
        if stream is None:
            return None
        after = False
        for event_id, stream_id, message in self._events:
            if after and stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
            after = after or event_id == last_event_id
        return stream


class Profile(BaseModel):
    """What ``ask_user`` asks for."""

    name: str = Field(description="Your name")
    age: int = Field(default=30, ge=0, le=150, description="Your age")
    subscribe: bool = Field(default=False, description="Send me news")


class Preferences(BaseModel):
    """What ``ask_preferences`` asks for: every answer has a default."""

    colour: Literal["red", "blue"] = "blue"
    count: int = Field(default=3, ge=1, le=9)
    notify: bool = True


class StaticTokenVerifier:
    def __init__(self, token: str) -> None:
        self._token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        if token != self._token:
            return None
        return AccessToken(token=token, client_id="tests", scopes=[])


async def record_and_paginate(
    ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """Journal every inbound message; serve tools/list in pages of PAGE_SIZE."""
    headers = getattr(ctx.request, "headers", None)
    journal.append(
        {
            "method": ctx.method,
            "id": ctx.request_id,
            "params": dict(ctx.params or {}),
            "protocol_header": headers.get("mcp-protocol-version") if headers else None,
            "session": headers.get("mcp-session-id") if headers else None,
            "mcp_method": headers.get("mcp-method") if headers else None,
            "mcp_name": headers.get("mcp-name") if headers else None,
        }
    )
    if ctx.method != "tools/list":
        return await call_next(ctx)
    cursor = (ctx.params or {}).get("cursor")
    start = int(cursor) if cursor else 0
    # The SDK pages on its own terms: ask it for everything (keeping a modern request's
    # _meta, which the 2026-07-28 revision requires) and page here.
    rest = {key: value for key, value in (ctx.params or {}).items() if key != "cursor"}
    result = await call_next(replace(ctx, params=rest))
    if isinstance(result, BaseModel):
        result = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert isinstance(result, dict)
    tools = result["tools"]
    page: dict[str, Any] = {**result, "tools": tools[start : start + PAGE_SIZE]}
    page.pop("nextCursor", None)
    if start + PAGE_SIZE < len(tools):
        page["nextCursor"] = str(start + PAGE_SIZE)
    return page


async def ask(
    ctx: Context, message: str, schema: type[BaseModel]
) -> str | types.InputRequiredResult:
    """Ask the user through the client: with ``elicitation/create`` in a 2025 session, with
    an ``input_required`` round in 2026-07-28 (the answer comes back in the retry)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        answer = await ctx.elicit(message, schema=schema)
        if answer.action == "accept":
            return f"accept {answer.data.model_dump_json()}"
        return answer.action
    response = (ctx.input_responses or {}).get("form")
    if response is None:
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(
                message=message, requested_schema=schema.model_json_schema()
            )
        )
        return types.InputRequiredResult(input_requests={"form": request}, request_state="asked")
    assert ctx.request_state == "asked", ctx.request_state
    result = types.ElicitResult.model_validate(response, from_attributes=True)
    if result.action == "accept":
        return f"accept {schema.model_validate(result.content).model_dump_json()}"
    return result.action


def build_server(token: str | None) -> MCPServer:
    auth: dict[str, Any] = {}
    if token:
        auth = {
            "auth": AuthSettings(
                issuer_url="http://127.0.0.1:9/",  # never contacted: tokens are checked locally
                resource_server_url=None,
            ),
            "token_verifier": StaticTokenVerifier(token),
        }
    server = MCPServer("test-server", middleware=[record_and_paginate], **auth)
    background: set[asyncio.Task[None]] = set()

    @server.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Sleep, reporting progress each step.")
    async def slow(ctx: Context, steps: int = 3, delay_s: float = 0.05) -> str:
        try:
            for step in range(steps):
                await ctx.report_progress(step + 1, steps, f"step {step + 1} of {steps}")
                await asyncio.sleep(delay_s)
        except asyncio.CancelledError:
            journal.append({"method": "slow/cancelled"})
            raise
        return f"slept {steps} steps"

    @server.tool(description="Always fails.")
    def fail(reason: str = "it broke") -> str:
        raise ToolError(reason)

    @server.tool(description="Register a new tool named NAME and announce the change.")
    async def register_tool(ctx: Context, name: str) -> str:
        def greet(who: str) -> str:
            return f"hello {who}"

        server.add_tool(greet, name=name, description="Greets.")
        await ctx.request_context.session.send_notification(
            types.ToolListChangedNotification(), related_request_id=ctx.request_id
        )
        return f"registered {name}"

    @server.tool(description="Process items, closing the response stream at checkpoints.")
    async def process_batch(ctx: Context, items: int = 10, checkpoint_every: int = 2) -> str:
        for item in range(1, items + 1):
            await ctx.report_progress(item, items, f"item {item} of {items}")
            if item % checkpoint_every == 0:
                journal.append({"method": "process_batch/checkpoint", "item": item})
                await ctx.close_sse_stream()
                # The SDK loses an event sent while a resumed stream is being re-registered
                # (its "replay to live tail" window): give the client time to come back first.
                await asyncio.sleep(0.5)
            await asyncio.sleep(0.05)
        return f"processed {items} items"

    @server.tool(description="Later, outside this call: log, add tool NAME, announce it.")
    async def announce_later(ctx: Context, name: str, delay_s: float = 0.3) -> str:
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        session = None if modern else ctx.request_context.session

        async def later() -> None:
            await asyncio.sleep(delay_s)

            def late(x: int) -> int:
                return x

            server.add_tool(late, name=name, description="Arrived later.")
            if session is None:  # 2026-07-28: to subscriptions/listen streams (no logs there)
                await ctx.notify_tools_changed()
                return
            await session.send_log_message("warning", f"added {name}", logger="sdk_server")
            await session.send_tool_list_changed()

        background.add(asyncio.create_task(later()))
        return "later"

    @server.tool(description="Ask the user for a profile and say what came back.")
    async def ask_user(ctx: Context) -> str | types.InputRequiredResult:
        return await ask(ctx, "Who are you?", Profile)

    @server.tool(description="Ask for preferences that all have defaults.")
    async def ask_preferences(ctx: Context) -> str | types.InputRequiredResult:
        return await ask(ctx, "Preferences?", Preferences)

    @server.tool(description="What the server received so far.")
    def journal_entries() -> list[dict[str, Any]]:
        return journal

    for index in range(3):

        def filler(index: int = index) -> int:
            return index

        server.add_tool(filler, name=f"filler_{index}", description="Pads the tool list.")
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--token")
    parser.add_argument("--json-response", action="store_true")
    args = parser.parse_args()
    build_server(args.token).run(
        "streamable-http",
        host="127.0.0.1",
        port=args.port,
        json_response=args.json_response,
        event_store=None if args.json_response else MemoryEventStore(),
        retry_interval=50,
    )


if __name__ == "__main__":
    main()
