"""The agent in the page: the Python side of the worker bridge.

The worker (``web/worker.js``) hands :class:`PageSession` a bridge object whose methods are
JavaScript functions. Only JSON strings cross the boundary, in both directions, so no proxy
outlives a call. Bridge methods never reject: failures come back as
``{"ok": false, "error": {"kind": ..., "message": ...}}``.

Bridge methods (all but ``emit`` and ``mcpStatus`` return a promise of a JSON string; the
JSON is typed here):

- ``engineReload(model)``, ``engineUnload()``, ``engineInterrupt()`` → :class:`EngineReply`
- ``engineChat(messages_json, call_json)``: ``call_json`` is an :class:`EngineCall` →
  :class:`EngineReply` with the text, the usage and the finish reason
- ``enginePrefill(messages_json, call_json)``: the engine computes and keeps the prompt's KV
  cache (no reply) → :class:`EngineReply` with the usage; ``prefilled`` is false where the
  engine keeps no cache to fill
- ``runJavaScript(code, timeout_ms, output_limit)`` → the tool's own
  :class:`~agent_py.tools.javascript.JSRunResult`
- ``emit(event_json)``: an agent event for the UI (and the session store).
- ``mcpStatus(status_json)``: an MCP server's state for the servers panel (not an agent
  event: it is not stored in the session history). Called only once servers are configured.

MCP servers reach the network through a second object, ``http``
(:class:`~agent_py.mcp.browser_transport.HttpBridge`: the worker's fetch, or the bridge
extension). :meth:`PageSession.configure_servers` connects them; their tools join the
agent's tools, named ``<server>__<tool>``, from the next run. A third, ``user``
(:class:`~agent_py.mcp.browser_user.UserBridge`), lets a server without a token sign the
user in with OAuth (a popup) and ask the user questions (elicitation forms).

This module imports nothing from Pyodide, so it is tested in CPython too. It imports the MCP
package (and its wire types, the largest import of all) only when a server is configured,
so a page without servers starts without it.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from agent_py.agent import DEFAULT_MODEL, Agent, AgentConfig
from agent_py.errors import SetupError
from agent_py.events import Event
from agent_py.llm import (
    LLM,
    CallInfo,
    ChatReply,
    LLMError,
    MemoryPressureError,
    Message,
    ModelRoles,
    ResidencyPolicy,
    Sampling,
    TokenCallback,
    Usage,
)
from agent_py.model_client import ReplyBudgets
from agent_py.plan import PlanShape
from agent_py.profiles import DEFAULT_CPU_MODEL, ModelProfile, Strategy, profile_for
from agent_py.tools.base import ToolBase
from agent_py.tools.javascript import DEFAULT_TIMEOUT_S as JS_TIMEOUT_S
from agent_py.tools.javascript import JavascriptExecutor, JSRunResult
from agent_py.tools.llm_generator import LLMGenerator

if TYPE_CHECKING:
    from agent_py.mcp.auth import Authorizer
    from agent_py.mcp.browser_transport import HttpBridge
    from agent_py.mcp.browser_user import PageTokenStore, UserBridge
    from agent_py.mcp.host import MCPClientHost, MCPServerConfig, MCPServerStatus
    from agent_py.mcp.transport import HTTPTransport


class Bridge(Protocol):
    """The worker's JavaScript object; method names are JavaScript's."""

    def engineReload(self, model: str) -> Awaitable[str]: ...
    def engineUnload(self) -> Awaitable[str]: ...
    def engineInterrupt(self) -> Awaitable[str]: ...
    def engineChat(self, messages_json: str, call_json: str) -> Awaitable[str]: ...
    def enginePrefill(self, messages_json: str, call_json: str) -> Awaitable[str]: ...
    def runJavaScript(self, code: str, timeout_ms: int, output_limit: int) -> Awaitable[str]: ...
    def emit(self, event_json: str) -> None: ...
    def mcpStatus(self, status_json: str) -> None: ...


class EngineCall(BaseModel):
    """What ``engineChat`` is given besides the messages (the engines in ``web/engines/``
    read these names)."""

    purpose: str
    model: str
    max_tokens: int
    json_schema: dict[str, Any] | None = Field(None, serialization_alias="schema")
    """The reply's JSON schema, sent as ``schema``."""
    thinking: bool = False
    tool: str | None = None
    step: str | None = None
    sampling: dict[str, Any] | None = None
    grammar: str | None = None

    @classmethod
    def of(cls, call: CallInfo) -> EngineCall:
        return cls(
            purpose=call.purpose.value,
            model=call.model,
            max_tokens=call.max_tokens,
            json_schema=call.schema,
            thinking=call.thinking,
            tool=call.tool,
            step=call.step,
            sampling=call.sampling.model_dump(exclude_none=True) if call.sampling else None,
            grammar=call.grammar,
        )


