"""agent_py.page: the Python side of the page's worker bridge, driven by a Python stand-in
for the worker's JavaScript object (the real one is exercised in tests/web/test_page.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from pydantic import ValidationError
from support import WorkspaceInMemory

from agent_py import AgentState, MemoryPressureError
from agent_py.core.agent import AgentConfig
from agent_py.core.errors import SetupError
from agent_py.core.llm import CallInfo, CallOptions, CallPurpose, LLMError
from agent_py.core.managed_llm import ManagedLLM, ModelRoles
from agent_py.core.profiles import DEFAULT_CPU_MODEL, profile_for
from agent_py.core.workspace import WorkspaceError, WorkspaceFile
from agent_py.page.engine import BridgeLLM, BridgePyRunner, EngineCrashedError
from agent_py.page.session import PageSession
from agent_py.page.settings import PageSettings
from agent_py.page.workspace import PageWorkspace
from agent_py.tools.python import program_for
from agent_py.tools.python_driver import run_source


class FakeBridge(WorkspaceInMemory):
    """Implements the JavaScript bridge's methods with canned JSON answers."""

    def __init__(self, chat_replies: list[dict[str, Any]]) -> None:
        self.chat_replies = chat_replies
        self.python_replies: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.calls: list[tuple[str, Any]] = []

    async def engineReload(self, model: str) -> str:
        self.calls.append(("reload", model))
        return json.dumps({"ok": True})

    async def engineUnload(self) -> str:
        self.calls.append(("unload", None))
        return json.dumps({"ok": True})

    async def engineTokenize(self, texts_json: str) -> str:
        return json.dumps({"ok": True, "counts": None})  # an engine without a tokenizer

    async def engineInterrupt(self) -> str:
        return json.dumps({"ok": True})

    async def engineChat(self, messages_json: str, call_json: str) -> str:
        self.calls.append(("chat", json.loads(call_json)))
        return json.dumps(self.chat_replies.pop(0))

    async def runJavaScript(self, code: str, timeout_ms: int, output_limit: int) -> str:
        return json.dumps({"value": 42, "console": ["hi"], "error": None, "timed_out": False})

    async def runPython(self, program: str, timeout_ms: int) -> str:
        self.calls.append(("python", {"timeout_ms": timeout_ms}))
        return json.dumps(self.python_replies.pop(0))

    def endPython(self) -> None:
        self.calls.append(("end python", {}))

    def emit(self, event_json: str) -> None:
        self.events.append(json.loads(event_json))


CALL = CallInfo(purpose=CallPurpose.PLAN, model="m", max_tokens=64, schema={"type": "object"})


async def test_chat_sends_the_call_as_json_and_reads_usage() -> None:
    bridge = FakeBridge([{"ok": True, "text": "hi", "usage": {"prompt_tokens": 3}}])
    llm = BridgeLLM(bridge)
    await llm.reload("m")
    reply = await llm.chat([{"role": "user", "content": "x"}], CALL)
    assert (reply.text, reply.usage.prompt_tokens) == ("hi", 3)
    sent = bridge.calls[-1][1]
    assert sent["purpose"] == "plan" and sent["schema"] == {"type": "object"}
    assert llm.loaded_model == "m"


@pytest.mark.parametrize(
    ("error", "raised"),
    [({"kind": "memory", "message": "GPU OOM"}, MemoryPressureError), ({"message": "x"}, LLMError)],
)
async def test_engine_errors_map_to_exceptions(error: dict[str, str], raised: type) -> None:
    llm = BridgeLLM(FakeBridge([{"ok": False, "error": error}]))
    with pytest.raises(raised, match=error["message"]):
        await llm.chat([], CALL)


async def test_a_crashed_engine_counts_its_model_as_gone_so_the_next_call_loads_it() -> None:
    crash = {"kind": "crashed", "message": "The CPU engine crashed (…); the next call loads"}
    bridge = FakeBridge([{"ok": False, "error": crash}, {"ok": True, "text": "again"}])
    managed = ManagedLLM(BridgeLLM(bridge), ModelRoles(planner="m"))
    messages = [{"role": "user", "content": "x"}]

    with pytest.raises(EngineCrashedError, match="CPU engine crashed"):
        await managed.chat(messages, CallPurpose.GENERATE, CallOptions(), max_tokens=8)
    assert managed.llm.loaded_model is None

    reply = await managed.chat(messages, CallPurpose.GENERATE, CallOptions(), max_tokens=8)
    assert reply.text == "again"
    assert [name for name, _ in bridge.calls] == ["reload", "chat", "reload", "chat"]


