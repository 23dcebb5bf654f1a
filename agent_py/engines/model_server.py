"""An engine that is a model server: any server that speaks OpenAI's chat-completions API.

llama.cpp's ``llama-server``, llama-cpp-python's server, Ollama, LM Studio and vLLM all do, on
the user's machine or a GPU box on their network. :class:`ModelServerLLM` streams replies
(server-sent events) over an :class:`~agent_py.mcp.transport.HTTPTransport`: httpx in
CPython; in the page the worker's fetch (the server must send CORS headers) or the bridge
extension, the same transports the MCP servers use, under the same per-origin consent.

At ``reload`` it checks that the server has the model (``/v1/models``) and learns what kind
of server it is, which decides how a reply is held to a JSON schema (the rules, kind by kind,
are in :mod:`agent_py.engines.model_server_request`).

A server that refuses the format (HTTP 400 or 422) is asked once more without it, and from
then on gets none: its replies meet the same validation and repair as any engine's. A
server that ignores the format is caught the same way. Reasoning the server sends apart
(``reasoning_content``) comes back as a leading ``<think>`` block, which the agent shows
as thinking and keeps out of answers.

This module holds the engine: its calls, its waits and the format's fallback. Beside it:
what the server is (``model_server_discovery``), what a request sends
(``model_server_request``), how a streamed reply is put together (``model_server_reply``) and
what a failure says (``model_server_errors``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from agent_py.core.llm import (
    LLM,
    CallInfo,
    CallPurpose,
    ChatReply,
    LLMError,
    Message,
    TokenCallback,
    Usage,
)
from agent_py.engines.model_server_discovery import (
    ServerInfo,
    ServerKind,
    api_root,
    discover,
    ollama_window,
)
from agent_py.engines.model_server_errors import (
    REFUSED_FORMAT,
    FormatRefused,
    error_text,
    http_error_message,
    names_format,
    silence_message,
    unreachable_message,
)
from agent_py.engines.model_server_reply import ReplyBuilder
from agent_py.engines.model_server_request import (
    OutputFormat,
    one_token,
    reply_format,
    request_body,
)
from agent_py.mcp.errors import MCPError, MCPTimeoutError
from agent_py.mcp.sse import SSEDecoder
from agent_py.mcp.transport import HTTPResponse, HTTPTransport

LIST_LIMIT = 256 * 1024
"""Bytes of a JSON answer to a GET (the model list, the server's properties)."""
DEFAULT_SILENCE_S = 300.0
"""How long a server may send nothing in a reply before the call fails as stalled: a
server sends nothing while it prefills, and a 4,000-token prompt on a slow CPU takes
minutes."""
ASK_TIMEOUT_S = 30.0
"""The bound of a small JSON request (the model list, the server's properties, a count)."""
PURPOSE_WHAT = {
    CallPurpose.PLAN: "the request for a plan",
    CallPurpose.ARGUMENTS: "the request for a step's arguments",
    CallPurpose.GENERATE: "a step's request (llm_generator)",
    CallPurpose.RETHINK: "the request to rethink the plan",
    CallPurpose.ANSWER: "the request for the answer",
}
"""The call a silent server was answering, as its message names it."""
PREPARATION_WHAT = "the planner's prompt (the model's preparation)"


class ModelServerLLM(LLM):
    """A model server reached over HTTP (see the module's docstring).

    ``context_window``: the window to assume where the server does not say its own.
    ``keep_alive``: passed through to Ollama (how long it keeps the model loaded).
    ``on_note``: a line for the user about how the server is used (a refused format).
    ``silence_s``: the longest the server may send nothing (before its reply's headers, or
    between two of its chunks) before the call fails as stalled. A server prefilling a long
    prompt on a slow machine sends nothing for a while, so this is generous, and the user's
    to change (``openai_silence_s``).
    ``on_wait``: told what the engine waits for when a request goes out (``"the model server
    at … to answer …"``), and ``None`` once the reply's first chunk is in or the call ends,
    so the page can show a silent server's wait.
    """

    def __init__(
        self,
        transport: HTTPTransport,
        base_url: str,
        *,
        api_key: str = "",
        output_format: OutputFormat = OutputFormat.AUTO,
        keep_alive: str = "",
        silence_s: float = DEFAULT_SILENCE_S,
        on_note: Callable[[str], None] = lambda text: None,
        on_wait: Callable[[str | None], None] = lambda what: None,
    ) -> None:
        self._transport = transport
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._format = output_format
        self._keep_alive = keep_alive
        self._silence_s = silence_s
        self._on_note = on_note
        self._on_wait = on_wait
        self._loaded: str | None = None
        self._response: HTTPResponse | None = None
        self._interrupted = False
        # Once the server has answered, a failed connection means it stopped or crashed.
        self._answered = False
        self.server: ServerInfo | None = None

    def __repr__(self) -> str:  # never the API key
        return f"ModelServerLLM({self.base_url!r}, loaded={self._loaded!r})"

    @property
    def loaded_model(self) -> str | None:
        return self._loaded

    @property
    def context_window(self) -> int | None:
        return self.server.context_window if self.server else None

    async def reload(self, model: str) -> None:
        """Nothing is loaded here: check that the server has ``model``, and learn its kind."""
        self._loaded = None
        if not self.base_url.startswith(("http://", "https://")):
            raise LLMError(
                "the model server's URL must start with http:// or https:// (got "
                f"{self.base_url!r}): set it in Settings (or --base-url)"
            )
        if not model:
            raise LLMError("no model is chosen for the model server: set it in Settings")
        if self.server is None:
            self.server = await discover(self.base_url, self._ask_json)
        if self.server.models and model not in self.server.models:
            # the server may have gained it since
            self.server = await discover(self.base_url, self._ask_json)
            if model not in self.server.models:
                served = ", ".join(self.server.models[:20])
                raise LLMError(
                    f"the model server at {self.base_url} has no model called {model!r}; it "
                    f"serves: {served}. Choose one of them in Settings (or with --model)."
                )
        if self.server.kind is ServerKind.OLLAMA:
            self.server.context_window = await ollama_window(self.base_url, model, self._ask_json)
        self._loaded = model

    async def unload(self) -> None:
        """A server keeps its models loaded as it sees fit: there is nothing to unload."""
        self._loaded = None

    async def interrupt(self) -> None:
        self._interrupted = True
        if self._response is not None:
            await self._response.aclose()

    async def chat(
        self, messages: list[Message], call: CallInfo, on_token: TokenCallback | None = None
    ) -> ChatReply:
        if self._loaded != call.model:
            raise LLMError(f"the model {call.model!r} is not loaded (loaded: {self._loaded!r})")
        kind = self.server.kind if self.server else ServerKind.OPENAI
        fmt = reply_format(self._format, kind, call)
        what = PURPOSE_WHAT.get(call.purpose, "a request")
        try:
            return await self._stream(messages, call, fmt, on_token, what)
        except FormatRefused as refused:
            self._format = OutputFormat.NONE
            self._on_note(
                f"The model server refused the reply format ({fmt.value}: {refused.reason}); "
                "its replies are checked and repaired instead."
            )
            return await self._stream(messages, call, OutputFormat.NONE, on_token, what)

    async def count_tokens_exact(self, texts: list[str]) -> list[int] | None:
        """Counts by the server's tokenizer: llama.cpp's ``/tokenize``, llama-cpp-python's
        ``/extras/tokenize/count``; None for servers without one (or when it fails)."""
        kind = self.server.kind if self.server else None
        root = api_root(self.base_url)
        counts: list[int] = []
        for text in texts:
            if kind is ServerKind.LLAMA_CPP:
                answer = await self._ask_json(f"{root}/tokenize", body={"content": text})
                tokens = answer.get("tokens") if isinstance(answer, dict) else None
                count = len(tokens) if isinstance(tokens, list) else None
            elif kind is ServerKind.LLAMA_CPP_PYTHON:
                answer = await self._ask_json(f"{root}/extras/tokenize/count", body={"input": text})
                count = answer.get("count") if isinstance(answer, dict) else None
            else:
                return None
            if not isinstance(count, int):
                return None
            counts.append(count)
        return counts

    async def prefill(self, messages: list[Message], call: CallInfo) -> Usage | None:
        """A one-token request with the prompt that later calls start with: llama.cpp's
        servers and Ollama keep the longest prefix they saw, so those calls compute only
        what follows it."""
        reply = await self._stream(
            messages, one_token(call), OutputFormat.NONE, None, PREPARATION_WHAT
        )
        return reply.usage

    # The server's small answers (its model list, its properties, a count).

    async def _ask_json(
        self,
        url: str,
        *,
        required: bool = False,
        limit: int = LIST_LIMIT,
        body: dict[str, Any] | None = None,
    ) -> Any:
        """A GET's JSON answer (a POST's, with ``body``); None when an optional endpoint is
        missing or not JSON."""
        method, payload, headers = "GET", None, self._headers()
        if body is not None:
            method, payload = "POST", json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            response = await self._transport.send(method, url, headers, payload, ASK_TIMEOUT_S)
            self._answered = True
            answer, _ = await asyncio.wait_for(response.read(limit), ASK_TIMEOUT_S)
        except TimeoutError:
            if required:
                raise LLMError(
                    f"the model server at {self.base_url} did not finish answering {url} "
                    f"within {ASK_TIMEOUT_S:g} s"
                ) from None
            return None
        except MCPError as error:
            if required:
                raise LLMError(
                    unreachable_message(self.base_url, error, answered=self._answered)
                ) from None
            return None
        if response.status != 200:
            if required:
                raise LLMError(http_error_message(self.base_url, url, response.status, answer))
            return None
        try:
            return json.loads(answer)
        except ValueError:
            if required:
                raise LLMError(f"{url} answered with something that is not JSON") from None
            return None

    # One call.

    async def _stream(
        self,
        messages: list[Message],
        call: CallInfo,
        fmt: OutputFormat,
        on_token: TokenCallback | None,
        what: str,
    ) -> ChatReply:
        url = f"{self.base_url}/chat/completions"
        kind = self.server.kind if self.server else ServerKind.OPENAI
        body = request_body(messages, call, fmt, kind, keep_alive=self._keep_alive)
        payload = json.dumps(body).encode("utf-8")
        headers = {**self._headers(), "Content-Type": "application/json"}
        self._interrupted = False
        started = time.perf_counter()
        self._on_wait(f"the model server at {self.base_url} to answer {what}")
        try:
            try:
                response = await self._transport.send(
                    "POST", url, headers, payload, self._silence_s
                )
            except MCPTimeoutError:
                raise LLMError(self._silence(what, "its reply not begun")) from None
            except MCPError as error:
                raise LLMError(
                    unreachable_message(self.base_url, error, answered=self._answered)
                ) from None
            self._answered = True
            if response.status != 200:
                try:
                    answer, _ = await asyncio.wait_for(response.read(64 * 1024), self._silence_s)
                except TimeoutError:
                    raise LLMError(
                        self._silence(what, f"HTTP {response.status}, its body not sent")
                    ) from None
                if response.status in REFUSED_FORMAT and fmt is not OutputFormat.NONE:
                    reason = error_text(answer)
                    if names_format(reason):
                        raise FormatRefused(reason)
                raise LLMError(http_error_message(self.base_url, url, response.status, answer))
            reply = ReplyBuilder(on_token)
            decoder = SSEDecoder()
            self._response = response
            try:
                async for chunk in self._unless_silent(response.chunks(), what, reply):
                    for event in decoder.feed(chunk):
                        reply.take(event.data)
                    if reply.done:
                        break
                else:
                    for event in decoder.finish():
                        reply.take(event.data)
            except MCPError as error:
                if not self._interrupted:
                    raise LLMError(
                        f"the connection to the model server at {self.base_url} broke in the "
                        f"middle of a reply ({error}); {len(reply.text)} characters had arrived"
                    ) from None
            finally:
                self._response = None
                await response.aclose()
        finally:
            self._on_wait(None)
        return reply.result(started, interrupted=self._interrupted)

    async def _unless_silent(
        self, chunks: AsyncIterator[bytes], what: str, reply: ReplyBuilder
    ) -> AsyncIterator[bytes]:
        """``chunks``, failing the call when none comes for ``silence_s``."""
        waiting = True
        try:
            while True:
                try:
                    chunk = await asyncio.wait_for(anext(chunks), self._silence_s)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    had = f"{len(reply.text)} characters in" if reply.text else "no text yet"
                    raise LLMError(self._silence(what, had)) from None
                if waiting and reply.text:
                    waiting = False
                    self._on_wait(None)  # the words are showing: nothing silent to show
                yield chunk
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]

    def _silence(self, what: str, when: str) -> str:
        return silence_message(self.base_url, self._silence_s, what, when)

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers
