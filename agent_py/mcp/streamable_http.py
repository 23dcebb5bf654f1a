"""MCP's Streamable HTTP binding: JSON-RPC messages carried by HTTP requests.

One POST per outgoing message, always with ``Accept: application/json,
text/event-stream``. A request is answered either by one JSON body or by an SSE stream
that may carry notifications and server requests before the response. Notifications and
responses the client sends are answered ``202 Accepted``. The server may assign an
``Mcp-Session-Id`` when it answers ``initialize``; every later message carries it and,
once a version is negotiated, ``MCP-Protocol-Version``. A 404 for a request that carried
a session id means the session is gone (:class:`MCPSessionExpiredError`); DELETE ends a
session.

An SSE stream may stop before the response once the server has sent an event id (SEP-1699,
revision 2025-11-25); the binding then waits the server's ``retry`` time and resumes with
GET and ``Last-Event-ID``. Without an event id, a stream that ends early is an error.
A server may poll this way for as long as a call runs: only streams that end without
delivering anything count towards :data:`MAX_RESUMES`.

:meth:`StreamableHTTPConnection.listen` holds the optional standalone GET stream on which
a server sends messages outside any request (405: the server offers none).

This module knows the HTTP side only; the protocol (ids, handshake, what messages mean)
lives in :mod:`agent_py.mcp.client`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeGuard

from mcp_types.jsonrpc import (
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)
from pydantic import ValidationError

from agent_py.mcp.auth import Authorizer
from agent_py.mcp.errors import (
    MCPAuthError,
    MCPConnectionError,
    MCPHTTPError,
    MCPProtocolError,
    MCPSessionExpiredError,
)
from agent_py.mcp.results import describe_size, describe_validation_error
from agent_py.mcp.sse import SSEDecoder, SSEEvent
from agent_py.mcp.transport import HTTPResponse, HTTPTransport

logger = logging.getLogger(__name__)

MessageHandler = Callable[[JSONRPCMessage], Awaitable[None]]
Answer = JSONRPCResponse | JSONRPCError

ACCEPT_ANSWER = "application/json, text/event-stream"
MAX_RESUMES = 3
"""Resumptions in a row that deliver nothing before a stream counts as lost."""
DEFAULT_RETRY_S = 0.5
MAX_RETRY_S = 5.0
ERROR_BODY_LIMIT = 4096
TOKEN_HINT = "Add one in this server's settings."
"""What a user without a token should do; the terminal command names its own option."""
_SESSION_ID = re.compile(r"[\x21-\x7e]+")


def parse_message(value: object) -> JSONRPCMessage:
    """One JSON-RPC 2.0 message from decoded JSON, or MCPProtocolError."""
    if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
        raise MCPProtocolError(
            f"The server sent something that is not a JSON-RPC 2.0 message: {_snippet(value)}."
        )
    model: type[JSONRPCRequest | JSONRPCNotification | JSONRPCResponse | JSONRPCError]
    if "method" in value:
        model = JSONRPCRequest if "id" in value else JSONRPCNotification
    elif "error" in value:
        model = JSONRPCError
    elif "result" in value:
        model = JSONRPCResponse
    else:
        raise MCPProtocolError(
            f"The server sent a JSON-RPC message with neither a method, a result nor an error: "
            f"{_snippet(value)}."
        )
    try:
        return model.model_validate(value)
    except ValidationError as error:
        raise MCPProtocolError(
            f"The server sent a malformed JSON-RPC message ({describe_validation_error(error)})."
        ) from error


def encode_message(message: JSONRPCMessage) -> bytes:
    # Only the fields that were set: ``params`` stays absent rather than null, and JSON
    # nulls inside params and results are kept as the caller wrote them.
    data = message.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _snippet(value: object, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _answers(message: JSONRPCMessage, request_id: int | str) -> TypeGuard[Answer]:
    if isinstance(message, JSONRPCResponse):
        return message.id == request_id
    # An error with a null id answers "the request", which on this POST is ours.
    return isinstance(message, JSONRPCError) and message.id in (request_id, None)


def _retry_delay(retry_ms: int | None) -> float:
    return min(retry_ms / 1000, MAX_RETRY_S) if retry_ms is not None else DEFAULT_RETRY_S


def _media_type(response: HTTPResponse) -> str:
    return response.headers.get("content-type", "").split(";")[0].strip().lower()


def _error_detail(body: bytes) -> str:
    """What an error body says, in one short line, if it says anything readable."""
    text = body.decode("utf-8", "replace").strip()
    if not text:
        return ""
    try:
        value = json.loads(text)
    except ValueError:
        if text.startswith("<"):
            return ""  # an HTML error page
        return text.splitlines()[0][:200]
    if not isinstance(value, dict):
        return ""
    error = value.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    for key in ("error_description", "message", "detail"):
        if isinstance(value.get(key), str):
            return str(value[key])
    return error if isinstance(error, str) else ""


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
        """Sent as ``MCP-Protocol-Version`` once set (after initialize)."""
        self._token = token or None
        self._auth = auth
        self._token_hint = token_hint
        self._max_message_bytes = max_message_bytes

    def reset_session(self) -> None:
        """Forget the session, before a new ``initialize``."""
        self.session_id = None
        self.protocol_version = None

    async def request(
        self, message: JSONRPCRequest, on_message: MessageHandler, *, timeout_s: float | None
    ) -> Answer:
        """POST a request; pass every other message that arrives to ``on_message``; return
        the response or error that answers it."""
        response = await self._exchange(
            "POST", encode_message(message), ACCEPT_ANSWER, timeout_s, message.method
        )
        try:
            if message.method == "initialize":
                self._take_session_id(response)
            media_type = _media_type(response)
            if media_type == "text/event-stream":
                return await self._read_events(response, message, on_message, timeout_s)
            if media_type in ("application/json", ""):
                return await self._read_json(response, message, on_message)
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

    async def listen(
        self,
        response: HTTPResponse,
        on_message: MessageHandler,
        *,
        timeout_s: float | None,
    ) -> None:
        """Read the standalone stream opened by :meth:`open_stream`, handing every message to
        ``on_message``; reopen it (with ``Last-Event-ID`` when the server gave ids) when it
        ends, until :data:`MAX_RESUMES` reopenings in a row deliver nothing. Returns when
        the server stops offering it; raises what made it impossible to reopen."""
        decoder = SSEDecoder(max_event_bytes=self._max_message_bytes)
        failures = 0
        while True:
            delivered = False
            try:
                async for chunk in response.chunks():
                    for event in decoder.feed(chunk):
                        delivered = True
                        await self._take_stream_event(event, on_message)
                for event in decoder.finish():
                    delivered = True
                    await self._take_stream_event(event, on_message)
            except MCPConnectionError as error:
                logger.info("The event stream of %s broke: %s", self.url, error)
            finally:
                await response.aclose()
            failures = 0 if delivered else failures + 1
            if failures > MAX_RESUMES:
                raise MCPConnectionError(
                    f"The event stream of the server at {self.url} kept ending without a message."
                )
            await asyncio.sleep(_retry_delay(decoder.retry_ms))
            reopened = await self._reopen_stream(decoder.last_event_id, timeout_s)
            if reopened is None:
                return
            response, decoder = reopened, decoder.resumed()

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

    async def _take_stream_event(self, event: SSEEvent, on_message: MessageHandler) -> None:
        if event.event != "message" or not event.data.strip():
            return
        try:
            value: Any = json.loads(event.data)
        except ValueError:
            logger.info("%s sent an event that is not JSON on its stream", self.url)
            return
        for item in value if isinstance(value, list) else [value]:
            try:
                message = parse_message(item)
            except MCPProtocolError as error:
                logger.info("%s: %s", self.url, error)
                continue
            await on_message(message)

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
            await self._check_status(
                response, sent_session, what, sent_token=bool(bearer or self._token)
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
                f"The server at {self.url} assigned an invalid session id {_snippet(session_id)}."
            )
        self.session_id = session_id

    async def _check_status(
        self, response: HTTPResponse, sent_session: str | None, what: str, *, sent_token: bool
    ) -> None:
        status = response.status
        if 200 <= status < 300:
            return
        body, _ = await response.read(ERROR_BODY_LIMIT)
        text = body.decode("utf-8", "replace")
        detail = _error_detail(body)
        said = f" The server said: {detail}" if detail else ""
        # 404 is the spec's answer for a session the server no longer knows; some servers
        # (server-everything) answer 400 and name the session instead.
        if sent_session is not None and (
            status == 404 or (status == 400 and "session" in detail.lower())
        ):
            raise MCPSessionExpiredError(
                f"The server at {self.url} ended the session (HTTP {status}).{said}",
                session_id=sent_session,
                status=status,
                body=text,
            )
        where = f"The server at {self.url}"
        challenge = response.headers.get("www-authenticate", "")
        if status == 401:
            if not sent_token:
                message = f"{where} needs a token (HTTP 401). {self._token_hint}"
            else:
                message = f"{where} refused the token (HTTP 401). {self._token_hint}"
            raise MCPAuthError(message + said, status=status, body=text, www_authenticate=challenge)
        if status == 403:
            raise MCPAuthError(
                f"{where} refused access (HTTP 403 Forbidden): the token may lack a permission, "
                f"or the server does not accept requests from this origin.{said}",
                status=status,
                body=text,
                www_authenticate=challenge,
            )
        if status == 404:
            message = (
                f"Nothing answers at {self.url} (HTTP 404 Not Found). Check the server URL "
                "(MCP endpoints often end in /mcp)."
            )
        elif status == 405:
            message = (
                f"{where} does not accept this request (HTTP 405 Method Not Allowed): it may not "
                "be a Streamable HTTP MCP endpoint (servers from before 2025-03-26 use the older "
                "HTTP+SSE transport, which is not supported)."
            )
        elif 300 <= status < 400:
            location = response.headers.get("location", "another URL")
            message = (
                f"{where} redirects to {location} (HTTP {status}). Use that URL in the server's "
                "settings."
            )
        elif status == 400:
            message = f"{where} rejected {what} as a bad request (HTTP 400)."
        elif status == 429:
            message = f"{where} is receiving too many requests (HTTP 429). Try again later."
        elif status >= 500:
            message = f"{where} failed with HTTP {status}. Try again later."
        else:
            message = f"{where} answered {what} with HTTP {status}."
        raise MCPHTTPError(message + said, status=status, body=text)

    async def _read_json(
        self, response: HTTPResponse, request: JSONRPCRequest, on_message: MessageHandler
    ) -> Answer:
        body, too_long = await response.read(self._max_message_bytes)
        if too_long:
            raise MCPProtocolError(
                f"The server's answer to {request.method} is larger than "
                f"{describe_size(self._max_message_bytes)}; it was rejected."
            )
        if not body.strip():
            raise MCPProtocolError(
                f"The server at {self.url} accepted {request.method} (HTTP {response.status}) "
                "but sent no answer."
            )
        try:
            value = json.loads(body)
        except ValueError as error:
            raise MCPProtocolError(
                f"The server's answer to {request.method} is not valid JSON (it may have been cut "
                f"off, or the URL is not an MCP endpoint); it begins "
                f"{_snippet(body[:80].decode('utf-8', 'replace'))}."
            ) from error
        answer = await self._take(value, request, on_message)
        if answer is None:
            raise MCPProtocolError(
                f"The server's JSON answer does not contain the response to {request.method}."
            )
        return answer

    async def _read_events(
        self,
        response: HTTPResponse,
        request: JSONRPCRequest,
        on_message: MessageHandler,
        timeout_s: float | None,
    ) -> Answer:
        decoder = SSEDecoder(max_event_bytes=self._max_message_bytes)
        resumes = 0
        while True:
            broke: MCPConnectionError | None = None
            delivered = False
            try:
                async for chunk in response.chunks():
                    for event in decoder.feed(chunk):
                        delivered = True
                        answer = await self._take_event(event, request, on_message)
                        if answer is not None:
                            return answer
                for event in decoder.finish():
                    delivered = True
                    answer = await self._take_event(event, request, on_message)
                    if answer is not None:
                        return answer
            except MCPConnectionError as error:
                broke = error
            finally:
                await response.aclose()
            # The stream ended without the answer: resume it if the server made that possible.
            # A stream that delivered something was the server polling, not a failure.
            if delivered:
                resumes = 0
            if not decoder.last_event_id or resumes == MAX_RESUMES:
                if broke is not None:
                    raise MCPConnectionError(
                        f"The connection broke before the server answered {request.method}. {broke}"
                    ) from broke
                where = "in the middle of a message" if decoder.ended_mid_event else "early"
                raise MCPProtocolError(
                    f"The server's event stream for {request.method} ended {where}, "
                    "before the answer: the answer was cut off."
                )
            resumes += 1
            await asyncio.sleep(_retry_delay(decoder.retry_ms))
            response = await self._resume(decoder.last_event_id, request.method, timeout_s)
            decoder = decoder.resumed()

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

    async def _take_event(
        self, event: SSEEvent, request: JSONRPCRequest, on_message: MessageHandler
    ) -> Answer | None:
        # Events of other types are not MCP messages; an event with empty data only
        # primes the stream with an id to resume from.
        if event.event != "message" or not event.data.strip():
            return None
        try:
            value: Any = json.loads(event.data)
        except ValueError as error:
            raise MCPProtocolError(
                f"The server sent an event that is not JSON while answering {request.method}: "
                f"{_snippet(event.data)}."
            ) from error
        return await self._take(value, request, on_message)

    async def _take(
        self, value: Any, request: JSONRPCRequest, on_message: MessageHandler
    ) -> Answer | None:
        """Pass decoded messages (one, or a JSON-RPC batch) on; return the answer, if any."""
        answer: Answer | None = None
        for item in value if isinstance(value, list) else [value]:
            message = parse_message(item)
            if _answers(message, request.id):
                answer = message
            else:
                await on_message(message)
        return answer
