"""The agent's view of an engine (:class:`ManagedLLM`): one call at a time, the model of
each role, the :class:`ResidencyPolicy` that decides when a model is loaded and unloaded,
the counts of calls, reloads, unloads and tokens, and the token counts the engine's own
tokenizer gives."""

from __future__ import annotations

import asyncio
import contextvars
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from agent_py.core.budget import prompt_tokens
from agent_py.core.concurrency import deadline
from agent_py.core.errors import MemoryPressureError
from agent_py.core.llm import (
    LLM,
    ROLE_OF_PURPOSE,
    CallInfo,
    CallOptions,
    CallPurpose,
    ChatReply,
    Message,
    ModelRole,
    TokenCallback,
    Usage,
)


class ResidencyPolicy(StrEnum):
    """When the model is loaded.

    ``per_step``: reload before each unit of model work (planning, a step, a rethink, the
    answer) and unload after, freeing GPU memory in between. ``keep_warm``: load once, unload
    on close. ``auto``: keep warm, but behave as per_step when the roles use different models
    or after the engine reported memory pressure.
    """

    PER_STEP = "per_step"
    KEEP_WARM = "keep_warm"
    AUTO = "auto"


class ModelRoles(BaseModel):
    """The model for each role; the executor uses the planner's model unless named."""

    planner: str
    executor: str | None = None

    def model_for(self, role: ModelRole) -> str:
        if role is ModelRole.EXECUTOR and self.executor:
            return self.executor
        return self.planner


@dataclass
class ModelStats:
    calls: Counter[str] = field(default_factory=Counter)
    reloads: int = 0
    unloads: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_time_s: float = 0.0

    def snapshot(self) -> ModelStats:
        return ModelStats(
            Counter(self.calls),
            self.reloads,
            self.unloads,
            self.prompt_tokens,
            self.completion_tokens,
            self.model_time_s,
        )

    def since(self, earlier: ModelStats) -> ModelStats:
        return ModelStats(
            self.calls - earlier.calls,
            self.reloads - earlier.reloads,
            self.unloads - earlier.unloads,
            self.prompt_tokens - earlier.prompt_tokens,
            self.completion_tokens - earlier.completion_tokens,
            self.model_time_s - earlier.model_time_s,
        )


ModelEventCallback = Callable[[str, dict[str, Any]], None]
EXACT_COUNTS_KEPT = 4096
"""Texts whose real token counts are kept (the fixed prompt parts, each run's messages)."""

# Set while a unit of model work holds the engine under per_step, so nested units and the
# calls inside them do not reload again. Context variables follow asyncio tasks.
_in_unit: contextvars.ContextVar[bool] = contextvars.ContextVar("agent_py_in_unit", default=False)


