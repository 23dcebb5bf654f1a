"""Reading what a server sends back over Streamable HTTP: the answer to a POSTed request
(:func:`read_json`, :func:`read_events`) and the standalone GET stream (:func:`listen`).

A request is answered either by one JSON body or by an SSE stream that may carry
notifications and server requests before the response; every message besides the answer
goes to the caller's handler.

An SSE stream may stop before the response once the server has sent an event id (SEP-1699,
revision 2025-11-25); the reader then waits the server's ``retry`` time and asks the
caller to resume it (GET with ``Last-Event-ID``). Without an event id, a stream that ends
early is an error. A server may poll this way for as long as a call runs: only streams that
end without delivering anything count towards :data:`MAX_RESUMES`. How a stream is
reopened (headers, session) is the connection's part
(:class:`~agent_py.mcp.streamable_http.StreamableHTTPConnection`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeGuard

from mcp_types.jsonrpc import JSONRPCError, JSONRPCMessage, JSONRPCRequest, JSONRPCResponse

from agent_py.mcp.errors import MCPConnectionError, MCPProtocolError
from agent_py.mcp.messages import Answer, MessageHandler, parse_message, snippet
from agent_py.mcp.results import describe_size
from agent_py.mcp.sse import SSEDecoder, SSEEvent
from agent_py.mcp.transport import HTTPResponse

logger = logging.getLogger(__name__)

MAX_RESUMES = 3
"""Resumptions in a row that deliver nothing before a stream counts as lost."""
DEFAULT_RETRY_S = 0.5
MAX_RETRY_S = 5.0

Resume = Callable[[str], Awaitable[HTTPResponse]]
"""Reopens a request's stream from a ``Last-Event-ID`` (or raises why it cannot)."""
Reopen = Callable[[str], Awaitable[HTTPResponse | None]]
"""Reopens the standalone stream from a ``Last-Event-ID``; None when the server offers none."""


def _answers(message: JSONRPCMessage, request_id: int | str) -> TypeGuard[Answer]:
    if isinstance(message, JSONRPCResponse):
        return message.id == request_id
    # An error with a null id answers "the request", which on this POST is ours.
    return isinstance(message, JSONRPCError) and message.id in (request_id, None)


def _retry_delay(retry_ms: int | None) -> float:
    return min(retry_ms / 1000, MAX_RETRY_S) if retry_ms is not None else DEFAULT_RETRY_S


async def read_json(
    response: HTTPResponse,
    request: JSONRPCRequest,
    on_message: MessageHandler,
    *,
    url: str,
    max_bytes: int,
) -> Answer:
    """The answer in a JSON body (one message or a batch)."""
    body, too_long = await response.read(max_bytes)
    if too_long:
        raise MCPProtocolError(
            f"The server's answer to {request.method} is larger than "
            f"{describe_size(max_bytes)}; it was rejected."
        )
    if not body.strip():
        raise MCPProtocolError(
            f"The server at {url} accepted {request.method} (HTTP {response.status}) "
            "but sent no answer."
        )
    try:
        value = json.loads(body)
    except ValueError as error:
        raise MCPProtocolError(
            f"The server's answer to {request.method} is not valid JSON (it may have been cut "
            f"off, or the URL is not an MCP endpoint); it begins "
            f"{snippet(body[:80].decode('utf-8', 'replace'))}."
        ) from error
    answer = await _take(value, request, on_message)
    if answer is None:
        raise MCPProtocolError(
            f"The server's JSON answer does not contain the response to {request.method}."
        )
    return answer