class EngineFailure(BaseModel):
    kind: str = "engine"
    """``memory`` (the GPU or the tab ran out), ``config``, ``engine``, ``aborted`` ...
    (``web/engines/errors.js``)."""
    message: str = "the engine failed"


class EngineReply(BaseModel):
    """What every engine bridge method resolves to: ``ok`` with the chat's reply, or the
    failure."""

    model_config = ConfigDict(extra="ignore")

    ok: bool
    text: str = ""
    usage: Usage = Usage()
    finish_reason: str = "stop"
    prefilled: bool = False
    """``enginePrefill`` only: the engine kept the prompt's cache."""
    error: EngineFailure = EngineFailure()


# What ``runJavaScript`` resolves to (the UI's sandbox, ``web/sandbox-host.js``): the tool's
# own result, read straight from the JSON.
SANDBOX_RESULT: TypeAdapter[JSRunResult] = TypeAdapter(JSRunResult)


def _checked(reply_json: str) -> EngineReply:
    """Parse an engine bridge reply and turn ``ok: false`` into the matching exception."""
    try:
        reply = EngineReply.model_validate_json(reply_json)
    except (TypeError, ValueError):
        raise LLMError(f"the engine bridge sent an unreadable reply: {reply_json!r:.200}") from None
    if not reply.ok:
        if reply.error.kind == "memory":
            raise MemoryPressureError(reply.error.message)
        raise LLMError(reply.error.message)
    return reply


class BridgeLLM(LLM):
    """An engine in JavaScript (WebLLM, the CPU engine, the scripted test engine).

    Tokens stream from the engine to the UI on the JavaScript side, so ``on_token`` is not
    used here: no per-token crossing into Python.
    """

    def __init__(self, bridge: Bridge) -> None:
        self._bridge = bridge
        self._loaded: str | None = None

    @property
    def loaded_model(self) -> str | None:
        return self._loaded

    async def reload(self, model: str) -> None:
        self._loaded = None
        _checked(await self._bridge.engineReload(model))
        self._loaded = model

    async def unload(self) -> None:
        self._loaded = None
        _checked(await self._bridge.engineUnload())

    async def interrupt(self) -> None:
        _checked(await self._bridge.engineInterrupt())

    async def chat(
        self, messages: list[Message], call: CallInfo, on_token: TokenCallback | None = None
    ) -> ChatReply:
        call_json = EngineCall.of(call).model_dump_json(by_alias=True)
        reply = _checked(await self._bridge.engineChat(json.dumps(messages), call_json))
        return ChatReply(text=reply.text, usage=reply.usage, finish_reason=reply.finish_reason)

    async def prefill(self, messages: list[Message], call: CallInfo) -> Usage | None:
        call_json = EngineCall.of(call).model_dump_json(by_alias=True)
        reply = _checked(await self._bridge.enginePrefill(json.dumps(messages), call_json))
        return reply.usage if reply.prefilled else None


