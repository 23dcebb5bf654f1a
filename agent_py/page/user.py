"""What the agent needs from the user in the page: OAuth sign-in and elicitation forms (for
the MCP client), and plan review.

The worker registers a JavaScript object (``web/worker/user-port.js``, as the Pyodide module
``agent_user``) whose methods take and return JSON strings and never reject:

``authorize(request_json)`` -> ``{"ok": true, "url"}`` or ``{"ok": false, "error": {"kind",
"message"}}``
    ``request_json`` is ``{"server", "url"}``: the UI offers a "Sign in" button for the
    server (a popup needs the user's click), opens ``url`` in a popup, and answers with the
    URL our callback page (``web/oauth-callback.html``) was sent back to.
``saveAuth(record_json)``
    ``{"url", "record"}``: keep (or, with ``record: null``, drop) a server's registration and
    tokens in the page's storage. The UI hands the kept records back at start
    (:meth:`PageTokenStore.replace`).
``elicit(form_json)`` -> ``{"action", "content"}``
    Show an :class:`~agent_py.mcp.elicitation.ElicitationForm` (``to_json()``) and return what
    the user did.
``reviewPlan(request_json)`` -> a :class:`~agent_py.core.review.ReviewAnswer`
    ``{"plan", "question", "problem", "policy", "tools": {name: {"remote": bool}}}``: show the
    plan for review (``problem``: why the last edit was refused) and return the user's answer.

This module imports nothing from Pyodide, so it is tested in CPython too.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Mapping
from typing import Any, Protocol

from agent_py.mcp.elicitation import ElicitationAnswer, ElicitationForm, ElicitationHandler
from agent_py.mcp.errors import MCPAuthorizationError
from agent_py.mcp.oauth_grants import AuthorizationFrontEnd
from agent_py.mcp.oauth_store import StoredAuth, TokenStore
from agent_py.page.ports import Failure, Reply

CALLBACK_PAGE = "oauth-callback.html"


class UserBridge(Protocol):
    callbackUrl: str
    """The absolute URL of ``web/oauth-callback.html`` (the page's redirect URI)."""

    def authorize(self, request_json: str) -> Awaitable[str]: ...
    def saveAuth(self, record_json: str) -> object: ...
    def elicit(self, form_json: str) -> Awaitable[str]: ...
    def reviewPlan(self, request_json: str) -> Awaitable[str]:
        """Plan review (:mod:`agent_py.page.review`)."""


class PageTokenStore(TokenStore):
    """Records in memory, each change also handed to the page to keep."""

    def __init__(self, user: UserBridge) -> None:
        self._user = user
        self._records: dict[str, StoredAuth] = {}

    def replace(self, records: Mapping[str, Any]) -> None:
        """The records the page kept (``{server url: record}``)."""
        self._records = {
            url: StoredAuth.from_json(record)
            for url, record in records.items()
            if isinstance(record, dict)
        }

    def has(self, server_url: str) -> bool:
        return server_url in self._records

    def load(self, server_url: str) -> StoredAuth | None:
        return self._records.get(server_url)

    def save(self, server_url: str, auth: StoredAuth) -> None:
        self._records[server_url] = auth
        self._user.saveAuth(json.dumps({"url": server_url, "record": auth.to_json()}))

    def forget(self, server_url: str) -> None:
        self._records.pop(server_url, None)
        self._user.saveAuth(json.dumps({"url": server_url, "record": None}))


class SignInReply(Reply):
    """What ``authorize`` resolves to: the URL our callback page was sent back to."""

    url: str | None = None
    error: Failure = Failure(kind="cancelled", message="the sign-in window was closed")


class PopupFrontEnd(AuthorizationFrontEnd):
    """The code flow's user step in the page: a popup, back to our own callback page."""

    def __init__(self, user: UserBridge, *, server: str, redirect_uri: str) -> None:
        self._user = user
        self._server = server
        self._redirect_uri = redirect_uri

    async def redirect_uri(self) -> str:
        return self._redirect_uri

    async def authorize(self, url: str) -> str:
        raw = await self._user.authorize(json.dumps({"server": self._server, "url": url}))
        try:
            reply = SignInReply.model_validate_json(str(raw))
        except ValueError:
            raise MCPAuthorizationError(
                "The page sent an unreadable answer to the sign-in."
            ) from None
        if not reply.ok or reply.url is None:
            raise MCPAuthorizationError(
                f"Signing in to {self._server!r} did not finish: {reply.error.message}."
            )
        return reply.url


def page_elicitation(user: UserBridge) -> ElicitationHandler:
    """An elicitation handler that shows the form in the page."""

    async def elicit(form: ElicitationForm) -> ElicitationAnswer:
        raw = await user.elicit(json.dumps(form.to_json()))
        try:
            reply = json.loads(str(raw))
        except ValueError:
            reply = {}
        action = reply.get("action") if isinstance(reply, dict) else None
        if action == "accept" and isinstance(reply.get("content"), dict):
            return ElicitationAnswer("accept", reply["content"])
        return ElicitationAnswer("decline" if action == "decline" else "cancel")

    return elicit
