"""A scripted engine: an :class:`~agent_py.core.llm.LLM` defined by a Python function of
the messages and the call, for tests and demos only (always chosen explicitly)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from agent_py.core.llm import (
    LLM,
    CallInfo,
    CallPurpose,
    ChatReply,
    LLMError,
    Message,
    ModelNotLoadedError,
    TokenCallback,
    Usage,
)

ScriptFunction = Callable[
    [list[Message], CallInfo], str | ChatReply | Awaitable[str] | Awaitable[ChatReply]
]
Reply = str | ChatReply | ScriptFunction
"""Text, or a whole reply where a test needs its finish_reason (a reply the token budget
ended: ``ChatReply(text=..., finish_reason="length")``)."""


class ScriptedLLM(LLM):
    """An engine defined by a Python function of the messages and the call.

    For tests and demos only, and always chosen explicitly. It behaves like a real engine in
    what the agent can observe: it must be loaded with the model a call names, it streams its
    reply through ``on_token`` and it reports usage. ``calls`` records every call.
    """

    def __init__(self, script: ScriptFunction, *, reply_delay_s: float = 0.0) -> None:
        self._script = script
        self._reply_delay_s = reply_delay_s
        self._loaded: str | None = None
        self._cached = ""  # the last prompt, as an engine's KV cache keeps it
        self.calls: list[tuple[list[Message], CallInfo]] = []
        self.prefills: list[list[Message]] = []
        self.load_history: list[str] = []

    @classmethod
    def replaying(
        cls, replies: Mapping[CallPurpose | str, Reply | Sequence[Reply]], **options: Any
    ) -> ScriptedLLM:
        """Replies per purpose: one reply for every call, or a list used in order (the last
        one repeats). A reply is text, a ChatReply or a function of (messages, call)."""
        queues: dict[CallPurpose, list[Reply]] = {}
        for purpose, given in replies.items():
            items: list[Reply]
            if isinstance(given, str | ChatReply) or callable(given):
                items = [given]
            else:
                items = list(given)
            if not items:
                raise ValueError(f"no replies given for {purpose}")
            queues[CallPurpose(purpose)] = items

        def script(
            messages: list[Message], call: CallInfo
        ) -> str | ChatReply | Awaitable[str] | Awaitable[ChatReply]:
            queue = queues.get(call.purpose)
            if queue is None:
                raise LLMError(f"the script has no reply for a {call.purpose.value} call")
            reply = queue.pop(0) if len(queue) > 1 else queue[0]
            return reply(messages, call) if callable(reply) else reply

        return cls(script, **options)

    @property
    def loaded_model(self) -> str | None:
        return self._loaded

    async def reload(self, model: str) -> None:
        self._loaded = model
        self._cached = ""
        self.load_history.append(model)

    async def unload(self) -> None:
        self._loaded = None
        self._cached = ""

    async def prefill(self, messages: list[Message], call: CallInfo) -> Usage | None:
        """Keeps the prompt as llama.cpp keeps its KV cache: the next call reports the tokens
        of the text it shares with it as ``cached_prompt_tokens``."""
        if self._loaded != call.model:
            raise ModelNotLoadedError(
                f"model {call.model!r} is not loaded (loaded: {self._loaded!r})"
            )
        self.prefills.append([dict(m) for m in messages])  # type: ignore[misc]
        return self._usage_of(messages, "")

    async def chat(
        self, messages: list[Message], call: CallInfo, on_token: TokenCallback | None = None
    ) -> ChatReply:
        if self._loaded != call.model:
            raise ModelNotLoadedError(
                f"model {call.model!r} is not loaded (loaded: {self._loaded!r})"
            )
        self.calls.append(([dict(m) for m in messages], call))  # type: ignore[misc]
        scripted = self._script(messages, call)
        reply = await scripted if inspect.isawaitable(scripted) else scripted
        text = reply.text if isinstance(reply, ChatReply) else reply
        finish_reason = reply.finish_reason if isinstance(reply, ChatReply) else "stop"
        if self._reply_delay_s:
            await asyncio.sleep(self._reply_delay_s)
        if on_token is not None:
            for start in range(0, len(text), 16):
                on_token(text[start : start + 16])
        return ChatReply(
            text=text, usage=self._usage_of(messages, text), finish_reason=finish_reason
        )

    def _usage_of(self, messages: list[Message], text: str) -> Usage:
        prompt = "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages)
        shared = next(
            (i for i, (a, b) in enumerate(zip(prompt, self._cached, strict=False)) if a != b),
            min(len(prompt), len(self._cached)),
        )
        self._cached = prompt + text
        return Usage(
            prompt_tokens=sum(self.count_tokens(m["content"]) for m in messages),
            completion_tokens=self.count_tokens(text),
            cached_prompt_tokens=self.count_tokens(prompt[:shared]) if shared else 0,
        )