async def test_a_garbled_bridge_reply_is_a_clear_error() -> None:
    class Garbled(FakeBridge):
        async def engineChat(self, messages_json: str, call_json: str) -> str:
            return "<html>"

    with pytest.raises(LLMError, match="unreadable reply"):
        await BridgeLLM(Garbled([])).chat([], CALL)


async def test_page_session_runs_a_task_and_streams_events_as_json() -> None:
    plan = {
        "tasks": [
            {
                "task_id": "t1",
                "task_goal": "compute",
                "steps": [
                    {
                        "step_id": "s1",
                        "step_goal": "compute",
                        "tool_name": "javascript_execute",
                        "tool_intent": "math",
                        "expected_output": "42",
                        "arguments": {"code": "return 6 * 7"},
                    }
                ],
            }
        ]
    }
    bridge = FakeBridge(
        [
            {"ok": True, "text": f"<plan>{json.dumps(plan)}</plan>"},
            {"ok": True, "text": "<status>done</status><final>42</final>"},
        ]
    )
    page = PageSession(bridge)
    await page.configure(PageSettings(residency="keep_warm").model_dump_json())

    result = json.loads(await page.run("six times seven"))

    assert result["state"] == AgentState.COMPLETED
    assert result["answer"] == "42"
    assert result["steps"][0]["output"] == "result: 42\nconsole:\nhi"
    types = [e["type"] for e in bridge.events]
    assert types[0] == "session_start" and "final" in types


def test_a_page_without_servers_never_imports_the_mcp_package() -> None:
    # A fresh interpreter: other tests here import the MCP package.
    probe = """
import asyncio, json, sys
from agent_py.page.session import PageSession

class Bridge:
    def emit(self, event_json): pass
    def mcpStatus(self, status_json): pass

page = PageSession(Bridge())
page.set_auth_records(json.dumps({}))
assert asyncio.run(page.configure_servers("[]")) == "[]"
assert page.server_statuses() == "[]"
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("agent_py.mcp", "mcp_types")))))
"""
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []


def test_warming_up_builds_what_the_first_task_needs_before_it_runs() -> None:
    # A fresh interpreter, so no other test has built validators or read templates yet.
    probe = """
import json, sys
from pathlib import Path
from agent_py.core import prompts
from agent_py.page.session import PageSession
from agent_py.core import tool_schema as schema

class Bridge:
    def emit(self, event_json): pass

before = "jsonschema" in sys.modules
PageSession(Bridge()).warm_up()
templates = len(list(Path(prompts.__file__).parent.glob("*.md")))
print(json.dumps([before, "jsonschema" in sys.modules, schema._validator.cache_info().currsize,
                  prompts._template.cache_info().currsize, templates]))
"""
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    imported_before, imported_after, validators, templates, template_files = json.loads(out)
    assert not imported_before and imported_after
    assert (
        validators == 4
    )  # the built-ins' argument schemas: generator, JavaScript, Python, decline
    assert templates == template_files


def test_page_settings_take_their_defaults_from_the_agent_config() -> None:
    agent = AgentConfig()
    page = PageSettings()
    assert page.model == agent.models.planner
    assert (page.residency, page.thinking, page.context_window) == (
        agent.residency,
        agent.thinking,
        agent.context_window,
    )
    assert (page.max_steps, page.tool_timeout_s) == (agent.max_steps, agent.tool_timeout_s)
    with pytest.raises(ValidationError):
        PageSettings(context_window=10)  # the limits come along
    # The CPU engine's sampling defaults are settings too, read when the worker starts.
    assert {"cpu_seed", "cpu_temperature", "context_window"} <= set(PageSettings.ENGINE_FIELDS)
    assert (page.cpu_seed, page.cpu_temperature) == (42, 0.2)


