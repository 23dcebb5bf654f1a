"""An engine that is a model server: any server that speaks OpenAI's chat-completions API.

llama.cpp's ``llama-server``, llama-cpp-python's server, Ollama, LM Studio and vLLM all do, on
the user's machine or a GPU box on their network. :class:`ModelServerLLM` streams replies
(server-sent events) over an :class:`~agent_py.mcp.transport.HTTPTransport`: httpx in
CPython; in the page the worker's fetch (the server must send CORS headers) or the bridge
extension, the same transports the MCP servers use, under the same per-origin consent.

At ``reload`` it checks that the server has the model (``/v1/models``) and learns what kind
of server it is, which decides how a reply is held to a JSON schema:

- llama.cpp's server (it answers ``/props``, which also gives its context window): the
  GBNF ``grammar`` when the call has one, else ``response_format`` of type ``json_schema``;
- llama-cpp-python's server (its OpenAPI title says so): ``grammar``, else its own
  ``response_format`` of type ``json_object`` with a ``schema``;
- any other server (Ollama, LM Studio, vLLM): ``response_format`` of type ``json_schema``.

A call held by a grammar alone (a code call's one fenced block) sends it to llama.cpp's
servers; the others get that call unconstrained.

A server that refuses the format (HTTP 400 or 422) is asked once more without it, and from
then on gets none: its replies meet the same validation and repair as any engine's. A
server that ignores the format is caught the same way. Reasoning the server sends apart
(``reasoning_content``) comes back as a leading ``<think>`` block, which the agent shows
as thinking and keeps out of answers.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

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
from agent_py.mcp.errors import MCPError, MCPTimeoutError
from agent_py.mcp.sse import SSEDecoder
from agent_py.mcp.transport import HTTPResponse, HTTPTransport

ERROR_BODY_LIMIT = 2000
"""Characters of an error answer's body quoted in the message."""
LIST_LIMIT = 256 * 1024
"""Bytes of a JSON answer to a GET (the model list, the server's properties)."""
REFUSED_FORMAT = (400, 422)
"""Statuses with which servers refuse a request field they do not take."""
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


class ServerKind(StrEnum):
    LLAMA_CPP = "llama.cpp"
    LLAMA_CPP_PYTHON = "llama-cpp-python"
    OLLAMA = "ollama"
    OPENAI = "openai-compatible"


class OutputFormat(StrEnum):
    """How a reply is held to a JSON schema."""

    AUTO = "auto"
    """By the kind of server (see the module's docstring)."""
    JSON_SCHEMA = "json_schema"
    JSON_OBJECT = "json_object"
    GRAMMAR = "grammar"
    NONE = "none"


@dataclass
class ServerInfo:
    kind: ServerKind = ServerKind.OPENAI
    models: list[str] = field(default_factory=list)
    context_window: int | None = None


