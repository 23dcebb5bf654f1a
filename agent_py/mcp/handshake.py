"""How a session starts and which protocol revision it speaks.

2024-11-05 to 2025-11-25 open a session with ``initialize`` (we offer 2025-11-25 and
accept any of :data:`SUPPORTED_PROTOCOL_VERSIONS` that the server answers) followed by
``notifications/initialized``; the negotiated revision then rides on every HTTP request
as ``MCP-Protocol-Version``. The client declares elicitation (form mode) only when it has
a handler for it.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any, Final, TypeVar

from mcp_types import (
    ClientCapabilities,
    ElicitationCapability,
    FormElicitationCapability,
    Implementation,
    InitializeRequestParams,
    InitializeResult,
)
from mcp_types.jsonrpc import JSONRPCNotification
from pydantic import BaseModel, ValidationError

from agent_py.mcp.errors import MCPProtocolError
from agent_py.mcp.results import describe_validation_error
from agent_py.mcp.rpc import RequestChannel
from agent_py.mcp.streamable_http import StreamableHTTPConnection

SUPPORTED_PROTOCOL_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""Handshake revisions this client speaks, newest first; it offers the first."""

_ResultT = TypeVar("_ResultT", bound=BaseModel)


def _package_version() -> str:
    try:
        return metadata.version("agent_py")
    except metadata.PackageNotFoundError:
        return "0.0.0"


CLIENT_INFO: Final = Implementation(name="agent_py", version=_package_version())


async def open_session(
    requests: RequestChannel,
    connection: StreamableHTTPConnection,
    *,
    client_info: Implementation,
    elicitation: bool,
    label: str,
    timeout_s: float,
) -> InitializeResult:
    """A new session: initialize, then notifications/initialized. A server that answers
    with a revision this client does not speak is left (DELETE) and refused."""
    connection.reset_session()
    capabilities = ClientCapabilities()
    if elicitation:
        capabilities = ClientCapabilities(
            elicitation=ElicitationCapability(form=FormElicitationCapability())
        )
    params = InitializeRequestParams(
        protocol_version=SUPPORTED_PROTOCOL_VERSIONS[0],
        capabilities=capabilities,
        client_info=client_info,
    )
    raw = await requests.request(
        "initialize",
        params.model_dump(mode="json", by_alias=True, exclude_none=True),
        timeout_s,
        None,
        "initialize",
    )
    result = _validate(InitializeResult, raw, "initialize", label)
    if result.protocol_version not in SUPPORTED_PROTOCOL_VERSIONS:
        await connection.terminate()
        raise MCPProtocolError(
            f"{label} speaks MCP {result.protocol_version}, which this client does not "
            f"support (it supports {', '.join(SUPPORTED_PROTOCOL_VERSIONS)})."
        )
    connection.protocol_version = result.protocol_version
    await connection.send(
        JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"),
        timeout_s=timeout_s,
    )
    return result


def _validate(model: type[_ResultT], raw: dict[str, Any], what: str, label: str) -> _ResultT:
    try:
        return model.model_validate(raw)
    except ValidationError as error:
        raise MCPProtocolError(
            f"{label} sent an invalid answer to {what} ({describe_validation_error(error)})."
        ) from error
