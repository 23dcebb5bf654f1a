"""JSON-RPC 2.0 messages as MCP sends them: one message from decoded JSON
(:func:`parse_message`) and one message to bytes (:func:`encode_message`), with the types
the HTTP binding hands messages around as."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from mcp_types.jsonrpc import (
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)
from pydantic import ValidationError

from agent_py.mcp.errors import MCPProtocolError
from agent_py.mcp.results import describe_validation_error

MessageHandler = Callable[[JSONRPCMessage], Awaitable[None]]
Answer = JSONRPCResponse | JSONRPCError


def parse_message(value: object) -> JSONRPCMessage:
    """One JSON-RPC 2.0 message from decoded JSON, or MCPProtocolError."""
    if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
        raise MCPProtocolError(
            f"The server sent something that is not a JSON-RPC 2.0 message: {snippet(value)}."
        )
    model: type[JSONRPCRequest | JSONRPCNotification | JSONRPCResponse | JSONRPCError]
    if "method" in value:
        model = JSONRPCRequest if "id" in value else JSONRPCNotification
    elif "error" in value:
        model = JSONRPCError
    elif "result" in value:
        model = JSONRPCResponse
    else:
        raise MCPProtocolError(
            f"The server sent a JSON-RPC message with neither a method, a result nor an error: "
            f"{snippet(value)}."
        )
    try:
        return model.model_validate(value)
    except ValidationError as error:
        raise MCPProtocolError(
            f"The server sent a malformed JSON-RPC message ({describe_validation_error(error)})."
        ) from error


def encode_message(message: JSONRPCMessage) -> bytes:
    # Only the fields that were set: ``params`` stays absent rather than null, and JSON
    # nulls inside params and results are kept as the caller wrote them.
    data = message.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def snippet(value: object, limit: int = 80) -> str:
    """The start of something a server sent, quoted, for an error message."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return repr(text if len(text) <= limit else text[:limit] + "...")
