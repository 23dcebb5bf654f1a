"""Multi round-trip requests (MCP 2026-07-28, SEP-2322).

A modern server that needs something from the user in the middle of ``tools/call``,
``prompts/get`` or ``resources/read`` does not send a request of its own: it answers with
``resultType: "input_required"`` and a map of ``inputRequests``. The client gathers the
answers and sends the original request again, as a new request, with ``inputResponses``
(keyed the same) and the server's opaque ``requestState`` echoed byte for byte (and no
``requestState`` when the server sent none). :func:`complete` runs those rounds.

Elicitation (form mode) reaches the same form the user sees for a legacy server's
``elicitation/create``. Sampling and roots are never declared by this client, so a server
that asks for them breaks the protocol and the request fails saying so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from mcp_types import InputRequiredResult
from pydantic import ValidationError

from agent_py.mcp.elicitation import ElicitationHandler
from agent_py.mcp.errors import MCPError, MCPProtocolError
from agent_py.mcp.results import describe_validation_error
from agent_py.mcp.server_requests import ElicitationRefused, elicit

MAX_ROUNDS: Final = 8
"""Rounds of input one request may ask for before the client gives up on it."""
INPUT_METHODS: Final = ("tools/call", "prompts/get", "resources/read")
"""The requests a server may answer with ``input_required``."""

Send = Callable[[Mapping[str, Any] | None], Awaitable[dict[str, Any]]]
"""Sends the request with the given params, as a new request, and returns its raw result."""


async def complete(
    method: str,
    params: Mapping[str, Any] | None,
    send: Send,
    *,
    on_elicit: ElicitationHandler | None,
    server: str,
    label: str,
    what: str,
) -> dict[str, Any]:
    """The complete result of ``method``, answering the server's input requests round by
    round (each retry carries only this round's answers and state)."""
    result = await send(params)
    for _ in range(MAX_ROUNDS):
        if result.get("resultType") != "input_required":
            return result  # "complete", or absent (an earlier revision's server)
        if method not in INPUT_METHODS:
            raise MCPProtocolError(
                f"{label} asked for input in answer to {what}, which the protocol does not allow."
            )
        try:
            needed = InputRequiredResult.model_validate(result)
        except ValidationError as error:
            raise MCPProtocolError(
                f"{label} asked for input for {what} in an invalid form "
                f"({describe_validation_error(error)})."
            ) from error
        retry = dict(params or {})
        answers = {
            key: await _answer(request.method, request.params, on_elicit, server, label, what)
            for key, request in (needed.input_requests or {}).items()
        }
        if answers:
            retry["inputResponses"] = answers
        if needed.request_state is not None:
            retry["requestState"] = needed.request_state
        result = await send(retry)
    if result.get("resultType") == "input_required":
        raise MCPError(
            f"{label} kept asking for more input for {what} ({MAX_ROUNDS} rounds); "
            "the request was given up."
        )
    return result


async def _answer(
    method: str,
    params: Any,
    on_elicit: ElicitationHandler | None,
    server: str,
    label: str,
    what: str,
) -> dict[str, Any]:
    if method != "elicitation/create" or on_elicit is None:
        raise MCPProtocolError(
            f"{label} asked for {method} to complete {what}, which this client did not offer."
        )
    raw = params.model_dump(mode="json", by_alias=True, exclude_none=True)
    try:
        return await elicit(raw, on_elicit, server)
    except ElicitationRefused as refused:
        raise MCPError(f"{label} asked the user for input for {what}: {refused}") from refused