class ManagedLLM:
    """The agent's view of an engine: one call at a time, the right model for each role."""

    def __init__(
        self,
        llm: LLM,
        roles: ModelRoles,
        policy: ResidencyPolicy = ResidencyPolicy.AUTO,
        *,
        on_model_event: ModelEventCallback | None = None,
    ) -> None:
        self.llm = llm
        self.roles = roles
        self.policy = policy
        self.stats = ModelStats()
        self._on_model_event = on_model_event
        self._memory_pressure = False
        self.tokens_per_estimate = 1.0
        """Real prompt tokens per estimated token, at least 1 (see :meth:`_calibrate`)."""
        self._exact: dict[tuple[str, str], int] = {}
        """Token counts by the engine's tokenizer, per (model, text) (see :meth:`measure`)."""
        self._call_lock = asyncio.Lock()
        self._unit_lock = asyncio.Lock()

    @property
    def effective_policy(self) -> ResidencyPolicy:
        if self.policy is not ResidencyPolicy.AUTO:
            return self.policy
        two_models = self.roles.model_for(ModelRole.PLANNER) != self.roles.model_for(
            ModelRole.EXECUTOR
        )
        if two_models or self._memory_pressure:
            return ResidencyPolicy.PER_STEP
        return ResidencyPolicy.KEEP_WARM

    @property
    def context_window(self) -> int | None:
        return self.llm.context_window

    @property
    def json_grammar_spaced(self) -> bool:
        return self.llm.json_grammar_spaced

    def count_tokens(self, text: str) -> int:
        """The count by the engine's tokenizer where :meth:`measure` took it; else the
        engine's estimate, scaled up once a reply showed that it under-counts."""
        exact = self._exact.get((self.llm.loaded_model or "", text))
        if exact is not None:
            return exact
        return math.ceil(self.llm.count_tokens(text) * self.tokens_per_estimate)

    async def measure(self, texts: Sequence[str], *, timeout_s: float | None = None) -> None:
        """Count ``texts`` with the loaded model's tokenizer, where the engine has one, so
        :meth:`count_tokens` gives real counts for them. Nothing is loaded for it: before the
        first load (the page loads the model while the user types) the estimate stands.
        Past ``timeout_s`` of counting (waiting for another call not counted) it raises
        ``TimeoutError``."""
        model = self.llm.loaded_model
        if model is None:
            return
        wanted = sorted({text for text in texts if (model, text) not in self._exact})
        if not wanted:
            return
        async with self._call_lock:
            if self.llm.loaded_model != model:
                return
            if timeout_s is None:
                counts = await self.llm.count_tokens_exact(wanted)
            else:
                async with deadline(timeout_s):
                    counts = await self.llm.count_tokens_exact(wanted)
        if counts is None or len(counts) != len(wanted):
            return
        if len(self._exact) + len(wanted) > EXACT_COUNTS_KEPT:
            self._exact.clear()  # prompts of earlier runs; the fixed parts come back at once
        self._exact.update(
            {(model, text): count for text, count in zip(wanted, counts, strict=True)}
        )

    def _calibrate(self, messages: list[Message], reply: ChatReply) -> None:
        """Learn from the prompt tokens the engine's own tokenizer counted. Only an estimate
        that fell short changes the count (numbers and non-Latin text run denser than the
        byte rule); one that over-counts stays, on the safe side."""
        estimated = prompt_tokens(messages, self.llm.count_tokens)
        if reply.usage.prompt_tokens <= 0 or estimated < 200:  # a template's own tokens
            return  # weigh too much in a short prompt
        ratio = reply.usage.prompt_tokens / max(estimated, 1)
        if ratio > self.tokens_per_estimate:
            self.tokens_per_estimate = min(ratio * 1.05, 4.0)

    @asynccontextmanager
    async def unit(self, role: ModelRole) -> AsyncIterator[None]:
        """A unit of model work. Under per_step the model is loaded for it and unloaded after,
        and the unit holds the engine: concurrent steps take turns."""
        if _in_unit.get() or self.effective_policy is not ResidencyPolicy.PER_STEP:
            yield
            return
        async with self._unit_lock:
            token = _in_unit.set(True)
            try:
                async with self._call_lock:
                    await self._reload(self.roles.model_for(role))
                yield
            finally:
                _in_unit.reset(token)
                async with self._call_lock:
                    if self.llm.loaded_model is not None:
                        await self._unload()

    async def chat(
        self,
        messages: list[Message],
        purpose: CallPurpose,
        options: CallOptions,
        *,
        max_tokens: int,
        thinking: bool = False,
        on_token: TokenCallback | None = None,
    ) -> ChatReply:
        role = ROLE_OF_PURPOSE[purpose]
        call = CallInfo.of(
            options,
            purpose=purpose,
            model=self.roles.model_for(role),
            max_tokens=max_tokens,
            thinking=thinking,
        )
        if not _in_unit.get() and self.effective_policy is ResidencyPolicy.PER_STEP:
            async with self.unit(role):
                return await self._send(messages, call, on_token)
        return await self._send(messages, call, on_token)

    async def _send(
        self, messages: list[Message], call: CallInfo, on_token: TokenCallback | None
    ) -> ChatReply:
        """One chat call, the model loaded first; on memory pressure (``auto``), freed and
        loaded again once."""
        model = call.model
        async with self._call_lock:
            if self.llm.loaded_model != model:
                await self._reload(model)
            try:
                reply = await self._timed_chat(messages, call, on_token)
            except MemoryPressureError as error:
                if self.policy is not ResidencyPolicy.AUTO:
                    raise
                # Free what the engine holds, load again, and from now on unload between units.
                self._memory_pressure = True
                self._emit("memory_pressure", {"error": str(error)})
                await self._unload()
                await self._reload(model)
                reply = await self._timed_chat(messages, call, on_token)
        return reply

    async def interrupt(self) -> None:
        await self.llm.interrupt()

    async def prefill(
        self,
        messages: list[Message],
        purpose: CallPurpose,
        *,
        max_tokens: int,
        timeout_s: float,
    ) -> Usage | None:
        """Load the model of ``purpose``'s role and prefill ``messages`` into the engine's
        cache, between runs: not counted in any run's stats. None when there is nothing to
        keep it for (per_step unloads after each unit) or the engine cannot. Past
        ``timeout_s`` of prefill (the load not counted) it raises ``TimeoutError``."""
        if self.effective_policy is ResidencyPolicy.PER_STEP:
            return None
        model = self.roles.model_for(ROLE_OF_PURPOSE[purpose])
        call = CallInfo(purpose=purpose, model=model, max_tokens=max_tokens)
        async with self._call_lock:
            if self.llm.loaded_model != model:
                await self.llm.reload(model)  # before any run: no run's event or count
            try:
                async with deadline(timeout_s):
                    return await self.llm.prefill(messages, call)
            except (asyncio.CancelledError, TimeoutError):
                await self.llm.interrupt()
                raise

    async def close(self) -> None:
        async with self._call_lock:
            if self.llm.loaded_model is not None:
                await self._unload()

    async def _timed_chat(
        self, messages: list[Message], call: CallInfo, on_token: TokenCallback | None
    ) -> ChatReply:
        self.stats.calls[call.purpose.value] += 1
        started = time.perf_counter()
        try:
            reply = await self.llm.chat(messages, call, on_token)
        except asyncio.CancelledError:
            await self.llm.interrupt()
            raise
        finally:
            self.stats.model_time_s += time.perf_counter() - started
        self.stats.prompt_tokens += reply.usage.prompt_tokens
        self.stats.completion_tokens += reply.usage.completion_tokens
        self._calibrate(messages, reply)
        return reply

    async def _reload(self, model: str) -> None:
        started = time.perf_counter()
        await self.llm.reload(model)
        self.stats.reloads += 1
        self.stats.model_time_s += time.perf_counter() - started
        self._emit("reload", {"model": model, "reloads": self.stats.reloads})

    async def _unload(self) -> None:
        await self.llm.unload()
        self.stats.unloads += 1
        self._emit("unload", {"unloads": self.stats.unloads})

    def _emit(self, action: str, meta: dict[str, Any]) -> None:
        if self._on_model_event is not None:
            self._on_model_event(action, meta)
