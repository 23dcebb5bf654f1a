"""The page's settings, and the one place their defaults are written."""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Literal

from pydantic import AliasChoices, BaseModel, Field, field_validator

from agent_py.core.agent import DEFAULT_MODEL, AgentConfig
from agent_py.core.llm import Sampling
from agent_py.core.managed_llm import ModelRoles, ResidencyPolicy
from agent_py.core.model_client import ReplyBudgets
from agent_py.core.plan import PlanShape
from agent_py.core.profiles import DEFAULT_CPU_MODEL, ModelProfile, Strategy, profile_for
from agent_py.core.review import ReviewPolicy
from agent_py.tools.code import DEFAULT_TIMEOUT_S as JS_TIMEOUT_S


def _as_in_agent(name: str) -> Any:
    """The definition (default and limits) of an :class:`AgentConfig` field, for the page
    setting that means the same."""
    return copy.copy(AgentConfig.model_fields[name])


class PageSettings(BaseModel):
    """The page's settings, and the one place their defaults are written.

    The UI keeps only what the user changed and sends it with ``boot`` and ``configure``;
    what comes back (:meth:`PageSession.settings_info`, in the ``ready`` and ``settings``
    messages) is every setting in effect, the defaults and the chosen profile, which the UI and
    the tests read. ``engine_kind`` (set by the worker: webllm, cpu or scripted) and the model
    choose the :class:`~agent_py.core.profiles.ModelProfile` when ``profile`` is auto.
    ``plan_shape``, ``budgets``, ``strategy`` and ``sampling`` override the profile's, for
    measurements.
    """

    ENGINE_FIELDS: ClassVar[tuple[str, ...]] = (
        "engine",
        "model_url",
        "model_lib_url",
        "cpu_model",
        "cpu_threads",
        "cpu_seed",
        "cpu_temperature",
        "context_window",
        "openai_base_url",
        "openai_model",
    )
    """Read when the worker starts (the engines size their KV cache by ``context_window``):
    a change restarts it."""

    engine: Literal["auto", "webllm", "cpu", "openai"] = "auto"
    """auto: WebLLM on a hardware GPU, else the CPU engine; openai: a model server."""
    model_url: str = ""
    """A self-hosted WebLLM model's weights (its Hugging Face-style folder URL)."""
    model_lib_url: str = ""
    """That model's compiled WebGPU library (.wasm)."""
    cpu_model: str = Field(
        DEFAULT_CPU_MODEL, validation_alias=AliasChoices("cpu_model", "cpu_model_url")
    )
    """The CPU engine's model: a bundled id or a .gguf URL (``cpu_model_url`` is its old name,
    still read from settings a browser kept)."""
    cpu_threads: int = Field(0, ge=0)
    """0: the engine's choice."""
    cpu_seed: int = Field(42, ge=0)
    """The CPU engine's sampling seed: the same task then gives the same run, which makes
    problems reproducible."""
    cpu_temperature: float = Field(0.2, ge=0)
    """The CPU engine's temperature for calls whose profile sets none: a small model wanders
    at llama.cpp's default (0.8)."""

    openai_base_url: str = ""
    """The model server's OpenAI API, e.g. ``http://127.0.0.1:8080/v1``."""
    openai_model: str = ""
    """The model on that server (one of its ``/v1/models``)."""
    openai_api_key: str = Field("", repr=False)
    """Sent as a bearer token; kept in this browser like the MCP servers' tokens, never in
    the history or a log."""
    openai_transport: Literal["auto", "fetch", "bridge"] = "auto"
    """fetch: the page's own (the server must allow the page's origin, CORS); bridge: the
    extension; auto: fetch, then the extension when the browser blocks fetch."""
    openai_format: Literal["auto", "json_schema", "json_object", "grammar", "none"] = "auto"
    """How replies are held to a schema (``agent_py.engines.model_server_request.OutputFormat``);
    auto: by the kind of server. The model server's module is imported only when it is used:
    it brings the MCP package's transports."""
    openai_keep_alive: str = ""
    """Ollama's keep_alive (e.g. ``10m``): how long it keeps the model loaded."""
    openai_silence_s: float = Field(300.0, gt=0, le=900)  # model_server.DEFAULT_SILENCE_S
    """The silence limit: a call fails when the server sends nothing for this long (it
    sends nothing while it prefills a prompt, so a slow machine may need more). At most
    15 minutes: the bridge extension ends any request at that."""

    model: str = DEFAULT_MODEL
    executor_model: str | None = None
    engine_kind: str = ""
    profile: str = "auto"
    residency: ResidencyPolicy = _as_in_agent("residency")
    thinking: bool = _as_in_agent("thinking")
    context_window: int = _as_in_agent("context_window")
    max_tokens: int = Field(1024, ge=64)
    tool_timeout_s: float = _as_in_agent("tool_timeout_s")
    js_timeout_s: float = Field(JS_TIMEOUT_S, gt=0)
    """The time limit of one javascript_execute or python_execute call."""
    review_plans: Literal["auto", "off", "remote", "always"] = "auto"
    """Which plans wait for the user's review before they run: ``remote`` those that call
    an MCP server's tool, ``always``, ``off``; ``auto`` is ``remote`` in the page, ``off`` with
    the scripted test engine (the terminal sets ``off``: nobody is there to review)."""
    max_steps: int = _as_in_agent("max_steps")
    plan_shape: PlanShape | None = None
    budgets: ReplyBudgets | None = None
    """Reply budgets per purpose; without them (and none in the profile) every purpose
    gets ``max_tokens``."""
    strategy: Strategy | None = None
    sampling: Sampling | None = None
    text_sampling: Sampling | None = None

    @field_validator("cpu_model", mode="before")
    @classmethod
    def _kept_empty_means_default(cls, value: object) -> object:
        return value or DEFAULT_CPU_MODEL  # browsers kept "" for "the default"

    @property
    def planner(self) -> str:
        """The model that plans: the CPU engine and a model server run their own (and no
        executor)."""
        if self.engine_kind == "cpu":
            return self.cpu_model
        if self.engine_kind == "openai":
            return self.openai_model
        return self.model

    def model_profile(self) -> ModelProfile:
        return profile_for(self.engine_kind, self.planner, self.profile)

    def review_policy(self) -> ReviewPolicy:
        if self.review_plans == "auto":
            return "off" if self.engine_kind == "scripted" else "remote"
        return self.review_plans

    def agent_config(self) -> AgentConfig:
        profile = self.model_profile()
        budget = min(self.max_tokens, self.context_window // 2)
        budgets = (
            self.budgets
            or profile.budgets
            or ReplyBudgets(
                plan=budget,
                arguments=min(budget, 512),
                generate=budget,
                rethink=budget,
                answer=budget,
            )
        )
        return AgentConfig(
            models=ModelRoles(
                planner=self.planner,
                executor=None
                if self.engine_kind in ("cpu", "openai")
                else self.executor_model or None,
            ),
            residency=self.residency,
            context_window=self.context_window,
            budgets=budgets,
            thinking=self.thinking,
            plan_shape=self.plan_shape or profile.plan_shape,
            strategy=self.strategy or profile.strategy,
            sampling=self.sampling or profile.sampling,
            text_sampling=self.text_sampling or profile.text_sampling,
            max_steps=self.max_steps,
            tool_timeout_s=self.tool_timeout_s,
            review=self.review_policy(),
        )
