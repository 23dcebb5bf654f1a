"""What a request carries in MCP 2026-07-28, the stateless revision (SEP-2575).

There is no session to remember who the client is: every request names its protocol
version, the client's capabilities and (a SHOULD) the client's info in
``params._meta`` under the ``io.modelcontextprotocol/`` keys below. :class:`Envelope` is
that stamp; :class:`~agent_py.mcp.rpc.RequestChannel` puts it on every request of a modern
connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from mcp_types import (
    HEADER_MISMATCH,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    ClientCapabilities,
    Implementation,
)

MODERN_VERSIONS: Final = ("2026-07-28",)
"""Stateless revisions this client speaks, newest first."""

MODERN_ERROR_CODES: Final = frozenset(
    {UNSUPPORTED_PROTOCOL_VERSION, HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY}
)
"""JSON-RPC errors only a modern server sends: an answer with one comes from a modern server."""

PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"


@dataclass(frozen=True)
class Envelope:
    """Who is asking, stamped on every request of a modern connection."""

    protocol_version: str
    client_info: Implementation
    capabilities: ClientCapabilities

    def with_version(self, protocol_version: str) -> Envelope:
        return Envelope(protocol_version, self.client_info, self.capabilities)

    def stamp(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """``params`` with the envelope in its ``_meta`` (the caller's own keys kept)."""
        stamped = dict(params or {})
        meta = stamped.get("_meta")
        stamped["_meta"] = {
            **(meta if isinstance(meta, Mapping) else {}),
            PROTOCOL_VERSION: self.protocol_version,
            CLIENT_CAPABILITIES: self.capabilities.model_dump(
                mode="json", by_alias=True, exclude_none=True
            ),
            CLIENT_INFO: self.client_info.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
        return stamped
