"""The model interface: what an engine must do, a scripted engine for tests and demos, and
the residency policy that decides when a model is loaded and unloaded.

An engine (WebLLM in the page, the CPU engine, :class:`ScriptedLLM` here) implements
:class:`LLM`. The agent never calls an engine directly: it goes through :class:`ManagedLLM`,
which serializes calls, picks the model for each role, applies the :class:`ResidencyPolicy`
and counts calls, reloads, unloads and tokens.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import math
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent_py.core.budget import estimate_tokens, prompt_tokens
from agent_py.core.concurrency import deadline
from agent_py.core.errors import LLMError as LLMError  # re-exported: part of the model interface
from agent_py.core.errors import MemoryPressureError as MemoryPressureError
from agent_py.core.errors import ModelNotLoadedError as ModelNotLoadedError
from agent_py.core.messages import Message as Message  # part of the model interface


class CallPurpose(StrEnum):
    PLAN = "plan"
    ARGUMENTS = "arguments"
    GENERATE = "generate"
    RETHINK = "rethink"
    ANSWER = "answer"


class ModelRole(StrEnum):
    PLANNER = "planner"
    EXECUTOR = "executor"


ROLE_OF_PURPOSE: dict[CallPurpose, ModelRole] = {
    CallPurpose.PLAN: ModelRole.PLANNER,
    CallPurpose.RETHINK: ModelRole.PLANNER,
    CallPurpose.ANSWER: ModelRole.PLANNER,
    CallPurpose.ARGUMENTS: ModelRole.EXECUTOR,
    CallPurpose.GENERATE: ModelRole.EXECUTOR,
}


class Sampling(BaseModel):
    """How an engine picks tokens; None leaves the engine's own default.

    The repetition guards matter most for small models, which otherwise loop inside a
    string until the reply budget is spent. Engines apply the fields they support and
    ignore the rest.
    """

    model_config = ConfigDict(frozen=True)

    temperature: float | None = Field(None, ge=0)
    top_k: int | None = Field(None, ge=0)
    top_p: float | None = Field(None, ge=0, le=1)
    min_p: float | None = Field(None, ge=0, le=1)
    repeat_penalty: float | None = Field(None, ge=0)
    repeat_last_n: int | None = Field(None, ge=-1)
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    dry_multiplier: float | None = Field(None, ge=0)
    dry_base: float | None = Field(None, ge=1)
    dry_allowed_length: int | None = Field(None, ge=1)
    dry_penalty_last_n: int | None = Field(None, ge=-1)
    seed: int | None = None


@dataclass(frozen=True, kw_only=True)
class CallInfo:
    """What a chat call is for, by name only. Engines use ``schema`` to constrain the reply;
    the page's engines get it as ``agent_py.page.ports.EngineCall``, under the same names."""

    purpose: CallPurpose
    model: str
    max_tokens: int
    schema: dict[str, Any] | None = None
    thinking: bool = False
    tool: str | None = None
    step: str | None = None
    sampling: Sampling | None = None
    grammar: str | None = None
    """A GBNF grammar the reply must follow, for engines that take one (llama.cpp); it
    accepts only replies that meet ``schema``, which stays the contract for the others."""


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prefill_tokens_per_s: float | None = None
    decode_tokens_per_s: float | None = None
    time_to_first_token_s: float | None = None
    cached_prompt_tokens: int | None = None
    """Prompt tokens whose KV cache an earlier call (or a prefill) left in place, so the
    engine did not compute them again; None where the engine does not say."""
    forced_tokens: int | None = None
    """Of ``completion_tokens``, those a grammar allowed alone, which the engine wrote
    without sampling (the CPU engine); None where the engine does not say."""


class ChatReply(BaseModel):
    text: str
    usage: Usage = Usage()
    finish_reason: str = "stop"


TokenCallback = Callable[[str], None]


class LLM(ABC):
    """An engine that holds at most one model at a time."""

    @property
    @abstractmethod
    def loaded_model(self) -> str | None: ...

    @abstractmethod
    async def reload(self, model: str) -> None:
        """Load ``model``, unloading whatever was loaded."""

    @abstractmethod
    async def unload(self) -> None: ...

    @abstractmethod
    async def chat(
        self, messages: list[Message], call: CallInfo, on_token: TokenCallback | None = None
    ) -> ChatReply: ...

    async def interrupt(self) -> None:  # noqa: B027 - optional: not every engine can
        """Stop the generation under way, if the engine can (WebLLM's interruptGenerate)."""

    async def prefill(self, messages: list[Message], call: CallInfo) -> Usage | None:
        """Compute the KV cache of ``messages`` (a prompt that later calls start with) and
        keep it, so those calls prefill only what follows. None: this engine keeps no cache
        to fill (the default)."""
        return None

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)

    async def count_tokens_exact(self, texts: list[str]) -> list[int] | None:
        """Each text's token count by the loaded model's own tokenizer, or None where the
        engine has none to offer (then :meth:`count_tokens` estimates)."""
        return None

    @property
    def context_window(self) -> int | None:
        """The loaded model's context window where the engine knows it (a model server
        says its own); None: the agent's setting is the window."""
        return None

    json_grammar_spaced: bool = False
    """Whether the JSON grammars sent to this engine put json.dumps's space after each comma
    and colon (agent_py/core/grammar.py). The CPU engine writes the text a grammar forces (keys,
    separators) itself, tokenized as plain text: only with these spaces are those tokens the
    ones the worked examples in the prompt are made of, which the model then reads as its
    own. Engines that sample every token choose their own split either way."""


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
        *,
        max_tokens: int,
        schema: dict[str, Any] | None = None,
        thinking: bool = False,
        tool: str | None = None,
        step: str | None = None,
        sampling: Sampling | None = None,
        grammar: str | None = None,
        on_token: TokenCallback | None = None,
    ) -> ChatReply:
        role = ROLE_OF_PURPOSE[purpose]
        call = CallInfo(
            purpose=purpose,
            model=self.roles.model_for(role),
            max_tokens=max_tokens,
            schema=schema,
            thinking=thinking,
            tool=tool,
            step=step,
            sampling=sampling,
            grammar=grammar,
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