def api_root(base_url: str) -> str:
    """The server's root for its own endpoints (``/props``, ``/api/version``): the base URL
    without its ``/v1``."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


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
            self.server = await self._discover()
        if self.server.models and model not in self.server.models:
            self.server = await self._discover()  # the server may have gained it since
            if model not in self.server.models:
                served = ", ".join(self.server.models[:20])
                raise LLMError(
                    f"the model server at {self.base_url} has no model called {model!r}; it "
                    f"serves: {served}. Choose one of them in Settings (or with --model)."
                )
        if self.server.kind is ServerKind.OLLAMA:
            self.server.context_window = await self._ollama_window(model)
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
        fmt = self._format_for(call)
        what = PURPOSE_WHAT.get(call.purpose, "a request")
        try:
            return await self._stream(messages, call, fmt, on_token, what)
        except _FormatRefused as refused:
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
            messages, _one_token(call), OutputFormat.NONE, None, PREPARATION_WHAT
        )
        return reply.usage

    # What the server is.

    async def _discover(self) -> ServerInfo:
        listing = await self._ask_json(f"{self.base_url}/models", required=True)
        data = listing.get("data") if isinstance(listing, dict) else None
        if not isinstance(data, list):
            raise LLMError(
                f"{self.base_url}/models did not answer with a model list: is this the "
                "server's OpenAI API (its URL usually ends in /v1)?"
            )
        models = [str(item["id"]) for item in data if isinstance(item, dict) and "id" in item]
        info = ServerInfo(models=models)
        root = api_root(self.base_url)
        props = await self._ask_json(f"{root}/props")
        if isinstance(props, dict) and isinstance(props.get("default_generation_settings"), dict):
            info.kind = ServerKind.LLAMA_CPP
            n_ctx = props["default_generation_settings"].get("n_ctx") or props.get("n_ctx")
            info.context_window = int(n_ctx) if isinstance(n_ctx, int) and n_ctx > 0 else None
            return info
        version = await self._ask_json(f"{root}/api/version")
        if isinstance(version, dict) and "version" in version:
            info.kind = ServerKind.OLLAMA
            return info
        openapi = await self._ask_json(f"{root}/openapi.json", limit=2 * 1024 * 1024)
        title = openapi.get("info", {}).get("title", "") if isinstance(openapi, dict) else ""
        if "llama.cpp python" in str(title).lower():
            info.kind = ServerKind.LLAMA_CPP_PYTHON
        return info

    async def _ollama_window(self, model: str) -> int | None:
        """The window Ollama runs ``model`` with, where its parameters set one (``num_ctx``);
        otherwise Ollama's own default applies, which it does not report."""
        shown = await self._ask_json(
            f"{api_root(self.base_url)}/api/show", body={"model": model}, limit=4 * 1024 * 1024
        )
        parameters = shown.get("parameters") if isinstance(shown, dict) else None
        found = re.search(r"^\s*num_ctx\s+(\d+)", str(parameters or ""), re.MULTILINE)
        return int(found.group(1)) if found else None

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
                raise LLMError(self._unreachable(error)) from None
            return None
        if response.status != 200:
            if required:
                raise LLMError(self._http_error(url, response.status, answer))
            return None
        try:
            return json.loads(answer)
        except ValueError:
            if required:
                raise LLMError(f"{url} answered with something that is not JSON") from None
            return None

    # One call.

    def _format_for(self, call: CallInfo) -> OutputFormat:
        kind = self.server.kind if self.server else ServerKind.OPENAI
        llama = kind in (ServerKind.LLAMA_CPP, ServerKind.LLAMA_CPP_PYTHON)
        if call.schema is None:
            # A grammar alone (a code call's one fenced block): llama.cpp's servers take it;
            # an OpenAI-style API has no field for it, so the call goes as it is.
            takes_grammar = self._format is OutputFormat.GRAMMAR or (
                self._format is OutputFormat.AUTO and llama
            )
            return OutputFormat.GRAMMAR if call.grammar and takes_grammar else OutputFormat.NONE
        if self._format is not OutputFormat.AUTO:
            if self._format is OutputFormat.GRAMMAR and call.grammar is None:
                return OutputFormat.JSON_SCHEMA
            return self._format
        if llama and call.grammar:
            return OutputFormat.GRAMMAR
        if kind is ServerKind.LLAMA_CPP_PYTHON:
            return OutputFormat.JSON_OBJECT
        return OutputFormat.JSON_SCHEMA

    def _body(self, messages: list[Message], call: CallInfo, fmt: OutputFormat) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": call.model,
            "messages": messages,
            "max_tokens": call.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        kind = self.server.kind if self.server else ServerKind.OPENAI
        llama = kind in (ServerKind.LLAMA_CPP, ServerKind.LLAMA_CPP_PYTHON)
        if llama:
            # llama-cpp-python's server penalises repeats by default (1.1), which breaks
            # code and JSON; llama.cpp's own default, and our CPU engine's, is none.
            body["repeat_penalty"] = 1.0
        if call.sampling is not None:
            sampling = call.sampling.model_dump(exclude_none=True)
            standard = ("temperature", "top_p", "frequency_penalty", "presence_penalty", "seed")
            body.update({key: value for key, value in sampling.items() if key in standard})
            if llama or kind is ServerKind.OLLAMA:  # llama.cpp's own samplers, by their names
                body.update({key: value for key, value in sampling.items() if key not in standard})
        if fmt is OutputFormat.GRAMMAR and call.grammar is not None:
            body["grammar"] = call.grammar
        elif fmt is OutputFormat.JSON_OBJECT:
            body["response_format"] = {"type": "json_object", "schema": call.schema}
        elif fmt is OutputFormat.JSON_SCHEMA or fmt is OutputFormat.GRAMMAR:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": f"{call.purpose.value}_reply", "schema": call.schema},
            }
        if self._keep_alive and kind is ServerKind.OLLAMA:
            body["keep_alive"] = self._keep_alive
        return body

    async def _stream(
        self,
        messages: list[Message],
        call: CallInfo,
        fmt: OutputFormat,
        on_token: TokenCallback | None,
        what: str,
    ) -> ChatReply:
        url = f"{self.base_url}/chat/completions"
        payload = json.dumps(self._body(messages, call, fmt)).encode("utf-8")
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
                raise LLMError(self._silent(what, "its reply not begun")) from None
            except MCPError as error:
                raise LLMError(self._unreachable(error)) from None
            self._answered = True
            if response.status != 200:
                try:
                    body, _ = await asyncio.wait_for(response.read(64 * 1024), self._silence_s)
                except TimeoutError:
                    raise LLMError(
                        self._silent(what, f"HTTP {response.status}, its body not sent")
                    ) from None
                if response.status in REFUSED_FORMAT and fmt is not OutputFormat.NONE:
                    reason = _error_text(body)
                    if _names_format(reason):
                        raise _FormatRefused(reason)
                raise LLMError(self._http_error(url, response.status, body))
            reply = _ReplyBuilder(on_token)
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
        self, chunks: AsyncIterator[bytes], what: str, reply: _ReplyBuilder
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
                    raise LLMError(self._silent(what, had)) from None
                if waiting and reply.text:
                    waiting = False
                    self._on_wait(None)  # the words are showing: nothing silent to show
                yield chunk
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]

    def _silent(self, what: str, when: str) -> str:
        return (
            f"the model server at {self.base_url} sent nothing for {self._silence_s:g} s "
            f"while answering {what} ({when}): it is stalled, or slower than that on this "
            "machine. Raise the limit in Settings → Model server → Silence limit (in the "
            "terminal: --settings '{\"openai_silence_s\": 900}')."
        )

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _unreachable(self, error: MCPError) -> str:
        if self._answered:
            return (
                f"the model server at {self.base_url} stopped answering: it answered earlier, "
                "and now it cannot be reached. It has stopped or crashed (its own output says "
                "why), or it was restarted at another address: start it again, or change its "
                "URL in Settings"
            )
        said = str(error).rstrip(".")
        if "model server" not in said:  # the CPython transport names only the address
            said = f"the model server at {self.base_url} cannot be reached: {said}"
        return (
            f"{said}. Check that the server is running at that URL. For Ollama, "
            "OLLAMA_ORIGINS must include this page's origin; llama.cpp's servers allow any."
        )

    def _http_error(self, url: str, status: int, body: bytes) -> str:
        detail = _error_text(body)
        if status in (401, 403):
            return (
                f"the model server at {self.base_url} refused the request (HTTP {status}: "
                f"{detail}): set its API key in Settings (or --api-key-env in the terminal)"
            )
        if status == 404 and url.endswith("/models"):
            return (
                f"{url} does not exist (HTTP 404): the base URL should be the server's "
                "OpenAI API, which usually ends in /v1"
            )
        return f"the model server answered HTTP {status} to {url}: {detail}"


