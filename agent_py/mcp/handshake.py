"""How a connection starts and which protocol revision it speaks.

Two eras (the 2026-07-28 revision's words):

- **modern** (2026-07-28): no session. Every request carries the protocol version, the
  client's info and its capabilities in ``_meta`` (the :class:`Envelope`); an optional
  ``server/discover`` tells the server's versions, capabilities and identity.
- **legacy** (2024-11-05 to 2025-11-25): a session opened with ``initialize`` (we offer
  the newest we speak and accept any of :data:`HANDSHAKE_VERSIONS` that the server
  answers) and ``notifications/initialized``; the negotiated revision then rides on every
  HTTP request as ``MCP-Protocol-Version``.

:func:`open_session` finds the era the way the revision prescribes for Streamable HTTP:
it sends ``server/discover`` as a modern request and falls back to ``initialize`` unless
the answer is a modern one. An ``UnsupportedProtocolVersionError`` (-32022) names the
server's versions, so a server that lists only legacy ones is met with ``initialize`` at
the newest of them, and one that lists a modern one is asked again in it (that retry is
:class:`~agent_py.mcp.rpc.RequestChannel`'s). The era found is remembered per URL for the
life of the process, so a reconnection does not probe a legacy server again. The client
declares elicitation (form mode) only when it has a handler for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from typing import Any, Final, TypeVar

from mcp_types import (
    UNSUPPORTED_PROTOCOL_VERSION,
    ClientCapabilities,
    DiscoverResult,
    ElicitationCapability,
    FormElicitationCapability,
    Implementation,
    InitializeRequestParams,
    InitializeResult,
    ServerCapabilities,
)
from mcp_types.jsonrpc import JSONRPCNotification
from pydantic import BaseModel, ValidationError

from agent_py.mcp.errors import (
    MCPAuthError,
    MCPConfigError,
    MCPHTTPError,
    MCPProtocolError,
    MCPRemoteError,
)
from agent_py.mcp.results import describe_validation_error
from agent_py.mcp.rpc import RequestChannel, supported_versions
from agent_py.mcp.stateless import MODERN_ERROR_CODES, MODERN_VERSIONS, SERVER_INFO, Envelope
from agent_py.mcp.streamable_http import StreamableHTTPConnection

HANDSHAKE_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""Revisions with an ``initialize`` handshake this client speaks, newest first."""
SUPPORTED_PROTOCOL_VERSIONS: Final = (*MODERN_VERSIONS, *HANDSHAKE_VERSIONS)
"""Every revision this client speaks, newest first."""
AUTO: Final = "auto"
"""Speak the newest revision the server speaks (the default)."""

_ResultT = TypeVar("_ResultT", bound=BaseModel)
_LEGACY_URLS: set[str] = set()
"""Endpoints found to speak only legacy revisions in this process."""


def _package_version() -> str:
    try:
        return metadata.version("agent_py")
    except metadata.PackageNotFoundError:
        return "0.0.0"


CLIENT_INFO: Final = Implementation(name="agent_py", version=_package_version())


@dataclass(frozen=True)
class SessionInfo:
    """What the start of a connection told the client."""

    protocol_version: str
    stateless: bool
    """Modern (per-request ``_meta``, no session) rather than an ``initialize`` session."""
    server_info: Implementation | None
    capabilities: ServerCapabilities
    instructions: str | None


class _Legacy(Exception):
    """The server is not modern; ``version`` is the legacy revision it named, if any."""

    def __init__(self, version: str | None) -> None:
        super().__init__(version)
        self.version = version


async def open_session(
    requests: RequestChannel,
    connection: StreamableHTTPConnection,
    *,
    client_info: Implementation,
    elicitation: bool,
    label: str,
    timeout_s: float,
    version: str = AUTO,
) -> SessionInfo:
    """Start speaking to the server in ``version`` (a revision, or :data:`AUTO`)."""
    if version != AUTO and version not in SUPPORTED_PROTOCOL_VERSIONS:
        raise MCPConfigError(
            f"MCP revision {version!r} is not one this client speaks "
            f"({', '.join(SUPPORTED_PROTOCOL_VERSIONS)})."
        )
    capabilities = ClientCapabilities()
    if elicitation:
        capabilities = ClientCapabilities(
            elicitation=ElicitationCapability(form=FormElicitationCapability())
        )
    if version in HANDSHAKE_VERSIONS:
        return await _initialize(
            requests, connection, client_info, capabilities, label, timeout_s, version
        )
    if version == AUTO and connection.url in _LEGACY_URLS:
        try:
            return await _initialize(
                requests,
                connection,
                client_info,
                capabilities,
                label,
                timeout_s,
                HANDSHAKE_VERSIONS[0],
            )
        except (MCPRemoteError, MCPHTTPError) as error:
            if isinstance(error, MCPAuthError):
                raise
            _LEGACY_URLS.discard(connection.url)  # it may speak the modern revision now
    try:
        return await _discover(
            requests,
            connection,
            Envelope(MODERN_VERSIONS[0] if version == AUTO else version, client_info, capabilities),
            label,
            timeout_s,
        )
    except _Legacy as legacy:
        requests.envelope = None
        connection.reset_session()
        if version != AUTO:
            raise MCPProtocolError(
                f"{label} does not speak MCP {version}"
                + (f" (it speaks {legacy.version})." if legacy.version else ".")
            ) from None
        offer = legacy.version or HANDSHAKE_VERSIONS[0]
        info = await _initialize(
            requests, connection, client_info, capabilities, label, timeout_s, offer
        )
        _LEGACY_URLS.add(connection.url)
        return info


async def _discover(
    requests: RequestChannel,
    connection: StreamableHTTPConnection,
    envelope: Envelope,
    label: str,
    timeout_s: float,
) -> SessionInfo:
    """``server/discover`` as a modern request; :class:`_Legacy` unless it is answered by a
    modern server that shares a modern revision with us."""
    connection.reset_session()
    requests.envelope = envelope
    connection.protocol_version = envelope.protocol_version
    connection.stateless = True
    try:
        raw = await requests.request("server/discover", None, timeout_s, None, "server/discover")
    except MCPAuthError:
        raise
    except MCPRemoteError as error:
        if error.code == UNSUPPORTED_PROTOCOL_VERSION:
            named = supported_versions(error.data)
            legacy = [v for v in HANDSHAKE_VERSIONS if v in named]
            if legacy:
                raise _Legacy(legacy[0]) from error
            raise MCPProtocolError(
                f"{label} speaks MCP {', '.join(named) or 'revisions it does not name'}, "
                f"none of which this client speaks ({', '.join(SUPPORTED_PROTOCOL_VERSIONS)})."
            ) from error
        if error.code in MODERN_ERROR_CODES:
            raise  # a modern server refusing this request for another reason
        raise _Legacy(None) from error
    except MCPHTTPError as error:
        if error.status in (400, 404, 405):  # without a modern JSON-RPC error in the body
            raise _Legacy(None) from error
        raise
    try:
        result = DiscoverResult.model_validate(raw)
    except ValidationError as error:
        raise _Legacy(None) from error
    mutual = [v for v in MODERN_VERSIONS if v in result.supported_versions]
    if not mutual:
        legacy = [v for v in HANDSHAKE_VERSIONS if v in result.supported_versions]
        raise _Legacy(legacy[0] if legacy else None)
    chosen = envelope.protocol_version
    if chosen not in mutual:
        chosen = mutual[0]
        requests.envelope = envelope.with_version(chosen)
        connection.protocol_version = chosen
    return SessionInfo(
        protocol_version=chosen,
        stateless=True,
        server_info=_server_info(raw),
        capabilities=result.capabilities,
        instructions=result.instructions,
    )


def _server_info(raw: dict[str, Any]) -> Implementation | None:
    """The identity a modern server gives in the result's ``_meta`` (some put it beside)."""
    meta = raw.get("_meta")
    candidate = meta.get(SERVER_INFO) if isinstance(meta, dict) else None
    for value in (candidate, raw.get("serverInfo")):
        try:
            return Implementation.model_validate(value)
        except ValidationError:
            continue
    return None


async def _initialize(
    requests: RequestChannel,
    connection: StreamableHTTPConnection,
    client_info: Implementation,
    capabilities: ClientCapabilities,
    label: str,
    timeout_s: float,
    offer: str,
) -> SessionInfo:
    """A legacy session: initialize, then notifications/initialized. A server that answers
    with a revision this client does not speak is left (DELETE) and refused."""
    connection.reset_session()
    requests.envelope = None
    params = InitializeRequestParams(
        protocol_version=offer, capabilities=capabilities, client_info=client_info
    )
    raw = await requests.request(
        "initialize",
        params.model_dump(mode="json", by_alias=True, exclude_none=True),
        timeout_s,
        None,
        "initialize",
    )
    result = _validate(InitializeResult, raw, "initialize", label)
    if result.protocol_version not in HANDSHAKE_VERSIONS:
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
    return SessionInfo(
        protocol_version=result.protocol_version,
        stateless=False,
        server_info=result.server_info,
        capabilities=result.capabilities,
        instructions=result.instructions,
    )


def _validate(model: type[_ResultT], raw: dict[str, Any], what: str, label: str) -> _ResultT:
    try:
        return model.model_validate(raw)
    except ValidationError as error:
        raise MCPProtocolError(
            f"{label} sent an invalid answer to {what} ({describe_validation_error(error)})."
        ) from error
