"""Where OAuth keeps what it learns per server URL: the client registration and the tokens
(:class:`StoredAuth`), in a :class:`TokenStore` the host provides (a file in the terminal,
localStorage in the page; :class:`MemoryTokenStore` otherwise). Reprs hide the secrets."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class StoredAuth:
    """What is kept per server: the client registration and the tokens."""

    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    token_auth_method: str | None = None
    redirect_uri: str | None = None
    issuer: str | None = None
    access_token: str | None = field(default=None, repr=False)
    refresh_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None
    scope: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> StoredAuth:
        known = {name: value.get(name) for name in cls.__dataclass_fields__ if name in value}
        return cls(**known)


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
