"""The model interface: what an engine must do, and what one call to it is.

An engine (WebLLM and the CPU engine in the page, a model server, the scripted engine of
``agent_py.core.scripted_llm``) implements :class:`LLM`. A call's options are one type,
:class:`CallOptions` (what the caller chooses), inside :class:`CallInfo` (what the engine
is told); the page's engines read the same names (``web/worker/engine-port.js``). The agent
never calls an engine directly: it goes through ``agent_py.core.managed_llm.ManagedLLM``,
which serializes calls, picks the model for each role and keeps the residency policy.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent_py.core.budget import estimate_tokens
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
class CallOptions:
    """What the caller of a model call chooses besides its messages and purpose: the one
    definition of these options (``ModelClient.ask`` and ``reply`` take it, and
    :class:`CallInfo` carries it to the engine)."""

    schema: dict[str, Any] | None = None
    """The JSON schema the reply must meet; engines constrain the reply with it."""
    tool: str | None = None
    step: str | None = None
    sampling: Sampling | None = None
    """Replaces the client's own sampling for this call."""
    grammar: str | None = None
    """A GBNF grammar the reply must follow, for engines that take one (llama.cpp); with a
    schema it accepts only replies that meet the schema, which stays the contract for the
    others."""


@dataclass(frozen=True, kw_only=True)
class CallInfo(CallOptions):
    """One call as the engine gets it: the caller's options, the model, the reply's token
    budget and whether the model may think first. The page's engines get it as JSON under
    the same names (``agent_py.page.ports.call_json``)."""

    purpose: CallPurpose
    model: str
    max_tokens: int
    thinking: bool = False

    @classmethod
    def of(
        cls,
        options: CallOptions,
        *,
        purpose: CallPurpose,
        model: str,
        max_tokens: int,
        thinking: bool = False,
    ) -> CallInfo:
        chosen = {f.name: getattr(options, f.name) for f in fields(CallOptions)}
        return cls(purpose=purpose, model=model, max_tokens=max_tokens, thinking=thinking, **chosen)


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
