"""MCP's Streamable HTTP binding: JSON-RPC messages carried by HTTP requests.

One POST per outgoing message, always with ``Accept: application/json,
text/event-stream``. A request is answered either by one JSON body or by an SSE stream
that may carry notifications and server requests before the response. Notifications and
responses the client sends are answered ``202 Accepted``. The server may assign an
``Mcp-Session-Id`` when it answers ``initialize``; every later message carries it and,
once a version is negotiated, ``MCP-Protocol-Version``. A 404 for a request that carried
a session id means the session is gone
(:class:`~agent_py.mcp.errors.MCPSessionExpiredError`); DELETE ends a session.

:class:`StreamableHTTPConnection` holds the session and sends the requests, resumptions
(GET with ``Last-Event-ID``) included. Reading the answers, and when to resume, is
:mod:`agent_py.mcp.responses`; what a failed status means is :mod:`agent_py.mcp.http_status`.

:meth:`StreamableHTTPConnection.listen` holds the optional standalone GET stream on which
a server sends messages outside any request (405: the server offers none).

A modern (2026-07-28) connection is :attr:`StreamableHTTPConnection.stateless`: no session
id, no standalone GET stream, no resumption; every POST mirrors its method (and target) in
``Mcp-Method`` / ``Mcp-Name`` (:mod:`agent_py.mcp.request_headers`); and a 4xx whose body is
a JSON-RPC error only a modern server sends (a version it does not speak, headers that do
not match the body) is that error, answered like any other.

This module knows the HTTP side only; the protocol (ids, handshake, what messages mean)
lives in :mod:`agent_py.mcp.client`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping

from mcp_types.jsonrpc import (
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)

from agent_py.mcp import responses
from agent_py.mcp.auth import Authorizer
from agent_py.mcp.errors import MCPAuthError, MCPHTTPError, MCPProtocolError
from agent_py.mcp.http_status import TOKEN_HINT, check_status
from agent_py.mcp.messages import Answer, MessageHandler, encode_message, snippet
from agent_py.mcp.request_headers import standard_headers
from agent_py.mcp.stateless import MODERN_ERROR_CODES
from agent_py.mcp.transport import HTTPResponse, HTTPTransport

ACCEPT_ANSWER = "application/json, text/event-stream"

_SESSION_ID = re.compile(r"[\x21-\x7e]+")


def _media_type(response: HTTPResponse) -> str:
    return response.headers.get("content-type", "").split(";")[0].strip().lower()


class StreamableHTTPConnection:
    """The HTTP side of one MCP session with one server."""

    def __init__(
        self,
        url: str,
        transport: HTTPTransport,
        *,
        token: str | None = None,
        auth: Authorizer | None = None,
        token_hint: str = TOKEN_HINT,
        max_message_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self.url = url
        self.transport = transport
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        """Sent as ``MCP-Protocol-Version`` once set (after initialize, or from the start on a
        modern connection)."""
        self.stateless = False
        """A modern connection: request headers mirror the body, nothing is resumed."""
        self._token = token or None
        self._auth = auth
        self._token_hint = token_hint
        self._max_message_bytes = max_message_bytes

    def reset_session(self) -> None:
        """Forget the session and the revision, before the connection starts again."""
        self.session_id = None
        self.protocol_version = None
        self.stateless = False

    async def request(
        self,
        message: JSONRPCRequest,
        on_message: MessageHandler,
        *,
        timeout_s: float | None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """POST a request; pass every other message that arrives to ``on_message``; return
        the response or error that answers it. ``headers`` are added to the POST (a modern
        tool call's ``Mcp-Param-*``)."""
        extra = dict(headers or {})
        if self.stateless:
            extra.update(standard_headers(message.method, message.params))
        try:
            response = await self._exchange(
                "POST", encode_message(message), ACCEPT_ANSWER, timeout_s, message.method, extra
            )
        except MCPHTTPError as error:
            modern = None if isinstance(error, MCPAuthError) else _modern_error(error.body)
            if modern is None:
                raise
            return modern
        try:
            if message.method == "initialize":
                self._take_session_id(response)
            media_type = _media_type(response)
            if media_type == "text/event-stream":

                async def resume(last_event_id: str) -> HTTPResponse:
                    if self.stateless:
                        raise MCPProtocolError(
                            f"The server's event stream for {message.method} ended before "
                            "the answer (MCP 2026-07-28 streams cannot be resumed)."
                        )
                    return await self._resume(last_event_id, message.method, timeout_s)

                return await responses.read_events(
                    response,
                    message,
                    on_message,
                    max_bytes=self._max_message_bytes,
                    resume=resume,
                )
            if media_type in ("application/json", ""):
                return await responses.read_json(
                    response, message, on_message, url=self.url, max_bytes=self._max_message_bytes
                )
            raise MCPProtocolError(
                f"The server at {self.url} answered {message.method} with {media_type} content, "
                "not JSON or an event stream. Is this the URL of an MCP endpoint?"
            )
        finally:
            await response.aclose()

    async def send(
        self,
        message: JSONRPCNotification | JSONRPCResponse | JSONRPCError,
        *,
        timeout_s: float | None,
    ) -> None:
        """POST a notification or a response to a server request (answered 202)."""
        what = message.method if isinstance(message, JSONRPCNotification) else "a response"
        response = await self._exchange(
            "POST", encode_message(message), ACCEPT_ANSWER, timeout_s, what
        )
        await response.aclose()

    async def open_stream(self, *, timeout_s: float | None) -> HTTPResponse | None:
        """Open the standalone GET stream for messages outside any request; None when the
        server offers none (HTTP 405)."""
        try:
            response = await self._exchange(
                "GET", None, "text/event-stream", timeout_s, "the event stream"
            )
        except MCPHTTPError as error:
            if error.status == 405:
                return None
            raise
        if _media_type(response) != "text/event-stream":
            await response.aclose()
            raise MCPProtocolError(
                f"The server at {self.url} answered the GET for its event stream without an "
                "event stream."
            )
        return response

    async def open_subscription(
        self, message: JSONRPCRequest, *, timeout_s: float | None
    ) -> HTTPResponse | None:
        """POST a modern ``subscriptions/listen`` and return its event stream; None when the
        server answers it with anything else (it has no subscriptions)."""
        try:
            response = await self._exchange(
                "POST",
                encode_message(message),
                ACCEPT_ANSWER,
                timeout_s,
                message.method,
                standard_headers(message.method, message.params),
            )
        except MCPHTTPError as error:
            if isinstance(error, MCPAuthError):
                raise
            return None
        if _media_type(response) != "text/event-stream":
            await response.aclose()
            return None
        return response

    async def listen(
        self,
        response: HTTPResponse,
        on_message: MessageHandler,
        *,
        timeout_s: float | None,
        resubscribe: Callable[[], JSONRPCRequest] | None = None,
    ) -> None:
        """Read the stream opened by :meth:`open_stream` (or :meth:`open_subscription`),
        handing every message to ``on_message``; reopen it when it ends (with
        ``Last-Event-ID`` when the server gave ids; a subscription by POSTing
        ``resubscribe()``), until :data:`~agent_py.mcp.responses.MAX_RESUMES` reopenings in
        a row deliver nothing. Returns when the server stops offering it; raises what made
        it impossible to reopen."""

        async def reopen(last_event_id: str) -> HTTPResponse | None:
            if resubscribe is not None:
                return await self.open_subscription(resubscribe(), timeout_s=timeout_s)
            return await self._reopen_stream(last_event_id, timeout_s)

        await responses.listen(
            response, on_message, url=self.url, max_bytes=self._max_message_bytes, reopen=reopen
        )

    async def _reopen_stream(
        self, last_event_id: str, timeout_s: float | None
    ) -> HTTPResponse | None:
        extra = {"Last-Event-ID": last_event_id} if last_event_id else {}
        try:
            response = await self._exchange(
                "GET", None, "text/event-stream", timeout_s, "the event stream", extra
            )
        except MCPHTTPError as error:
            if error.status in (404, 405):  # no stream now, or the session is gone
                return None
            raise
        if _media_type(response) != "text/event-stream":
            await response.aclose()
            return None
        return response

    async def _resume(self, last_event_id: str, what: str, timeout_s: float | None) -> HTTPResponse:
        try:
            response = await self._exchange(
                "GET",
                None,
                "text/event-stream",
                timeout_s,
                f"resuming {what}",
                {"Last-Event-ID": last_event_id},
            )
        except MCPHTTPError as error:
            if error.status == 405:
                raise MCPProtocolError(
                    f"The server's event stream for {what} ended before the answer, and the "
                    "server does not allow resuming it (HTTP 405)."
                ) from error
            raise
        if _media_type(response) != "text/event-stream":
            await response.aclose()
            raise MCPProtocolError(
                f"The server answered the resumption of {what} without an event stream."
            )
        return response

    async def terminate(self, *, timeout_s: float | None = 5.0) -> bool:
        """DELETE the session, if there is one. Best effort: True if the server agreed."""
        if self.session_id is None:
            return False
        try:
            bearer = await self._auth.access_token() if self._auth is not None else None
        except Exception:  # no token, no DELETE: the server ends the session on its own
            bearer = None
        headers = self._headers(ACCEPT_ANSWER, with_body=False, bearer=bearer)
        self.reset_session()
        try:
            response = await self.transport.send("DELETE", self.url, headers, None, timeout_s)
        except Exception:  # the session is forgotten either way
            return False
        await response.aclose()
        return 200 <= response.status < 300

    def _headers(
        self, accept: str, *, with_body: bool, bearer: str | None = None
    ) -> dict[str, str]:
        headers = {"Accept": accept}
        if with_body:
            headers["Content-Type"] = "application/json"
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
        bearer = bearer if bearer is not None else self._token
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        return headers

    async def _exchange(
        self,
        method: str,
        body: bytes | None,
        accept: str,
        timeout_s: float | None,
        what: str,
        extra_headers: Mapping[str, str] | None = None,
    ) -> HTTPResponse:
        """Send one HTTP request and check its status."""
        sent_session = self.session_id
        bearer = await self._auth.access_token() if self._auth is not None else None
        headers = self._headers(accept, with_body=body is not None, bearer=bearer)
        headers.update(extra_headers or {})
        response = await self.transport.send(method, self.url, headers, body, timeout_s)
        try:
            await check_status(
                response,
                url=self.url,
                sent_session=sent_session,
                what=what,
                sent_token=bool(bearer or self._token),
                token_hint=self._token_hint,
            )
        except BaseException:
            await response.aclose()
            raise
        return response

    def _take_session_id(self, response: HTTPResponse) -> None:
        session_id = response.headers.get("mcp-session-id")
        if session_id is None:
            return  # a server without sessions
        if not _SESSION_ID.fullmatch(session_id):
            raise MCPProtocolError(
                f"The server at {self.url} assigned an invalid session id {snippet(session_id)}."
            )
        self.session_id = session_id


def _modern_error(body: str) -> JSONRPCError | None:
    """The JSON-RPC error in an HTTP error's body, if it is one only a modern server sends."""
    try:
        value = json.loads(body)
        error = JSONRPCError.model_validate(value)
    except ValueError:  # not JSON, or not a JSON-RPC error (pydantic's error is a ValueError)
        return None
    return error if error.error.code in MODERN_ERROR_CODES else None