async def read_events(
    response: HTTPResponse,
    request: JSONRPCRequest,
    on_message: MessageHandler,
    *,
    max_bytes: int,
    resume: Resume,
) -> Answer:
    """The answer in an SSE stream, resumed with ``resume`` when it ends before it."""
    decoder = SSEDecoder(max_event_bytes=max_bytes)
    resumes = 0
    while True:
        broke: MCPConnectionError | None = None
        delivered = False
        try:
            async for chunk in response.chunks():
                for event in decoder.feed(chunk):
                    delivered = True
                    answer = await _take_event(event, request, on_message)
                    if answer is not None:
                        return answer
            for event in decoder.finish():
                delivered = True
                answer = await _take_event(event, request, on_message)
                if answer is not None:
                    return answer
        except MCPConnectionError as error:
            broke = error
        finally:
            await response.aclose()
        # The stream ended without the answer: resume it if the server made that possible.
        # A stream that delivered something was the server polling, not a failure.
        if delivered:
            resumes = 0
        if not decoder.last_event_id or resumes == MAX_RESUMES:
            if broke is not None:
                raise MCPConnectionError(
                    f"The connection broke before the server answered {request.method}. {broke}"
                ) from broke
            where = "in the middle of a message" if decoder.ended_mid_event else "early"
            raise MCPProtocolError(
                f"The server's event stream for {request.method} ended {where}, "
                "before the answer: the answer was cut off."
            )
        resumes += 1
        await asyncio.sleep(_retry_delay(decoder.retry_ms))
        response = await resume(decoder.last_event_id)
        decoder = decoder.resumed()


async def _take_event(
    event: SSEEvent, request: JSONRPCRequest, on_message: MessageHandler
) -> Answer | None:
    # Events of other types are not MCP messages; an event with empty data only
    # primes the stream with an id to resume from.
    if event.event != "message" or not event.data.strip():
        return None
    try:
        value: Any = json.loads(event.data)
    except ValueError as error:
        raise MCPProtocolError(
            f"The server sent an event that is not JSON while answering {request.method}: "
            f"{snippet(event.data)}."
        ) from error
    return await _take(value, request, on_message)


async def _take(value: Any, request: JSONRPCRequest, on_message: MessageHandler) -> Answer | None:
    """Pass decoded messages (one, or a JSON-RPC batch) on; return the answer, if any."""
    answer: Answer | None = None
    for item in value if isinstance(value, list) else [value]:
        message = parse_message(item)
        if _answers(message, request.id):
            answer = message
        else:
            await on_message(message)
    return answer


async def listen(
    response: HTTPResponse,
    on_message: MessageHandler,
    *,
    url: str,
    max_bytes: int,
    reopen: Reopen,
) -> None:
    """Read the standalone stream, handing every message to ``on_message``; reopen it with
    ``reopen`` when it ends, until :data:`MAX_RESUMES` reopenings in a row deliver nothing.
    Returns when the server stops offering it; raises what made it impossible to reopen."""
    decoder = SSEDecoder(max_event_bytes=max_bytes)
    failures = 0
    while True:
        delivered = False
        try:
            async for chunk in response.chunks():
                for event in decoder.feed(chunk):
                    delivered = True
                    await _take_stream_event(event, on_message, url)
            for event in decoder.finish():
                delivered = True
                await _take_stream_event(event, on_message, url)
        except MCPConnectionError as error:
            logger.info("The event stream of %s broke: %s", url, error)
        finally:
            await response.aclose()
        failures = 0 if delivered else failures + 1
        if failures > MAX_RESUMES:
            raise MCPConnectionError(
                f"The event stream of the server at {url} kept ending without a message."
            )
        await asyncio.sleep(_retry_delay(decoder.retry_ms))
        reopened = await reopen(decoder.last_event_id)
        if reopened is None:
            return
        response, decoder = reopened, decoder.resumed()


async def _take_stream_event(event: SSEEvent, on_message: MessageHandler, url: str) -> None:
    if event.event != "message" or not event.data.strip():
        return
    try:
        value: Any = json.loads(event.data)
    except ValueError:
        logger.info("%s sent an event that is not JSON on its stream", url)
        return
    for item in value if isinstance(value, list) else [value]:
        try:
            message = parse_message(item)
        except MCPProtocolError as error:
            logger.info("%s: %s", url, error)
            continue
        await on_message(message)
