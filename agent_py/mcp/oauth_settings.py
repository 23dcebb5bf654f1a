"""How this client is a client of a server's authorization server: the settings a host
gives :class:`~agent_py.mcp.oauth.OAuthAuthorizer` (registration and grant)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Grant = Literal["authorization_code", "client_credentials", "identity_assertion"]
DEFAULT_CLIENT_NAME = "agent_py"


@dataclass
class OAuthSettings:
    """How to be a client of a server's authorization server."""

    client_id: str | None = None
    """A pre-registered client; when None, metadata documents or dynamic registration."""
    client_secret: str | None = field(default=None, repr=False)
    client_issuer: str | None = None
    """The ``issuer`` of the authorization server that issued ``client_id``; when given, the
    client is not offered to any other."""
    client_metadata_url: str | None = None
    """An https URL whose JSON document describes this client (it becomes the client id
    where the authorization server supports Client ID Metadata Documents)."""
    scope: str | None = None
    """Scopes to ask for, instead of those the server suggests."""
    grant: Grant = "authorization_code"
    client_name: str = DEFAULT_CLIENT_NAME
    idp_token_endpoint: str | None = None
    """``identity_assertion``: the identity provider's token endpoint."""
    idp_client_id: str | None = None
    idp_id_token: str | None = field(default=None, repr=False)
    """``identity_assertion``: the user's ID token from that identity provider."""
