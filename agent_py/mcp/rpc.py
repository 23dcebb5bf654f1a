"""Sending a request in an MCP session and reading its answer.

:class:`RequestChannel` gives each request its id, routes its progress notifications to
the caller, bounds it in time (cancelling it on the server with
``notifications/cancelled`` when the time runs out or the caller stops waiting), sends it
once more when the server refused the token and the :class:`~agent_py.mcp.auth.Authorizer`
got a better one, and turns a JSON-RPC error into :class:`~agent_py.mcp.errors.MCPRemoteError`.

On a modern (2026-07-28) connection it also stamps the :class:`~agent_py.mcp.stateless.Envelope`
into every request's ``_meta``, asks once more in the version a server names when it
answers ``UnsupportedProtocolVersionError``, sends a request once more when its response
stream broke (the revision has no resumption: a lost request is sent again, as a new
one), and cancels by closing the stream alone (no ``notifications/cancelled`` over HTTP).
How a connection starts is :mod:`agent_py.mcp.handshake`; the HTTP is
:class:`~agent_py.mcp.streamable_http.StreamableHTTPConnection`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Mapping
from typing import Any

from mcp_types import (
    UNSUPPORTED_PROTOCOL_VERSION,
    ProgressNotificationParams,
    ProgressToken,
)
from mcp_types.jsonrpc import (
    METHOD_NOT_FOUND,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
)
from pydantic import ValidationError

from agent_py.mcp.auth import Authorizer
from agent_py.mcp.errors import (
    MCPAuthError,
    MCPConnectionError,
    MCPError,
    MCPRemoteError,
    MCPTimeoutError,
)
from agent_py.mcp.messages import MessageHandler
from agent_py.mcp.stateless import MODERN_VERSIONS, Envelope
from agent_py.mcp.streamable_http import StreamableHTTPConnection

logger = logging.getLogger(__name__)

CANCEL_TIMEOUT_S = 5.0

ProgressHandler = Callable[[float, float | None, str | None], None]
"""Receives ``(progress, total, message)`` of a request's progress notifications."""


