"""Where OAuth keeps what it learns per server URL: the client registrations and the tokens
(:class:`StoredAuth`), in a :class:`TokenStore` the host provides (a file in the terminal,
localStorage in the page; :class:`MemoryTokenStore` otherwise). Reprs hide the secrets.

A registration belongs to the authorization server that issued it, so registrations are
kept by that server's ``issuer`` and never offered to another; tokens name their issuer
too. Records written before registrations were keyed so (one flat registration) are read
as registered with the issuer the record names, or dropped when it names none.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class ClientRegistration:
    """Who this client is at one authorization server."""

    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    token_auth_method: str | None = None
    redirect_uri: str | None = None
    """The redirect URI it was registered with (None: not a dynamic registration)."""

    @classmethod
    def from_json(cls, value: Any) -> ClientRegistration | None:
        """The registration a JSON record describes; None for anything else."""
        client_id = value.get("client_id") if isinstance(value, Mapping) else None
        if not isinstance(client_id, str) or not client_id:
            return None
        return cls(
            client_id,
            _text(value.get("client_secret")),
            _text(value.get("token_auth_method")),
            _text(value.get("redirect_uri")),
        )


@dataclass
class StoredAuth:
    """What is kept per server: the registrations (by issuer) and the tokens."""

    issuer: str | None = None
    """The authorization server that issued the tokens."""
    access_token: str | None = field(default=None, repr=False)
    refresh_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None
    scope: str | None = None
    clients: dict[str, ClientRegistration] = field(default_factory=dict)
    """Dynamic registrations, by the ``issuer`` of the authorization server that made them."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> StoredAuth:
        expires_at = value.get("expires_at")
        stored = cls(
            issuer=_text(value.get("issuer")),
            access_token=_text(value.get("access_token")),
            refresh_token=_text(value.get("refresh_token")),
            expires_at=float(expires_at) if isinstance(expires_at, int | float) else None,
            scope=_text(value.get("scope")),
        )
        clients = value.get("clients")
        if isinstance(clients, Mapping):
            for issuer, record in clients.items():
                client = ClientRegistration.from_json(record)
                if client is not None:
                    stored.clients[str(issuer)] = client
        elif stored.issuer is not None:
            # The earlier flat record: its registration was made with the issuer it names.
            client = ClientRegistration.from_json(value)
            if client is not None:
                stored.clients[stored.issuer] = client
        return stored


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class TokenStore(ABC):
    """Tokens and registrations per server URL."""

    @abstractmethod
    def load(self, server_url: str) -> StoredAuth | None: ...

    @abstractmethod
    def save(self, server_url: str, auth: StoredAuth) -> None: ...

    @abstractmethod
    def forget(self, server_url: str) -> None: ...


class MemoryTokenStore(TokenStore):
    def __init__(self) -> None:
        self._records: dict[str, StoredAuth] = {}

    def load(self, server_url: str) -> StoredAuth | None:
        return self._records.get(server_url)

    def save(self, server_url: str, auth: StoredAuth) -> None:
        self._records[server_url] = auth

    def forget(self, server_url: str) -> None:
        self._records.pop(server_url, None)
