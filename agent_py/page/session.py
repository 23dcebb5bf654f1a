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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agent_py.core.agent import Agent
from agent_py.core.answer_checks import WEB_ADDRESS
from agent_py.core.conversation import SessionState
from agent_py.core.decline import Decline
from agent_py.core.errors import SetupError
from agent_py.core.events import Event
from agent_py.core.llm import LLM
from agent_py.core.tool import ToolBase
from agent_py.core.workspace import WorkspaceError, WorkspaceFile
from agent_py.page.engine import BridgeJSRunner, BridgeLLM, BridgePyRunner
from agent_py.page.ports import Bridge
from agent_py.page.review import PageReviewer
from agent_py.page.servers import PageServers
from agent_py.page.settings import PageSettings
from agent_py.page.workspace import PageWorkspace
from agent_py.tools.code_files import file_heads
from agent_py.tools.files import ListFiles, ReadFile
from agent_py.tools.javascript import JavascriptExecutor
from agent_py.tools.llm_generator import LLMGenerator
from agent_py.tools.python import PythonExecutor

if TYPE_CHECKING:
    from agent_py.page.http import HttpBridge
    from agent_py.page.user import UserBridge

"""A web address in a task: fetch_page is offered for it."""
SERVERS_WAIT_S = 3.0
"""How long a run waits for servers still connecting (the worker's boot waits as long,
SERVERS_WAIT_MS in web/worker/agent.js, before it prefills the planner's prompt)."""


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
        self._http = http
        # Looked up once: reading an attribute of a JavaScript object from Python is a
        # crossing of its own, and every event takes this path.
        self._send_event = bridge.emit
        # The session the next agent goes on with (a reload's, or the one new settings
        # replaced its agent in); None: a new one.
        self._carry: SessionState | None = (
            SessionState(session, 0, [], started=False) if session else None
        )
        self._settings = PageSettings()
        self._agent: Agent | None = None
        self._builtins: list[ToolBase] = []
        self._preparing: asyncio.Task[str] | None = None  # the model's preparation, under way
        self._python = BridgePyRunner(bridge)
        self.workspace = PageWorkspace(bridge)
        """The user's files (OPFS); read_file and list_files are offered while it has some."""
        # mcpStatus is looked up when a server reports: it is needed only once one is configured.
        self.servers = PageServers(lambda status: bridge.mcpStatus(status), http=http, user=user)
        self._user = user

    @property
    def session(self) -> str | None:
        if self._agent is not None:
            return self._agent.session
        return self._carry.session if self._carry else None

    def resolve_settings(self, settings_json: str) -> str:
        """What :meth:`configure` would put in effect for ``settings_json``, as
        :meth:`settings_info` gives it, without applying anything: the worker reads the
        engine to create from it at boot, before it configures the session once, with the
        engine's kind."""
        return self.settings_info(self._validated(settings_json))

    async def configure(self, settings_json: str) -> str:
        """Apply the user's settings (what differs from the defaults); a change takes effect
        from the next run (the model is unloaded). Returns :meth:`settings_info`."""
        settings = self._validated(settings_json)
        if settings != self._settings and self._agent is not None:
            self._carry = self._agent.handover()  # the conversation goes on
            await self._agent.close(end_session=False)
            self._agent = None
        self._settings = settings
        return self.settings_info()

    @staticmethod
    def _validated(settings_json: str) -> PageSettings:
        try:
            settings = PageSettings.model_validate_json(settings_json)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in e['loc']) or 'settings'}: {e['msg']}"
                for e in error.errors()
            )
            raise SetupError(f"these settings cannot be used: {problems}") from None
        settings.model_profile()  # an unknown profile name fails here, not at the run
        return settings

    def settings_info(self, settings: PageSettings | None = None) -> str:
        """The settings for the UI, as JSON: every value in effect (or of ``settings``), the
        defaults, which of them restart the worker, and the model profile they choose."""
        settings = settings or self._settings
        return json.dumps(
            {
                "values": settings.model_dump(mode="json"),
                "defaults": PageSettings().model_dump(mode="json"),
                "engine_fields": list(PageSettings.ENGINE_FIELDS),
                "profile": settings.model_profile().model_dump(mode="json"),
            }
        )

    # MCP servers (agent_py.page.servers).

    async def configure_servers(self, servers_json: str) -> str:
        """Make the MCP servers those of ``servers_json`` (the panel's list); their tools
        join the agent's from the next run. Returns every server's status as JSON."""
        return await self.servers.configure(servers_json)

    def set_auth_records(self, records_json: str) -> None:
        self.servers.set_auth_records(records_json)

    async def forget_sign_in(self, name: str) -> str:
        return await self.servers.forget_sign_in(name)

    async def reconnect_server(self, name: str) -> str:
        return await self.servers.reconnect(name)

    def server_statuses(self) -> str:
        return self.servers.statuses()

    def mcp_tools_key(self) -> str:
        """The MCP tools as the planner's prompt lists them (names and descriptions), as one
        string: when it changes, the prefilled prompt is out of date."""
        return json.dumps([[tool.name, tool.description] for tool in self.servers.tools()])

    # Runs.

    def use_session(self, events_json: str) -> str:
        """Go on with a recorded session (the page's stored events of it, as a JSON list),
        or start a new one (``[]``): from the next run. Returns the session's id as JSON."""
        events = [Event.model_validate(raw) for raw in json.loads(events_json)]
        if self._agent is not None:
            self._agent.start_session(events)
        else:
            self._carry = SessionState.recorded(events)
        return json.dumps(self.session)

    def warm_up(self) -> None:
        """Do now, while the user types, what the first task would otherwise do on its way:
        import jsonschema (not needed to be ready), build the built-in tools' argument
        validators, and read and compile the prompt templates."""
        from agent_py.core import prompts
        from agent_py.core.tool_schema import validate_arguments

        for tool in self._ensure_agent().tools:
            validate_arguments(tool.input_schema, {})  # the validator is built and cached
        prompts.preload()

    async def prepare(self) -> str:
        """Load the model and prefill the planner's fixed prompt while the user types (see
        :meth:`Agent.prepare`). Returns ``{"prefilled": bool, "prompt_tokens": int}`` as
        JSON, or ``{"prefilled": false, "stopped": true}`` when Stop ended it (:meth:`cancel`);
        a failure raises, and the next run meets it again and reports it."""
        self._preparing = asyncio.current_task()
        try:
            usage = await self._agent_with_current_tools().prepare()
        except asyncio.CancelledError:
            if self._preparing is not None:
                self._preparing.uncancel()  # ours: the preparation ends, reported as stopped
            return json.dumps({"prefilled": False, "stopped": True})
        finally:
            self._preparing = None
        return json.dumps(
            {
                "prefilled": usage is not None,
                "prompt_tokens": usage.prompt_tokens if usage is not None else 0,
            }
        )

    def server_models(self) -> str:
        """The models the model server listed when it was last asked (at the model's load),
        as a JSON list; [] for the other engines, or before the server answered."""
        engine = self._agent.llm.llm if self._agent else None
        server = getattr(engine, "server", None)
        return json.dumps(list(server.models) if server is not None else [])

    async def run(self, question: str) -> str:
        """Run one task; returns the RunResult as JSON. Events stream through ``emit``.

        Servers still connecting are waited for, at most ``SERVERS_WAIT_S``: a slower one
        joins from the next run. Stop works during that wait too (the turn ends cancelled)."""
        agent = self._ensure_agent()

        async def with_servers_settled() -> None:
            await self.servers.settled(SERVERS_WAIT_S)
            self._agent_with_current_tools(
                [*await self._workspace_tools(), *self._page_tools(question)]
            )

        try:
            result = await agent.task(question, first=with_servers_settled)
        finally:
            # The Python sandbox lives for one run: stopped or done, its worker ends.
            await self._python.close()
        return result.model_dump_json()

    def _agent_with_current_tools(self, extra: Sequence[ToolBase] = ()) -> Agent:
        agent = self._ensure_agent()
        # The MCP tools as they are now: servers connected or dropped since the last run,
        # and tool lists that changed, count from this run on; the workspace's with them.
        # A workspace tool of a built-in's name (python_execute naming the files) replaces it.
        replaced = {tool.name for tool in extra}
        builtins = [tool for tool in self._builtins if tool.name not in replaced]
        agent.tools.replace_all([*builtins, *extra, *self.servers.tools()])
        return agent

    async def _workspace_tools(self) -> list[ToolBase]:
        """list_files and read_file while the workspace holds files (read_file naming them):
        without files, tools to read them would only lengthen the plan's prompt. A workspace
        that cannot be listed gives none, and says why in the live view."""
        try:
            files = await self.workspace.files()
        except WorkspaceError as error:
            self._bridge.engineNote(f"the workspace's files are not offered: {error}")
            return []
        if not files:
            return []
        heads = await file_heads(self.workspace, files)
        # python_execute first: steps the agent adds to compute from the files go to it.
        code = [self._python_tool(files, heads), self._javascript_tool(files, heads)]
        return [ListFiles(self.workspace), ReadFile(self.workspace, files), *code]

    def _page_tools(self, question: str) -> list[ToolBase]:
        """fetch_page for a task that holds a web address (structure, in any language):
        without one, a tool to fetch it would only lengthen the plan's prompt. It needs the
        page's HTTP port (the worker's fetch and the bridge extension)."""
        if self._http is None or not WEB_ADDRESS.search(question):
            return []
        # Imported here: the page's HTTP module brings the MCP client's, which a run
        # without servers or pages never needs.
        from agent_py.page.pages import BrowserPages
        from agent_py.tools.fetch_page import FetchPage

        return [FetchPage(BrowserPages(self._bridge, self._http))]

    def _python_tool(
        self, files: Sequence[WorkspaceFile] = (), heads: Mapping[str, str] | None = None
    ) -> PythonExecutor:
        """python_execute on the workspace: its files in the code's folder (named in the
        description when there are some, and how they begin shown to its code calls), what
        the code writes under out/ kept in it."""
        return PythonExecutor(
            self._python, workspace=self.workspace, files=files, heads=heads, **self._code_options()
        )

    def _javascript_tool(
        self, files: Sequence[WorkspaceFile] = (), heads: Mapping[str, str] | None = None
    ) -> JavascriptExecutor:
        """javascript_execute on the workspace, as :meth:`_python_tool`: its code reads the
        files with readFile and keeps what it writes with writeFile('out/…')."""
        return JavascriptExecutor(
            BridgeJSRunner(self._bridge),
            workspace=self.workspace,
            files=files,
            heads=heads,
            **self._code_options(),
        )

    def _code_options(self) -> dict[str, Any]:
        """What both code tools are given: the time limit and the strategy's code checks."""
        strategy = self._settings.agent_config().strategy
        return {
            "timeout_s": self._settings.js_timeout_s,
            "refuse_constant_text": strategy.refuse_constant_text,
            "caret_is_power": strategy.caret_is_power,
        }

    def cancel(self) -> None:
        """Stop: the running task, and the model's preparation where one is under way (a
        model server that stays silent holds it, and a run waits for it)."""
        if self._preparing is not None:
            self._preparing.cancel()
        if self._agent is not None:
            self._agent.cancel()

    async def close(self) -> None:
        if self._agent is not None:
            await self._agent.close()
            self._agent = None
        await self.servers.close()

    def _ensure_agent(self) -> Agent:
        if self._agent is None:
            strategy = self._settings.agent_config().strategy
            builtins: list[ToolBase] = [
                LLMGenerator(),
                self._javascript_tool(),
                self._python_tool(),
            ]
            if strategy.decline:
                builtins.append(Decline())
            self._builtins = builtins
            in_python = self._settings.engine_kind == "openai"
            self._agent = Agent(
                llm=self._model_server() if in_python else BridgeLLM(self._bridge),
                tools=[*builtins, *self.servers.tools()],
                on_event=self._emit,
                # An engine in JavaScript streams its tokens to the UI itself.
                on_token=self._bridge.engineToken if in_python else None,
                config=self._settings.agent_config(),
            )
            if self._user is not None:
                self._agent.reviewer = PageReviewer(
                    self._user, self._agent.tools, self._settings.review_policy()
                )
            if self._carry is not None:
                self._agent.take_over(self._carry)
                self._carry = None
        return self._agent

    def _model_server(self) -> LLM:
        """The model server of the settings, through the page's fetch or the extension."""
        from agent_py.engines.model_server import ModelServerLLM
        from agent_py.engines.model_server_request import OutputFormat
        from agent_py.page.http import browser_transport

        settings = self._settings
        if self._http is None:
            raise SetupError("a model server cannot be reached: this page has no HTTP bridge")
        transport = browser_transport(
            self._http,
            settings.openai_transport,
            url=settings.openai_base_url,
            service="model server",
        )
        return ModelServerLLM(
            transport,
            settings.openai_base_url,
            api_key=settings.openai_api_key,
            output_format=OutputFormat(settings.openai_format),
            keep_alive=settings.openai_keep_alive,
            silence_s=settings.openai_silence_s,
            on_note=self._bridge.engineNote,
            on_wait=self._bridge.engineWait,
        )

    def _emit(self, event: Event) -> None:
        self._send_event(event.to_json())
