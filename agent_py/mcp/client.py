"""The MCP client: one protocol session with one server.

:class:`MCPClient` owns what MCP means (request ids, the handshake, tools, progress,
cancellation); :class:`~agent_py.mcp.streamable_http.StreamableHTTPConnection` owns how
messages travel over HTTP; an :class:`~agent_py.mcp.transport.HTTPTransport` moves the
bytes (httpx in CPython, fetch or the extension bridge in the page).

Protocol revisions. 2024-11-05 to 2025-11-25 open a session with ``initialize`` (we offer
2025-11-25 and accept any of :data:`SUPPORTED_PROTOCOL_VERSIONS` that the server answers)
followed by ``notifications/initialized``. The stateless 2026-07-28 revision replaces the
handshake with an optional ``server/discover`` and stamps the protocol version, client
info and capabilities into every request's ``_meta``; there is no session. To add it,
give :meth:`MCPClient._handshake` a discover branch and stamp ``_meta`` in
:meth:`MCPClient._exchange`; the HTTP binding already works without a session id.

After the handshake the client opens the server's standalone event stream (if it offers
one) and keeps it open: a server sends tool-list changes, log messages and requests such
as elicitation on it outside any request.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Coroutine, Mapping
from importlib import metadata
from types import TracebackType
from typing import Any, Final, TypeVar

from mcp_types import (
    CallToolResult,
    ClientCapabilities,
    ElicitationCapability,
    FormElicitationCapability,
    Implementation,
    InitializeRequestParams,
    InitializeResult,
    ProgressNotificationParams,
    ProgressToken,
    Tool,
)
from mcp_types.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)
from pydantic import BaseModel, ValidationError

from agent_py.mcp.auth import Authorizer
from agent_py.mcp.elicitation import (
    ElicitationHandler,
    UnsupportedSchemaError,
    parse_form,
)
from agent_py.mcp.errors import (
    MCPAuthError,
    MCPError,
    MCPProtocolError,
    MCPRemoteError,
    MCPSessionExpiredError,
    MCPTimeoutError,
)
from agent_py.mcp.local import cpython_transport
from agent_py.mcp.results import describe_validation_error, parse_call_tool_result
from agent_py.mcp.streamable_http import TOKEN_HINT, StreamableHTTPConnection
from agent_py.mcp.transport import HTTPResponse, HTTPTransport

logger = logging.getLogger(__name__)

SUPPORTED_PROTOCOL_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""Handshake revisions this client speaks, newest first; it offers the first."""

DEFAULT_REQUEST_TIMEOUT_S = 30.0
DEFAULT_TOOL_TIMEOUT_S = 60.0
CANCEL_TIMEOUT_S = 5.0
MAX_TOOL_PAGES = 100

ProgressHandler = Callable[[float, float | None, str | None], None]
"""Receives ``(progress, total, message)`` of a request's progress notifications."""
ToolsChangedHandler = Callable[[list[Tool]], None]
LogHandler = Callable[[str, Any], None]
"""Receives ``(level, data)`` of the server's ``notifications/message``."""

_ResultT = TypeVar("_ResultT", bound=BaseModel)


def _package_version() -> str:
    try:
        return metadata.version("agent_py")
    except metadata.PackageNotFoundError:
        return "0.0.0"


CLIENT_INFO: Final = Implementation(name="agent_py", version=_package_version())


