"""The answers to requests a server sends the client: ``ping``, and ``elicitation/create``
(form mode) when the client has a handler for it; anything else is METHOD_NOT_FOUND. An
answer that does not match the form's schema never leaves the client."""

from __future__ import annotations

import logging
from typing import Any

from mcp_types.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
)

from agent_py.mcp.elicitation import ElicitationHandler, UnsupportedSchemaError, parse_form

logger = logging.getLogger(__name__)


async def reply_to(
    request: JSONRPCRequest, on_elicit: ElicitationHandler | None, server: str
) -> JSONRPCResponse | JSONRPCError:
    """The reply to ``request`` from ``server`` (its name or URL, shown on a form)."""
    # Ping, and elicitation when a handler is set: the only client features declared.
    if request.method == "ping":
        return JSONRPCResponse(jsonrpc="2.0", id=request.id, result={})
    if request.method == "elicitation/create" and on_elicit is not None:
        return await _elicit(request, on_elicit, server)
    return _error_reply(request, METHOD_NOT_FOUND, f"This client does not support {request.method}")


async def _elicit(
    request: JSONRPCRequest, on_elicit: ElicitationHandler, server: str
) -> JSONRPCResponse | JSONRPCError:
    try:
        form = parse_form(server, request.params or {})
    except UnsupportedSchemaError as error:
        return _error_reply(request, INVALID_PARAMS, f"Cannot ask the user: {error}")
    try:
        answer = await on_elicit(form)
    except Exception as error:
        logger.exception("elicitation handler failed")
        return _error_reply(request, INTERNAL_ERROR, f"The form failed: {error}")
    result: dict[str, Any] = {"action": answer.action}
    if answer.action == "accept":
        content = dict(answer.content or {})
        problems = form.problems(content)
        if problems:
            # Nothing that breaks the schema leaves the client.
            return _error_reply(
                request,
                INTERNAL_ERROR,
                f"The answer does not match the requested schema: {'; '.join(problems)}",
            )
        result["content"] = content
    return JSONRPCResponse(jsonrpc="2.0", id=request.id, result=result)


def _error_reply(request: JSONRPCRequest, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request.id, error=ErrorData(code=code, message=message))