class BridgeJSRunner:
    """Runs ``javascript_execute`` code in the page's sandbox (a fresh Worker per call)."""

    def __init__(self, bridge: Bridge) -> None:
        self._bridge = bridge

    async def run(self, code: str, *, timeout_s: float, output_limit: int) -> JSRunResult:
        raw = await self._bridge.runJavaScript(code, int(timeout_s * 1000), output_limit)
        try:
            return SANDBOX_RESULT.validate_json(raw)
        except (TypeError, ValueError):
            return JSRunResult(error="the sandbox sent an unreadable reply")


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
    choose the :class:`~agent_py.profiles.ModelProfile` when ``profile`` is auto.
    ``plan_shape``, ``budgets``, ``strategy`` and ``sampling`` override the profile's, for
    measurements.
    """

    ENGINE_FIELDS: ClassVar[tuple[str, ...]] = (
        "engine",
        "model_url",
        "model_lib_url",
        "cpu_model",
        "cpu_threads",
        "context_window",
    )
    """Read when the worker starts (the engines size their KV cache by ``context_window``):
    a change restarts it."""

    engine: Literal["auto", "webllm", "cpu"] = "auto"
    """auto: WebLLM on a hardware GPU, else the CPU engine."""
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
        """The model that plans: the CPU engine runs its own (and no executor)."""
        return self.cpu_model if self.engine_kind == "cpu" else self.model

    def model_profile(self) -> ModelProfile:
        return profile_for(self.engine_kind, self.planner, self.profile)

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
                executor=None if self.engine_kind == "cpu" else self.executor_model or None,
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
        )


class PageSession:
    """One conversation in the page: an agent that lives across turns until reconfigured,
    and the MCP servers whose tools it may use."""

    def __init__(
        self,
        bridge: Bridge,
        session: str | None = None,
        *,
        http: HttpBridge | None = None,
        user: UserBridge | None = None,
    ) -> None:
        self._bridge = bridge
        # Looked up once: reading an attribute of a JavaScript object from Python is a
        # crossing of its own, and every event takes this path.
        self._send_event = bridge.emit
        self._session = session
        self._settings = PageSettings()
        self._agent: Agent | None = None
        self._builtin_names: list[str] = []
        self._servers: dict[str, MCPServerConfig] = {}
        self._http = http
        self._user = user
        self._auth_records: dict[str, Any] = {}  # kept until the MCP host exists
        self._auth_store: PageTokenStore | None = None
        self._host: MCPClientHost | None = None  # made when the first server is configured

    def _mcp(self) -> MCPClientHost:
        """The MCP host, made (and the MCP package imported) on first use."""
        if self._host is None:
            from agent_py.mcp.browser_transport import browser_transport_factory
            from agent_py.mcp.browser_user import PageTokenStore, page_elicitation
            from agent_py.mcp.host import MCPClientHost

            user = self._user
            if user is not None:
                self._auth_store = PageTokenStore(user)
                self._auth_store.replace(self._auth_records)
            self._host = MCPClientHost(
                transport_factory=(
                    browser_transport_factory(self._http) if self._http else _no_network
                ),
                on_status=self._server_status,
                on_elicit=page_elicitation(user) if user is not None else None,
                authorizer_factory=self._authorizer if user is not None else None,
            )
        return self._host

    @property
    def session(self) -> str | None:
        return self._agent.session if self._agent else self._session

    async def configure(self, settings_json: str) -> str:
        """Apply the user's settings (what differs from the defaults); a change takes effect
        from the next run (the model is unloaded). Returns :meth:`settings_info`."""
        try:
            settings = PageSettings.model_validate_json(settings_json)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in e['loc']) or 'settings'}: {e['msg']}"
                for e in error.errors()
            )
            raise SetupError(f"these settings cannot be used: {problems}") from None
        settings.model_profile()  # an unknown profile name fails here, not at the run
        if settings != self._settings and self._agent is not None:
            self._session = self._agent.session  # keep the conversation's session id
            await self._agent.close()
            self._agent = None
        self._settings = settings
        return self.settings_info()

    def settings_info(self) -> str:
        """The settings for the UI, as JSON: every value in effect, the defaults, which of
        them restart the worker, and the model profile they choose."""
        return json.dumps(
            {
                "values": self._settings.model_dump(mode="json"),
                "defaults": PageSettings().model_dump(mode="json"),
                "engine_fields": list(PageSettings.ENGINE_FIELDS),
                "profile": self._settings.model_profile().model_dump(mode="json"),
            }
        )

    # MCP servers.

    async def configure_servers(self, servers_json: str) -> str:
        """Make the MCP servers those of ``servers_json`` (the panel's list): connect new and
        changed ones concurrently, drop removed ones, leave unchanged ones connected. One
        server's failure never stops the others. Returns every server's status as JSON;
        each change is also reported through ``mcpStatus`` as it happens."""
        items = json.loads(servers_json)
        if not items and self._host is None:
            return "[]"  # no servers, none before: the MCP package stays unimported
        from agent_py.mcp.host import MCPServerConfig, MCPServerStatus
        from agent_py.mcp.results import describe_validation_error

        wanted: dict[str, MCPServerConfig] = {}
        invalid: list[MCPServerStatus] = []
        for item in items if isinstance(items, list) else []:
            try:
                config = MCPServerConfig.model_validate(item)
            except ValidationError as error:
                name = str(item.get("name") or "?") if isinstance(item, dict) else "?"
                url = str(item.get("url") or "") if isinstance(item, dict) else ""
                status = MCPServerStatus(
                    name=name,
                    url=url,
                    state="error",
                    error=f"These settings cannot be used: {describe_validation_error(error)}.",
                )
                invalid.append(status)
                self._server_status(status)
                continue
            wanted[config.name] = config
        host = self._mcp()
        for name in [n for n in self._servers if n not in wanted]:
            del self._servers[name]
            await host.remove_server(name)
        changed = [c for name, c in wanted.items() if self._servers.get(name) != c]
        self._servers.update({c.name: c for c in changed})
        await asyncio.gather(*(host.add_server(c) for c in changed))
        return self._statuses_json([*host.statuses(), *invalid])

    def set_auth_records(self, records_json: str) -> None:
        """The OAuth registrations and tokens the page kept (``{server url: record}``)."""
        records = json.loads(records_json)
        if isinstance(records, dict):
            self._auth_records = records
            if self._auth_store is not None:
                self._auth_store.replace(records)

    async def forget_sign_in(self, name: str) -> str:
        """Forget a server's OAuth tokens and registration, and connect it again."""
        config = self._servers.get(name)
        if config is not None and self._auth_store is not None:
            self._auth_store.forget(config.url)
            await self._mcp().reconnect(name)
        return self.server_statuses()

    def _authorizer(self, config: MCPServerConfig, transport: HTTPTransport) -> Authorizer | None:
        if config.token is not None or self._user is None or self._auth_store is None:
            return None  # a configured token is used as it is
        from agent_py.mcp.browser_user import PopupFrontEnd
        from agent_py.mcp.oauth import OAuthAuthorizer, OAuthSettings

        front_end = PopupFrontEnd(
            self._user, server=config.name, redirect_uri=str(self._user.callbackUrl)
        )
        return OAuthAuthorizer(
            config.url,
            transport,
            settings=OAuthSettings(client_name="agent_py (browser page)"),
            store=self._auth_store,
            front_end=front_end,
        )

    async def reconnect_server(self, name: str) -> str:
        """Connect a server again (it restarted, or the extension was just set up)."""
        if name not in self._servers:
            return self.server_statuses()
        await self._mcp().reconnect(name)
        return self.server_statuses()

    def server_statuses(self) -> str:
        return self._statuses_json(self._host.statuses() if self._host else [])

    def _mcp_tools(self) -> list[ToolBase]:
        return list(self._host.tools()) if self._host else []

    def _status_data(self, status: MCPServerStatus) -> dict[str, Any]:
        tools = [tool.name for tool in self._mcp().tools() if tool.server == status.name]
        signed_in = self._auth_store is not None and self._auth_store.has(status.url)
        return {**status.model_dump(mode="json"), "tools": tools, "signed_in": signed_in}

    def _statuses_json(self, statuses: list[MCPServerStatus]) -> str:
        return json.dumps([self._status_data(status) for status in statuses])

    def _server_status(self, status: MCPServerStatus) -> None:
        self._bridge.mcpStatus(json.dumps(self._status_data(status)))

    # Runs.

    def warm_up(self) -> None:
        """Do now, while the user types, what the first task would otherwise do on its way:
        import jsonschema (not needed to be ready), build the built-in tools' argument
        validators, and read and compile the prompt templates."""
        from agent_py import prompts
        from agent_py.tools.call import validate_arguments

        for tool in self._ensure_agent().tools:
            validate_arguments(tool.input_schema, {})  # the validator is built and cached
        prompts.preload()

    async def prepare(self) -> str:
        """Load the model and prefill the planner's fixed prompt while the user types (see
        :meth:`Agent.prepare`). Returns ``{"prefilled": bool, "prompt_tokens": int}`` as
        JSON; a failure raises, and the next run meets it again and reports it."""
        usage = await self._agent_with_current_tools().prepare()
        return json.dumps(
            {
                "prefilled": usage is not None,
                "prompt_tokens": usage.prompt_tokens if usage is not None else 0,
            }
        )

    async def run(self, question: str) -> str:
        """Run one task; returns the RunResult as JSON. Events stream through ``emit``."""
        result = await self._agent_with_current_tools().task(question)
        return result.model_dump_json()

    def _agent_with_current_tools(self) -> Agent:
        agent = self._ensure_agent()
        # The MCP tools as they are now: servers connected or dropped since the last run,
        # and tool lists that changed, count from this run on.
        agent.tools.replace_all(self._mcp_tools(), keep=self._builtin_names)
        return agent

    def cancel(self) -> None:
        if self._agent is not None:
            self._agent.cancel()

    async def close(self) -> None:
        if self._agent is not None:
            await self._agent.close()
            self._agent = None
        if self._host is not None:
            await self._host.close()

    def _ensure_agent(self) -> Agent:
        if self._agent is None:
            builtins: list[ToolBase] = [
                LLMGenerator(),
                JavascriptExecutor(
                    BridgeJSRunner(self._bridge), timeout_s=self._settings.js_timeout_s
                ),
            ]
            self._builtin_names = [tool.name for tool in builtins]
            self._agent = Agent(
                llm=BridgeLLM(self._bridge),
                tools=[*builtins, *self._mcp_tools()],
                on_event=self._emit,
                config=self._settings.agent_config(),
                session=self._session,
            )
        return self._agent

    def _emit(self, event: Event) -> None:
        self._send_event(event.to_json())


def _no_network(config: MCPServerConfig) -> HTTPTransport:
    from agent_py.mcp.errors import MCPConfigError

    raise MCPConfigError(
        f"The MCP server {config.name!r} cannot be reached: this page session has no HTTP bridge."
    )