class MCPClient:
    """A session with one MCP server over Streamable HTTP.

    Use ``async with MCPClient(url) as client`` or call :meth:`connect` and :meth:`close`.
    The client owns its transport and closes it. Requests may run concurrently.
    """

    def __init__(
        self,
        url: str,
        *,
        transport: HTTPTransport | None = None,
        token: str | None = None,
        auth: Authorizer | None = None,
        token_hint: str = TOKEN_HINT,
        name: str | None = None,
        client_info: Implementation = CLIENT_INFO,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
        on_tools_changed: ToolsChangedHandler | None = None,
        on_elicit: ElicitationHandler | None = None,
        on_log: LogHandler | None = None,
        listen: bool = True,
        max_message_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self.url = url
        self.name = name
        self.on_tools_changed = on_tools_changed
        self.on_elicit = on_elicit
        """Answers the server's form requests; without one the client declares no
        elicitation capability."""
        self.on_log = on_log
        self._listen = listen
        self._label = f"The MCP server {name!r}" if name else f"The MCP server at {url}"
        self._client_info = client_info
        self._request_timeout_s = request_timeout_s
        self._tool_timeout_s = tool_timeout_s
        self._auth = auth
        self._connection = StreamableHTTPConnection(
            url,
            transport if transport is not None else cpython_transport(),
            token=token,
            auth=auth,
            token_hint=token_hint,
            max_message_bytes=max_message_bytes,
        )
        self._stream_task: asyncio.Task[None] | None = None
        self._stream_refused = False  # the stream's token was refused: reopen after a request
        self._background: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)
        self._progress: dict[ProgressToken, ProgressHandler] = {}
        self._initialized: InitializeResult | None = None
        self._tools: list[Tool] = []
        self._tools_stale = False
        self._handshake_lock = asyncio.Lock()
        self._refresh_lock = asyncio.Lock()
        self._closed = False

    # What the handshake told us.

    @property
    def connected(self) -> bool:
        return self._initialized is not None and not self._closed

    @property
    def protocol_version(self) -> str | None:
        return self._initialized.protocol_version if self._initialized else None

    @property
    def server_info(self) -> Implementation | None:
        return self._initialized.server_info if self._initialized else None

    @property
    def instructions(self) -> str | None:
        return self._initialized.instructions if self._initialized else None

    @property
    def session_id(self) -> str | None:
        return self._connection.session_id

    @property
    def listening(self) -> bool:
        """Whether the server's standalone event stream is open."""
        return self._stream_task is not None and not self._stream_task.done()

    @property
    def tools(self) -> list[Tool]:
        """The tools from the last listing (see :meth:`refresh_tools`)."""
        return list(self._tools)

    # Lifecycle.

    async def connect(self) -> InitializeResult:
        """Open the session (initialize, then notifications/initialized)."""
        self._check_open()
        async with self._handshake_lock:
            if self._initialized is None:
                self._initialized = await self._handshake()
            return self._initialized

    async def close(self) -> None:
        """End the session (HTTP DELETE) and release the transport."""
        if self._closed:
            return
        self._closed = True
        await self._stop_listening()
        for task in list(self._background):
            task.cancel()
        try:
            await self._connection.terminate(
                timeout_s=min(CANCEL_TIMEOUT_S, self._request_timeout_s)
            )
        finally:
            await self._connection.transport.aclose()

    async def __aenter__(self) -> MCPClient:
        try:
            await self.connect()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # Tools.

    async def refresh_tools(self) -> list[Tool]:
        """List the server's tools, following ``nextCursor`` through every page."""
        async with self._refresh_lock:
            was_stale, self._tools_stale = self._tools_stale, False
            try:
                tools = await self._list_tools()
            except BaseException:
                self._tools_stale = self._tools_stale or was_stale
                raise
            self._tools = tools
        if self.on_tools_changed is not None:
            self.on_tools_changed(list(tools))
        return list(tools)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout_s: float | None = None,
        on_progress: ProgressHandler | None = None,
    ) -> CallToolResult:
        """Call a tool. A tool's own failure is a result with ``is_error`` set; failures to
        get a result raise :class:`~agent_py.mcp.errors.MCPError`."""
        raw = await self._request(
            "tools/call",
            {"name": name, "arguments": dict(arguments or {})},
            timeout_s=timeout_s if timeout_s is not None else self._tool_timeout_s,
            on_progress=on_progress,
            what=f"tool {name!r}",
        )
        return parse_call_tool_result(raw, name)

    async def ping(self) -> None:
        await self.request("ping")

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout_s: float | None = None,
        on_progress: ProgressHandler | None = None,
    ) -> dict[str, Any]:
        """Send any request in the session and return its raw result."""
        return await self._request(
            method,
            params,
            timeout_s=timeout_s if timeout_s is not None else self._request_timeout_s,
            on_progress=on_progress,
            what=method,
        )

    # Internals.

    def _check_open(self) -> None:
        if self._closed:
            raise MCPError(f"{self._label} was disconnected.")

    async def _request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        timeout_s: float,
        on_progress: ProgressHandler | None,
        what: str,
    ) -> dict[str, Any]:
        await self.connect()
        try:
            result = await self._authorized(method, params, timeout_s, on_progress, what)
        except MCPSessionExpiredError as expired:
            # The server forgot the session: start a new one and replay the request, once.
            await self._restart_session(expired.session_id)
            result = await self._authorized(method, params, timeout_s, on_progress, what)
        if self._tools_stale and method != "tools/list":
            await self._refresh_tools_quietly()
        if self._stream_refused and not self._closed:
            # This request got through, renewing the token if it had to: the stream can too.
            self._stream_refused = False
            self._spawn(self._start_listening())
        return result

    async def _handshake(self) -> InitializeResult:
        await self._stop_listening()
        self._connection.reset_session()
        capabilities = ClientCapabilities()
        if self.on_elicit is not None:
            capabilities = ClientCapabilities(
                elicitation=ElicitationCapability(form=FormElicitationCapability())
            )
        params = InitializeRequestParams(
            protocol_version=SUPPORTED_PROTOCOL_VERSIONS[0],
            capabilities=capabilities,
            client_info=self._client_info,
        )
        raw = await self._authorized(
            "initialize",
            params.model_dump(mode="json", by_alias=True, exclude_none=True),
            self._request_timeout_s,
            None,
            "initialize",
        )
        result = self._validate(InitializeResult, raw, "initialize")
        if result.protocol_version not in SUPPORTED_PROTOCOL_VERSIONS:
            await self._connection.terminate()
            raise MCPProtocolError(
                f"{self._label} speaks MCP {result.protocol_version}, which this client does not "
                f"support (it supports {', '.join(SUPPORTED_PROTOCOL_VERSIONS)})."
            )
        self._connection.protocol_version = result.protocol_version
        await self._connection.send(
            JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"),
            timeout_s=self._request_timeout_s,
        )
        if self._listen:
            await self._start_listening()
        return result

    async def _start_listening(self) -> None:
        """Open the standalone event stream; a server that has none (405) or fails to open
        one still works, only without messages outside requests."""
        try:
            async with asyncio.timeout(self._request_timeout_s):
                response = await self._connection.open_stream(timeout_s=self._request_timeout_s)
        except (MCPError, TimeoutError) as error:
            logger.info("%s: no event stream: %s", self._label, error)
            return
        if response is None:
            return
        if self._closed:  # closed while the stream was opening
            await response.aclose()
            return
        self._stream_task = asyncio.create_task(self._keep_listening(response))

    async def _keep_listening(self, response: HTTPResponse) -> None:
        try:
            await self._connection.listen(
                response, self._on_stream_message, timeout_s=self._request_timeout_s
            )
        except MCPAuthError as error:
            # Reopening it, the token was refused (revoked before its time). A background
            # stream does not ask the user to sign in: the next request renews the token
            # (with the user if it must) and opens the stream again.
            self._stream_refused = True
            logger.info("%s: its event stream waits for a new token: %s", self._label, error)
        except MCPError as error:
            logger.info("%s: its event stream stopped: %s", self._label, error)

    async def _stop_listening(self) -> None:
        task, self._stream_task = self._stream_task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait([task])  # unlike ``await task``, keeps our own cancellation

    async def _on_stream_message(self, message: JSONRPCMessage) -> None:
        """A message outside any request: nothing will re-list the tools on its way back,
        and a server request must not hold up the stream."""
        if isinstance(message, JSONRPCRequest):
            self._spawn(self._answer_server_request(message))
            return
        await self._on_message(message)
        if self._tools_stale:
            self._spawn(self._refresh_tools_quietly())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _restart_session(self, expired_session_id: str) -> None:
        async with self._handshake_lock:
            if self._connection.session_id in (expired_session_id, None):
                self._initialized = None
                self._initialized = await self._handshake()

    async def _authorized(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        timeout_s: float,
        on_progress: ProgressHandler | None,
        what: str,
    ) -> dict[str, Any]:
        """:meth:`_exchange`; when the server refuses the token and an authorizer can get a
        better one (which may take the user's time, so no time limit), once more."""
        try:
            return await self._exchange(method, params, timeout_s, on_progress, what)
        except MCPAuthError as refused:
            if self._auth is None or not await self._auth.challenge(
                refused.status, refused.www_authenticate
            ):
                raise
        return await self._exchange(method, params, timeout_s, on_progress, what)

    async def _exchange(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        timeout_s: float,
        on_progress: ProgressHandler | None,
        what: str,
    ) -> dict[str, Any]:
        """One request, one answer, within ``timeout_s``."""
        self._check_open()
        request_id = next(self._ids)
        if on_progress is not None:
            params = dict(params or {})
            params["_meta"] = {**params.get("_meta", {}), "progressToken": request_id}
            self._progress[request_id] = on_progress
        message = (
            JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method)
            if params is None
            else JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=dict(params))
        )
        try:
            async with asyncio.timeout(timeout_s):
                answer = await self._connection.request(
                    message, self._on_message, timeout_s=timeout_s
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

    async def _on_message(self, message: JSONRPCMessage) -> None:
        """A message that arrived on a response stream besides the awaited answer."""
        if isinstance(message, JSONRPCRequest):
            await self._answer_server_request(message)
        elif isinstance(message, JSONRPCNotification):
            self._on_notification(message)
        else:
            logger.info("%s sent an answer to unknown request %s", self._label, message.id)

    def _on_notification(self, message: JSONRPCNotification) -> None:
        params = message.params or {}
        if message.method == "notifications/tools/list_changed":
            self._tools_stale = True
        elif message.method == "notifications/progress":
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
        elif message.method == "notifications/message":
            level = str(params.get("level") or "info")
            logger.info("%s logs (%s): %s", self._label, level, params.get("data"))
            if self.on_log is not None:
                try:
                    self.on_log(level, params.get("data"))
                except Exception:  # a broken log display must not break the session
                    logger.exception("log handler failed")

    async def _answer_server_request(self, request: JSONRPCRequest) -> None:
        # Ping, and elicitation when a handler is set: the only client features declared.
        reply: JSONRPCResponse | JSONRPCError
        if request.method == "ping":
            reply = JSONRPCResponse(jsonrpc="2.0", id=request.id, result={})
        elif request.method == "elicitation/create" and self.on_elicit is not None:
            reply = await self._elicit(request)
        else:
            reply = _error_reply(
                request, METHOD_NOT_FOUND, f"This client does not support {request.method}"
            )
        try:
            await self._connection.send(reply, timeout_s=self._request_timeout_s)
        except MCPError as error:
            logger.info("%s: could not answer %s: %s", self._label, request.method, error)

    async def _elicit(self, request: JSONRPCRequest) -> JSONRPCResponse | JSONRPCError:
        assert self.on_elicit is not None
        try:
            form = parse_form(self.name or self.url, request.params or {})
        except UnsupportedSchemaError as error:
            return _error_reply(request, INVALID_PARAMS, f"Cannot ask the user: {error}")
        try:
            answer = await self.on_elicit(form)
        except Exception as error:
            logger.exception("elicitation handler failed")
            return _error_reply(request, INTERNAL_ERROR, f"The form failed: {error}")
        result: dict[str, Any] = {"action": answer.action}
        if answer.action == "accept":
            content = dict(answer.content or {})
            problems = form.problems(content)
            if problems:
                # Nothing that breaks the schema leaves the client.
                return _error_reply(
                    request,
                    INTERNAL_ERROR,
                    f"The answer does not match the requested schema: {'; '.join(problems)}",
                )
            result["content"] = content
        return JSONRPCResponse(jsonrpc="2.0", id=request.id, result=result)

    async def _list_tools(self) -> list[Tool]:
        tools: list[Tool] = []
        cursor: str | None = None
        cursors_seen: set[str] = set()
        for _ in range(MAX_TOOL_PAGES):
            raw = await self.request("tools/list", {"cursor": cursor} if cursor else None)
            tools.extend(self._parse_tools(raw.get("tools")))
            cursor = raw.get("nextCursor")
            if not cursor:
                return tools
            if not isinstance(cursor, str) or cursor in cursors_seen:
                raise MCPProtocolError(
                    f"{self._label} sent a tool list whose pages never end (cursor {cursor!r})."
                )
            cursors_seen.add(cursor)
        raise MCPProtocolError(f"{self._label} lists tools on more than {MAX_TOOL_PAGES} pages.")

    def _parse_tools(self, raw_tools: Any) -> list[Tool]:
        if not isinstance(raw_tools, list):
            raise MCPProtocolError(f"{self._label} answered tools/list without a list of tools.")
        tools = []
        for raw in raw_tools:
            try:
                tools.append(Tool.model_validate(raw))
            except ValidationError as error:
                # One malformed tool should not hide the others.
                name = raw.get("name") if isinstance(raw, dict) else None
                logger.warning(
                    "%s: skipping tool %r: %s", self._label, name, describe_validation_error(error)
                )
        return tools

    async def _refresh_tools_quietly(self) -> None:
        try:
            await self.refresh_tools()
        except MCPError as error:
            logger.warning("%s: could not re-list its tools: %s", self._label, error)

    def _validate(self, model: type[_ResultT], raw: dict[str, Any], what: str) -> _ResultT:
        try:
            return model.model_validate(raw)
        except ValidationError as error:
            raise MCPProtocolError(
                f"{self._label} sent an invalid answer to {what} "
                f"({describe_validation_error(error)})."
            ) from error

    def _remote_error(self, error: ErrorData, what: str) -> MCPRemoteError:
        detail = error.message.strip()
        if error.code == METHOD_NOT_FOUND:
            text = f"{self._label} does not support {what}"
        else:
            text = f"{self._label} answered {what} with an error"
        text += f": {detail} (code {error.code})." if detail else f" (code {error.code})."
        return MCPRemoteError(text, code=error.code, remote_message=error.message, data=error.data)


def _error_reply(request: JSONRPCRequest, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request.id, error=ErrorData(code=code, message=message))
