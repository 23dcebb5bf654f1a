"""The MCP client: one protocol session with one server.

:class:`MCPClient` owns the session (connect, close, a new session when the server forgot
the old one), the standalone event stream and what arriving messages mean (tool-list
changes, progress, logs, server requests). Its parts: :mod:`agent_py.mcp.handshake` starts
a session and negotiates its revision; :class:`~agent_py.mcp.rpc.RequestChannel` sends a
request and reads its answer (ids, progress, cancellation); :mod:`agent_py.mcp.tool_list`
lists tools; :mod:`agent_py.mcp.server_requests` answers the server's requests.
:class:`~agent_py.mcp.streamable_http.StreamableHTTPConnection` owns how messages travel
over HTTP; an :class:`~agent_py.mcp.transport.HTTPTransport` moves the bytes (httpx in
CPython, fetch or the extension bridge in the page).

Protocol revisions. The client speaks the stateless 2026-07-28 revision (no session:
every request carries the client's identity in ``_meta``; server requests come back as
``input_required`` results, see :mod:`agent_py.mcp.input_required`) and the
``initialize`` revisions 2024-11-05 to 2025-11-25; :mod:`agent_py.mcp.handshake` finds
which one a server speaks. :attr:`MCPClient.protocol_version` and
:attr:`MCPClient.stateless` tell the outcome.

Once connected the client listens for messages outside any request, if the server offers
a way: a legacy server's standalone GET stream (tool-list changes, logs and requests such
as elicitation), or a modern server's ``subscriptions/listen`` stream (tool-list changes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from types import TracebackType
from typing import Any

from mcp_types import HEADER_MISMATCH, CallToolResult, Implementation, Tool
from mcp_types.jsonrpc import JSONRPCMessage, JSONRPCNotification, JSONRPCRequest

from agent_py.mcp.auth import Authorizer
from agent_py.mcp.elicitation import ElicitationHandler
from agent_py.mcp.errors import MCPAuthError, MCPError, MCPRemoteError, MCPSessionExpiredError
from agent_py.mcp.handshake import AUTO, CLIENT_INFO, SessionInfo, open_session
from agent_py.mcp.http_status import TOKEN_HINT
from agent_py.mcp.input_required import complete
from agent_py.mcp.local import cpython_transport
from agent_py.mcp.request_headers import param_headers
from agent_py.mcp.results import parse_call_tool_result
from agent_py.mcp.rpc import CANCEL_TIMEOUT_S, ProgressHandler, RequestChannel
from agent_py.mcp.server_requests import reply_to
from agent_py.mcp.streamable_http import StreamableHTTPConnection
from agent_py.mcp.tool_list import list_tools
from agent_py.mcp.transport import HTTPResponse, HTTPTransport

logger = logging.getLogger(__name__)

DEFAULT_REQUEST_TIMEOUT_S = 30.0
DEFAULT_TOOL_TIMEOUT_S = 60.0

ToolsChangedHandler = Callable[[list[Tool]], None]
LogHandler = Callable[[str, Any], None]
"""Receives ``(level, data)`` of the server's ``notifications/message``."""


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
        protocol: str = AUTO,
    ) -> None:
        self.url = url
        self.name = name
        self.on_tools_changed = on_tools_changed
        self.on_elicit = on_elicit
        """Answers the server's form requests; without one the client declares no
        elicitation capability."""
        self.on_log = on_log
        self._listen = listen
        self._protocol = protocol
        """The revision to speak: :data:`~agent_py.mcp.handshake.AUTO` or an exact one."""
        self._label = f"The MCP server {name!r}" if name else f"The MCP server at {url}"
        self._client_info = client_info
        self._request_timeout_s = request_timeout_s
        self._tool_timeout_s = tool_timeout_s
        self._connection = StreamableHTTPConnection(
            url,
            transport if transport is not None else cpython_transport(),
            token=token,
            auth=auth,
            token_hint=token_hint,
            max_message_bytes=max_message_bytes,
        )
        self._requests = RequestChannel(
            self._connection,
            self._on_message,
            label=self._label,
            auth=auth,
            request_timeout_s=request_timeout_s,
        )
        self._stream_task: asyncio.Task[None] | None = None
        self._stream_refused = False  # the stream's token was refused: reopen after a request
        self._background: set[asyncio.Task[None]] = set()
        self._session: SessionInfo | None = None
        self._tools: list[Tool] = []
        self._tools_stale = False
        self._handshake_lock = asyncio.Lock()
        self._refresh_lock = asyncio.Lock()

    # What the start of the connection told us.

    @property
    def connected(self) -> bool:
        return self._session is not None and not self._requests.closed

    @property
    def protocol_version(self) -> str | None:
        return self._session.protocol_version if self._session else None

    @property
    def stateless(self) -> bool:
        """Whether the server is spoken to in a modern (stateless, 2026-07-28) revision."""
        return self._session is not None and self._session.stateless

    @property
    def server_info(self) -> Implementation | None:
        return self._session.server_info if self._session else None

    @property
    def instructions(self) -> str | None:
        return self._session.instructions if self._session else None

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

    async def connect(self) -> SessionInfo:
        """Start speaking to the server: find its revision and, for a legacy one, open the
        session (initialize, then notifications/initialized)."""
        self._requests.check_open()
        async with self._handshake_lock:
            if self._session is None:
                await self._handshake()
            assert self._session is not None
            return self._session

    async def close(self) -> None:
        """End the session (HTTP DELETE, when there is one) and release the transport."""
        if self._requests.closed:
            return
        self._requests.closed = True
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
                tools = await list_tools(self.request, self._label)
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
        arguments = dict(arguments or {})
        timeout = timeout_s if timeout_s is not None else self._tool_timeout_s
        await self.connect()
        # 2026-07-28: the tool's schema says which arguments travel in headers as well. A
        # server that finds them missing or wrong (HeaderMismatch) may have changed the
        # schema: list the tools again and call once more.
        if self.stateless and not any(tool.name == name for tool in self._tools):
            await self._refresh_tools_quietly()
        retries = 1 if self.stateless else 0
        while True:
            tool = next((tool for tool in self._tools if tool.name == name), None)
            try:
                raw = await self._request(
                    "tools/call",
                    {"name": name, "arguments": arguments},
                    timeout_s=timeout,
                    on_progress=on_progress,
                    what=f"tool {name!r}",
                    headers=param_headers(tool, arguments) if self.stateless else None,
                )
                break
            except MCPRemoteError as error:
                if error.code != HEADER_MISMATCH or retries == 0:
                    raise
                retries -= 1
            await self._refresh_tools_quietly()
        return parse_call_tool_result(raw, name)

    async def ping(self) -> None:
        """Check that the server answers (``ping``; a modern server has ``server/discover``
        in its place)."""
        await self.request("server/discover" if self.stateless else "ping")

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

    async def _request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        timeout_s: float,
        on_progress: ProgressHandler | None,
        what: str,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        await self.connect()

        async def send(params: Mapping[str, Any] | None) -> dict[str, Any]:
            return await self._send(method, params, timeout_s, on_progress, what, headers)

        result = await complete(
            method,
            params,
            send,
            on_elicit=self.on_elicit,
            server=self.name or self.url,
            label=self._label,
            what=what,
        )
        if self._tools_stale and method != "tools/list":
            await self._refresh_tools_quietly()
        if self._stream_refused and not self._requests.closed:
            # This request got through, renewing the token if it had to: the stream can too.
            self._stream_refused = False
            self._spawn(self._start_listening())
        return result

    async def _send(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        timeout_s: float,
        on_progress: ProgressHandler | None,
        what: str,
        headers: Mapping[str, str] | None,
    ) -> dict[str, Any]:
        try:
            return await self._requests.request(
                method, params, timeout_s, on_progress, what, headers
            )
        except MCPSessionExpiredError as expired:
            # The server forgot the session: start a new one and replay the request, once.
            await self._restart_session(expired.session_id)
            return await self._requests.request(
                method, params, timeout_s, on_progress, what, headers
            )

    async def _handshake(self) -> None:
        await self._stop_listening()
        self._session = await open_session(
            self._requests,
            self._connection,
            client_info=self._client_info,
            elicitation=self.on_elicit is not None,
            label=self._label,
            timeout_s=self._request_timeout_s,
            version=self._protocol,
        )
        if self._listen:
            await self._start_listening()

    async def _start_listening(self) -> None:
        """Open the stream for messages outside requests: a legacy server's standalone GET
        stream, or a modern server's ``subscriptions/listen`` for tool-list changes when it
        says its list can change. A server that has none (405) or fails to open one still
        works, only without messages outside requests."""
        session = self._session
        if session is None:
            return
        tools = session.capabilities.tools
        if session.stateless and not (tools is not None and tools.list_changed):
            return
        try:
            async with asyncio.timeout(self._request_timeout_s):
                if session.stateless:
                    response = await self._connection.open_subscription(
                        self._requests.subscription(), timeout_s=self._request_timeout_s
                    )
                else:
                    response = await self._connection.open_stream(timeout_s=self._request_timeout_s)
        except (MCPError, TimeoutError) as error:
            logger.info("%s: no event stream: %s", self._label, error)
            return
        if response is None:
            return
        if self._requests.closed:  # closed while the stream was opening
            await response.aclose()
            return
        self._stream_task = asyncio.create_task(self._keep_listening(response))

    async def _keep_listening(self, response: HTTPResponse) -> None:
        try:
            await self._connection.listen(
                response,
                self._on_stream_message,
                timeout_s=self._request_timeout_s,
                resubscribe=self._requests.subscription if self.stateless else None,
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
                self._session = None
                await self._handshake()

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
            self._requests.report_progress(params)
        elif message.method == "notifications/message":
            level = str(params.get("level") or "info")
            logger.info("%s logs (%s): %s", self._label, level, params.get("data"))
            if self.on_log is not None:
                try:
                    self.on_log(level, params.get("data"))
                except Exception:  # a broken log display must not break the session
                    logger.exception("log handler failed")

    async def _answer_server_request(self, request: JSONRPCRequest) -> None:
        reply = await reply_to(request, self.on_elicit, self.name or self.url)
        try:
            await self._connection.send(reply, timeout_s=self._request_timeout_s)
        except MCPError as error:
            logger.info("%s: could not answer %s: %s", self._label, request.method, error)

    async def _refresh_tools_quietly(self) -> None:
        try:
            await self.refresh_tools()
        except MCPError as error:
            logger.warning("%s: could not re-list its tools: %s", self._label, error)
