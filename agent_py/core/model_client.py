"""How the agent asks the model: fitted to the context window, replies recorded.

Every model call of a run goes through :class:`ModelClient.ask`, so budget fitting, the
``<think>`` split and the assistant/thinking events happen in one place.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from pydantic import BaseModel

from agent_py.core.budget import fit_messages
from agent_py.core.concurrency import deadline
from agent_py.core.errors import PromptTooLargeError
from agent_py.core.events import EventType
from agent_py.core.grammar import compact_grammar
from agent_py.core.history import EventRecorder
from agent_py.core.llm import (
    CallOptions,
    CallPurpose,
    ChatReply,
    LLMError,
    Message,
    ModelRole,
    Sampling,
    Usage,
)
from agent_py.core.managed_llm import ManagedLLM
from agent_py.core.parsing import split_thinking

NO_OPTIONS = CallOptions()

TokenListener = Callable[[str, str | None, str], None]
"""Streaming text: (purpose, step id or None, chunk)."""


class ReplyBudgets(BaseModel):
    """Max tokens of a reply, per purpose. Small defaults keep CPU engines usable."""

    plan: int = 1024
    arguments: int = 512
    generate: int = 1024
    rethink: int = 1024
    answer: int = 1024

    def for_purpose(self, purpose: CallPurpose) -> int:
        return int(getattr(self, purpose.value))


class ModelClient:
    def __init__(
        self,
        llm: ManagedLLM,
        recorder: EventRecorder,
        *,
        context_window: int,
        budgets: ReplyBudgets,
        thinking: bool = False,
        timeout_s: float = 600.0,
        on_token: TokenListener | None = None,
        sampling: Sampling | None = None,
        text_sampling: Sampling | None = None,
        compact_json: bool = False,
    ) -> None:
        self.llm = llm
        self.recorder = recorder
        self.context_window = context_window
        self.budgets = budgets
        self.thinking = thinking
        self.timeout_s = timeout_s
        self.on_token = on_token
        self.sampling = sampling
        self.text_sampling = text_sampling
        self.compact_json = compact_json

    def prompt_budget(self, purpose: CallPurpose) -> int:
        """Tokens a prompt for ``purpose`` may use: the window minus the reply budget. The
        window is the setting, or the engine's own where it says a smaller one."""
        window = min(self.context_window, self.llm.context_window or self.context_window)
        return window - self.budgets.for_purpose(purpose)

    def _sampling_for(self, schema: dict[str, Any] | None) -> Sampling | None:
        """Free text (no schema) may have its own sampling: a repetition guard belongs
        there, not in code or plans, which copy the question's words and numbers."""
        if schema is None and self.text_sampling is not None:
            return self.text_sampling
        return self.sampling

    @asynccontextmanager
    async def unit(self, role: ModelRole) -> AsyncIterator[None]:
        async with self.llm.unit(role):
            yield

    async def prefill(self, messages: list[Message], purpose: CallPurpose) -> Usage | None:
        """Prefill ``messages``, fitted as :meth:`ask` fits them, into the engine's cache, so
        a later call that starts with them skips their prefill (see ``ManagedLLM.prefill``).
        The prefill is bounded like a call (its load is not: a first download may be long,
        and shows its progress)."""
        await self._measure(messages, purpose)
        try:
            fitted = fit_messages(messages, self.prompt_budget(purpose), self.llm.count_tokens)
        except PromptTooLargeError as error:
            raise LLMError(f"{error} (prefilling the {purpose.value} prompt)") from None
        try:
            return await self.llm.prefill(
                fitted,
                purpose,
                max_tokens=self.budgets.for_purpose(purpose),
                timeout_s=self.timeout_s,
            )
        except TimeoutError:
            raise LLMError(
                f"the model did not prefill the {purpose.value} prompt within "
                f"{self.timeout_s:g} s (the model's preparation)"
            ) from None

    async def _measure(self, messages: list[Message], purpose: CallPurpose) -> None:
        """Count the prompt with the engine's tokenizer (``ManagedLLM.measure``), bounded like
        a call: an engine that never answers a count fails the call, not hangs it."""
        texts = [message["content"] for message in messages]
        try:
            await self.llm.measure(texts, timeout_s=self.timeout_s)
        except TimeoutError:
            raise LLMError(
                f"the model engine did not count the {purpose.value} prompt's tokens within "
                f"{self.timeout_s:g} s"
            ) from None

    async def ask(
        self, messages: list[Message], purpose: CallPurpose, options: CallOptions = NO_OPTIONS
    ) -> str:
        """Send ``messages`` and return the reply's text without its ``<think>`` blocks.

        ``options.sampling`` replaces the client's own for this call; ``options.grammar``:
        a GBNF grammar for a reply without a schema, for engines that take one (the others
        ignore it)."""
        reply = await self.reply(messages, purpose, options)
        return reply.text

    async def reply(
        self, messages: list[Message], purpose: CallPurpose, options: CallOptions = NO_OPTIONS
    ) -> ChatReply:
        """Like :meth:`ask`, with why the reply ended (``finish_reason``) and its usage."""
        max_tokens = self.budgets.for_purpose(purpose)
        step, schema = options.step, options.schema
        await self._measure(messages, purpose)
        try:
            fitted = fit_messages(messages, self.prompt_budget(purpose), self.llm.count_tokens)
        except PromptTooLargeError as error:
            raise LLMError(f"{error} (the {purpose.value} call)") from None
        on_token = None
        if self.on_token is not None:
            listener = self.on_token
            on_token = lambda chunk: listener(purpose.value, step, chunk)  # noqa: E731
        sent = replace(
            options,
            sampling=options.sampling or self._sampling_for(schema),
            grammar=(
                compact_grammar(
                    schema, max_chars=max_tokens * 4, spaced=self.llm.json_grammar_spaced
                )
                if schema is not None and self.compact_json
                else options.grammar
            ),
        )
        call = self.llm.chat(
            fitted,
            purpose,
            sent,
            max_tokens=max_tokens,
            thinking=self.thinking,
            on_token=on_token,
        )
        try:
            async with deadline(self.timeout_s):
                reply = await call
        except TimeoutError:
            raise LLMError(
                f"the model did not answer the {purpose.value} call within {self.timeout_s:g} s"
            ) from None
        except LLMError:
            raise
        except Exception as error:  # an engine bug is still the engine's failure, said plainly
            raise LLMError(
                f"the model engine failed in the {purpose.value} call: "
                f"{type(error).__name__}: {error}"
            ) from error
        text, thinking = split_thinking(reply.text)
        if thinking:
            self.recorder.emit(EventType.THINKING, thinking, step=step, purpose=purpose.value)
        self.recorder.emit(
            EventType.ASSISTANT,
            text,
            step=step,
            purpose=purpose.value,
            tool=options.tool,
            finish_reason=reply.finish_reason,
            usage=reply.usage.model_dump(exclude_none=True),
        )
        return reply.model_copy(update={"text": text})