class RequestChannel:
    """The requests a client sends in one session; messages that arrive besides their
    answers go to ``on_message``."""

    def __init__(
        self,
        connection: StreamableHTTPConnection,
        on_message: MessageHandler,
        *,
        label: str,
        auth: Authorizer | None,
        request_timeout_s: float,
    ) -> None:
        self.closed = False
        """Set when the client closes: no request is sent after that."""
        self._connection = connection
        self._on_message = on_message
        self._label = label
        self._auth = auth
        self._request_timeout_s = request_timeout_s
        self.envelope: Envelope | None = None
        """Set on a modern connection: stamped into every request's ``_meta``."""
        self._ids = itertools.count(1)
        self._progress: dict[ProgressToken, ProgressHandler] = {}

    def check_open(self) -> None:
        if self.closed:
            raise MCPError(f"{self._label} was disconnected.")

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        timeout_s: float,
        on_progress: ProgressHandler | None,
        what: str,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """:meth:`_exchange`, sent once more (each at most once) when the server refuses the
        token and an authorizer can get a better one (which may take the user's time, so no
        time limit), when a modern server names a version to ask in, and when a modern
        request's stream broke."""
        authorized = renegotiated = reissued = False
        while True:
            try:
                return await self._exchange(method, params, timeout_s, on_progress, what, headers)
            except MCPAuthError as refused:
                if authorized or self._auth is None:
                    raise
                if not await self._auth.challenge(refused.status, refused.www_authenticate):
                    raise
                authorized = True
            except MCPRemoteError as error:
                if renegotiated or not self._renegotiate(error):
                    raise
                renegotiated = True
            except MCPConnectionError as error:
                if reissued or self.envelope is None:
                    raise
                logger.info("%s: %s; sending %s again", self._label, error, what)
                reissued = True

    def _renegotiate(self, error: MCPRemoteError) -> bool:
        """After ``UnsupportedProtocolVersionError`` on a modern connection: switch to the
        newest modern version the server names, if any."""
        if self.envelope is None or error.code != UNSUPPORTED_PROTOCOL_VERSION:
            return False
        mutual = [v for v in MODERN_VERSIONS if v in supported_versions(error.data)]
        if not mutual:
            return False
        version = (
            self.envelope.protocol_version
            if self.envelope.protocol_version in mutual
            else mutual[0]
        )
        self.envelope = self.envelope.with_version(version)
        self._connection.protocol_version = version
        return True

    def subscription(self) -> JSONRPCRequest:
        """A new ``subscriptions/listen`` request for tool-list changes (modern only)."""
        params: dict[str, Any] = {"notifications": {"toolsListChanged": True}}
        if self.envelope is not None:
            params = self.envelope.stamp(params)
        return JSONRPCRequest(
            jsonrpc="2.0", id=next(self._ids), method="subscriptions/listen", params=params
        )

    def report_progress(self, params: Mapping[str, Any]) -> None:
        """A ``notifications/progress``: to the handler of the request it names, if any."""
        try:
            progress = ProgressNotificationParams.model_validate(params)
        except ValidationError:
            logger.info("%s sent a malformed progress notification", self._label)
            return
        handler = self._progress.get(progress.progress_token)
        if handler is not None:
            try:
                handler(progress.progress, progress.total, progress.message)
            except Exception:  # a broken progress display must not break the call
                logger.exception("progress handler failed")

    async def _exchange(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        timeout_s: float,
        on_progress: ProgressHandler | None,
        what: str,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """One request, one answer, within ``timeout_s``."""
        self.check_open()
        request_id = next(self._ids)
        if on_progress is not None:
            params = dict(params or {})
            params["_meta"] = {**params.get("_meta", {}), "progressToken": request_id}
            self._progress[request_id] = on_progress
        if self.envelope is not None:
            params = self.envelope.stamp(params)
        message = (
            JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method)
            if params is None
            else JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=dict(params))
        )
        try:
            async with asyncio.timeout(timeout_s):
                answer = await self._connection.request(
                    message, self._on_message, timeout_s=timeout_s, headers=headers
                )
        except (TimeoutError, MCPTimeoutError) as error:
            await self._cancel(method, request_id, f"no answer within {timeout_s:g} s")
            raise MCPTimeoutError(
                f"{self._label} did not answer {what} within {timeout_s:g} s; "
                "the request was cancelled."
            ) from error
        except asyncio.CancelledError:
            await self._cancel(method, request_id, "the client stopped waiting")
            raise
        finally:
            self._progress.pop(request_id, None)
        if isinstance(answer, JSONRPCError):
            raise self._remote_error(answer.error, what)
        return answer.result

    async def _cancel(self, method: str, request_id: int, reason: str) -> None:
        """Tell the server to stop working on a request (best effort)."""
        if method == "initialize":
            return  # the protocol forbids cancelling initialize
        if self.envelope is not None:
            return  # modern HTTP: closing the request's stream (done) is the cancellation
        notification = JSONRPCNotification(
            jsonrpc="2.0",
            method="notifications/cancelled",
            params={"requestId": request_id, "reason": reason},
        )
        limit = min(CANCEL_TIMEOUT_S, self._request_timeout_s)
        try:
            async with asyncio.timeout(limit):
                await self._connection.send(notification, timeout_s=limit)
        except (MCPError, TimeoutError) as error:
            logger.info("%s: could not cancel request %s: %s", self._label, request_id, error)

    def _remote_error(self, error: ErrorData, what: str) -> MCPRemoteError:
        detail = error.message.strip()
        if error.code == METHOD_NOT_FOUND:
            text = f"{self._label} does not support {what}"
        else:
            text = f"{self._label} answered {what} with an error"
        text += f": {detail} (code {error.code})." if detail else f" (code {error.code})."
        return MCPRemoteError(text, code=error.code, remote_message=error.message, data=error.data)


def supported_versions(data: Any) -> list[str]:
    """The versions an ``UnsupportedProtocolVersionError`` names in ``data.supported``
    (none if it names none; ``requested`` is not needed to act on it)."""
    supported = data.get("supported") if isinstance(data, dict) else None
    if not isinstance(supported, list):
        return []
    return [version for version in supported if isinstance(version, str)]
