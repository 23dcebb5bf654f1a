"""A streamed reply put together: the ``data`` lines of a chat-completions stream (server-sent
events, decoded by :class:`~agent_py.mcp.sse.SSEDecoder`) become one :class:`ChatReply`.

Text is passed on to ``on_token`` as it comes; reasoning the server sends apart
(``reasoning_content``) comes back as a leading ``<think>`` block; the usage and speeds are
the server's own where it reports them, else counted here.
"""

from __future__ import annotations

import json
import time
from typing import Any

from agent_py.core.llm import ChatReply, LLMError, TokenCallback, Usage
from agent_py.engines.model_server_errors import error_text


class ReplyBuilder:
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
            raise LLMError(f"the model server failed mid-reply: {error_text(data.encode())}")
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
