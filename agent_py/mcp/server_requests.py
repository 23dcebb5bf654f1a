"""The answers to requests a server sends the client: ``ping``, and ``elicitation/create``
(form mode) when the client has a handler for it; anything else is METHOD_NOT_FOUND. An
answer that does not match the form's schema never leaves the client."""

from __future__ import annotations

import logging
from collections.abc import Mapping
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


class ElicitationRefused(Exception):
    """The form could not be shown or answered; ``code`` is the JSON-RPC error to say so."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


async def elicit(
    params: Mapping[str, Any], on_elicit: ElicitationHandler, server: str
) -> dict[str, Any]:
    """The ``ElicitResult`` of the user's answer to a form request's ``params``; raises
    :class:`ElicitationRefused` when there is no answer to send."""
    try:
        form = parse_form(server, params)
    except UnsupportedSchemaError as error:
        raise ElicitationRefused(INVALID_PARAMS, f"Cannot ask the user: {error}") from error
    try:
        answer = await on_elicit(form)
    except Exception as error:
        logger.exception("elicitation handler failed")
        raise ElicitationRefused(INTERNAL_ERROR, f"The form failed: {error}") from error
    result: dict[str, Any] = {"action": answer.action}
    if answer.action == "accept":
        content = dict(answer.content or {})
        problems = form.problems(content)
        if problems:
            # Nothing that breaks the schema leaves the client.
            raise ElicitationRefused(
                INTERNAL_ERROR,
                f"The answer does not match the requested schema: {'; '.join(problems)}",
            )
        result["content"] = content
    return result


async def _elicit(
    request: JSONRPCRequest, on_elicit: ElicitationHandler, server: str
) -> JSONRPCResponse | JSONRPCError:
    try:
        result = await elicit(request.params or {}, on_elicit, server)
    except ElicitationRefused as refused:
        return _error_reply(request, refused.code, str(refused))
    return JSONRPCResponse(jsonrpc="2.0", id=request.id, result=result)


def _error_reply(request: JSONRPCRequest, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request.id, error=ErrorData(code=code, message=message))
