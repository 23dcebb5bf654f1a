"""The agent in the page: one conversation, driven by the worker (``web/worker/worker.js``).

:class:`PageSession` gets the worker bridge (``agent_py.page.ports``) and, for MCP servers,
the ``http`` object (:class:`~agent_py.page.http.HttpBridge`: the worker's fetch, or the
bridge extension) and the ``user`` object (:class:`~agent_py.page.user.UserBridge`: OAuth
sign-in in a popup, elicitation forms). :meth:`PageSession.configure_servers` connects
servers; their tools join the agent's tools, named ``<server>__<tool>``, from the next run.

This package imports nothing from Pyodide but ``loop``, so it is tested in CPython too. It
imports the MCP package (and its wire types, the largest import of all) only when a server is
configured, so a page without servers starts without it.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agent_py.agent import Agent
from agent_py.errors import SetupError
from agent_py.events import Event
from agent_py.page.engine import BridgeJSRunner, BridgeLLM
from agent_py.page.ports import Bridge
from agent_py.page.settings import PageSettings
from agent_py.tools.base import ToolBase
from agent_py.tools.javascript import JavascriptExecutor
from agent_py.tools.llm_generator import LLMGenerator

if TYPE_CHECKING:
    from agent_py.mcp.auth import Authorizer
    from agent_py.mcp.host import MCPClientHost, MCPServerConfig, MCPServerStatus
    from agent_py.mcp.transport import HTTPTransport
    from agent_py.page.http import HttpBridge
    from agent_py.page.user import PageTokenStore, UserBridge


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
            from agent_py.mcp.host import MCPClientHost
            from agent_py.page.http import browser_transport_factory
            from agent_py.page.user import PageTokenStore, page_elicitation

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
        from agent_py.mcp.oauth import OAuthAuthorizer, OAuthSettings
        from agent_py.page.user import PopupFrontEnd

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
        from agent_py.tools.schema import validate_arguments

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