class _FormatRefused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _one_token(call: CallInfo) -> CallInfo:
    return replace(call, max_tokens=1, schema=None, grammar=None)


def _error_text(body: bytes) -> str:
    """The server's words from an error answer: OpenAI's ``{"error": {"message"}}``,
    FastAPI's ``{"detail": ...}``, or the body itself, cut short."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        return text[:ERROR_BODY_LIMIT] or "(an empty body)"
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:ERROR_BODY_LIMIT]
        if isinstance(error, str):
            return error[:ERROR_BODY_LIMIT]
        if "detail" in parsed:
            return json.dumps(parsed["detail"])[:ERROR_BODY_LIMIT]
    return text[:ERROR_BODY_LIMIT]


def _names_format(reason: str) -> bool:
    lowered = reason.lower()
    return any(word in lowered for word in ("response_format", "grammar", "json_schema", "schema"))


class _ReplyBuilder:
    """The reply, put together from the stream's ``data`` lines."""

    def __init__(self, on_token: TokenCallback | None) -> None:
        self._on_token = on_token
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._usage: dict[str, Any] = {}
        self._timings: dict[str, Any] = {}
        self._chunks = 0
        self._first_token_at: float | None = None
        self.finish_reason: str | None = None
        self.saw_choice = False
        self.done = False

    @property
    def text(self) -> str:
        return "".join(self._content)

    def take(self, data: str) -> None:
        if data.strip() == "[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            raise LLMError(
                f"the model server sent a stream event that is not JSON: {data[:200]!r}"
            ) from None
        if not isinstance(chunk, dict):
            raise LLMError(
                f"the model server sent a stream event that is not an object: {data[:200]!r}"
            )
        if "error" in chunk:
            raise LLMError(f"the model server failed mid-reply: {_error_text(data.encode())}")
        if isinstance(chunk.get("usage"), dict):
            self._usage = chunk["usage"]
        if isinstance(chunk.get("timings"), dict):
            self._timings = chunk["timings"]
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices:
            return  # the usage chunk, or a keep-alive
        choice = choices[0]
        if not isinstance(choice, dict):
            raise LLMError(f"the model server sent a malformed choice: {data[:200]!r}")
        self.saw_choice = True
        delta = choice.get("delta") or choice.get("message") or {}
        if not isinstance(delta, dict):
            raise LLMError(f"the model server sent a malformed delta: {data[:200]!r}")
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._reasoning.append(reasoning)
        content = delta.get("content")
        if isinstance(content, str) and content:
            if self._first_token_at is None:
                self._first_token_at = time.perf_counter()
            self._chunks += 1
            self._content.append(content)
            if self._on_token is not None:
                self._on_token(content)
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])

    def result(self, started: float, *, interrupted: bool) -> ChatReply:
        text = self.text
        if not interrupted:
            if not self.saw_choice:
                raise LLMError("the model server's reply had no choices (an empty answer)")
            if self.finish_reason is None and not self.done:
                raise LLMError(
                    "the model server's reply stopped before it was complete (the stream "
                    f"ended without a finish reason, after {len(text)} characters)"
                )
        if self._reasoning:
            text = f"<think>{''.join(self._reasoning)}</think>{text}"
        now = time.perf_counter()
        first = self._first_token_at
        usage = Usage(
            # 0 where the server does not say: the agent keeps its own estimate
            prompt_tokens=int(self._usage.get("prompt_tokens") or 0),
            completion_tokens=int(self._usage.get("completion_tokens") or self._chunks),
            time_to_first_token_s=round(first - started, 3) if first else None,
            decode_tokens_per_s=_rate(self._timings.get("predicted_per_second"))
            or (round(self._chunks / (now - first), 1) if first and now > first else None),
            prefill_tokens_per_s=_rate(self._timings.get("prompt_per_second")),
            cached_prompt_tokens=_cached(self._usage, self._timings),
        )
        return ChatReply(
            text=text,
            usage=usage,
            finish_reason="interrupted" if interrupted else (self.finish_reason or "stop"),
        )


def _rate(value: object) -> float | None:
    return round(float(value), 1) if isinstance(value, (int, float)) and value > 0 else None


def _cached(usage: dict[str, Any], timings: dict[str, Any]) -> int | None:
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        return int(details["cached_tokens"])
    if isinstance(timings.get("cache_n"), int):
        return int(timings["cache_n"])
    return None