def test_the_cpu_engine_plans_with_its_own_model_under_its_profile() -> None:
    settings = PageSettings(engine_kind="cpu", executor_model="other")
    config = settings.agent_config()
    assert config.models.planner == DEFAULT_CPU_MODEL and config.models.executor is None
    assert settings.model_profile() is profile_for("cpu", DEFAULT_CPU_MODEL)
    assert settings.model_profile().name != "full"  # the CPU engine runs small models
    # A browser kept "" under the old name for "the default".
    assert PageSettings.model_validate({"cpu_model_url": ""}).cpu_model == DEFAULT_CPU_MODEL
    assert PageSettings.model_validate({"cpu_model_url": "a.gguf"}).cpu_model == "a.gguf"


async def test_configure_reports_the_settings_in_effect_or_says_what_is_wrong() -> None:
    page = PageSession(FakeBridge([]))
    info = json.loads(await page.configure(json.dumps({"thinking": True})))
    assert info["values"]["thinking"] is True
    assert info["defaults"] == PageSettings().model_dump(mode="json")
    assert info["engine_fields"] == list(PageSettings.ENGINE_FIELDS)
    assert info["profile"]["name"] == PageSettings().model_profile().name
    with pytest.raises(SetupError, match=r"these settings cannot be used: context_window: "):
        await page.configure(json.dumps({"context_window": 10}))
    assert json.loads(page.settings_info())["values"]["thinking"] is True  # kept


async def test_the_python_runner_reads_the_sandbox_reply_and_ends_the_sandbox() -> None:
    """The page's Python sandbox answers with the driver's JSON, a timeout, or its own error;
    close() ends its worker (the run is over)."""
    bridge = FakeBridge([])
    driver_json = run_source("print('hi')\n6 * 7", 100)
    bridge.python_replies = [
        {"json": driver_json, "error": None, "timed_out": False},
        {"json": None, "error": "Timed out after 2000 ms.", "timed_out": True},
        {"json": None, "error": "Python could not start in the sandbox: boom"},
        {"unexpected": True},
    ]
    runner = BridgePyRunner(bridge)  # type: ignore[arg-type]
    program = program_for("6 * 7", 100)

    ran = await runner.run(program, timeout_s=2, output_limit=100)
    assert (ran.value, ran.stdout, ran.error) == (42, "hi\n", None)
    assert bridge.calls[-1] == ("python", {"timeout_ms": 2000})
    assert (await runner.run(program, timeout_s=2, output_limit=100)).timed_out is True
    failed = await runner.run(program, timeout_s=2, output_limit=100)
    assert failed.error == "Python could not start in the sandbox: boom"
    empty = await runner.run(program, timeout_s=2, output_limit=100)
    assert empty.error == "the Python sandbox gave no result"
    await runner.close()
    assert bridge.calls[-1] == ("end python", {})


async def test_the_page_workspace_reads_and_writes_through_the_bridge() -> None:
    bridge = FakeBridge([])
    workspace = PageWorkspace(bridge)

    written = await workspace.write("./out/report.md", b"# Report\n")

    assert written == WorkspaceFile("out/report.md", 9, "text/markdown")
    assert await workspace.read("out/report.md") == b"# Report\n"
    assert await workspace.files() == [written]
    with pytest.raises(
        WorkspaceError, match=r"no file named 'a.csv' in the workspace \(files: out/report.md\)"
    ):
        await workspace.read("a.csv")
    with pytest.raises(
        WorkspaceError, match="could not be used while writing full/x: the storage is full"
    ):
        await workspace.write("full/x", b"x")
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        await workspace.write("../x", b"x")


async def test_the_file_tools_are_offered_while_the_workspace_has_files() -> None:
    bridge = FakeBridge([])
    page = PageSession(bridge)
    page._ensure_agent()

    assert await page._workspace_tools() == []
    bridge.files = {"sales.csv": b"month,sales\nMay,3\n"}
    tools = await page._workspace_tools()
    names = [tool.name for tool in page._agent_with_current_tools(tools).tools]

    assert {"list_files", "read_file"} <= set(names)
    read = next(tool for tool in tools if tool.name == "read_file")
    assert read.description.endswith("The workspace holds: sales.csv (18 bytes).")
    bridge.files = {}
    names = [
        tool.name for tool in page._agent_with_current_tools(await page._workspace_tools()).tools
    ]
    assert "read_file" not in names  # gone again with the files
