"""Helpers for tests: plan builders, sleeping and failing tools, an agent factory."""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from typing import Any

from agent_py import (
    Agent,
    AgentConfig,
    Event,
    JavascriptExecutor,
    LLMGenerator,
    MemorySink,
    ScriptedLLM,
    ToolBase,
    ToolContext,
    ToolError,
    ToolResult,
)
from agent_py.tools.fetch_page import FetchedPage, ReadablePage
from agent_py.tools.node_runner import NodeRunner


def step(
    step_id: str, tool: str, arguments: dict[str, Any] | None = None, goal: str = ""
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "step_id": step_id,
        "step_goal": goal or f"do {step_id}",
        "tool_name": tool,
        "tool_intent": f"use {tool}",
        "expected_output": "a result",
    }
    if arguments is not None:
        data["arguments"] = arguments
    return data


def plan_reply(
    *tasks: list[dict[str, Any]],
    wrap: bool = True,
    answer: str | None = None,
    needs: str | None = None,
) -> str:
    """A plan of ``tasks`` (each a list of steps); ``answer`` and ``needs`` are the model's
    declarations (the answer kind, and what every task needs), left out when None."""
    plan: dict[str, Any] = {} if answer is None else {"answer": answer}
    plan["tasks"] = [
        {"task_id": f"t{i}", "task_goal": f"task {i}"}
        | ({} if needs is None else {"needs": needs})
        | {"steps": steps}
        for i, steps in enumerate(tasks, start=1)
    ]
    body = json.dumps(plan)
    return f"<plan>{body}</plan>" if wrap else body


CONTINUE = "<status>continue</status>"


class SleepTool(ToolBase):
    name = "sleep"
    description = "Sleeps for the given seconds and returns them."
    input_schema = {
        "type": "object",
        "properties": {"seconds": {"type": "number", "minimum": 0}},
        "required": ["seconds"],
    }

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await asyncio.sleep(float(arguments["seconds"]))
        return ToolResult(f"slept {arguments['seconds']}", data=arguments["seconds"])


class BrokenTool(ToolBase):
    name = "broken"
    description = "Always raises."
    input_schema = {"type": "object", "properties": {}}

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise RuntimeError("disk on fire")


class EchoTool(ToolBase):
    name = "echo"
    description = "Returns its text."
    input_schema = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "times": {"type": "integer", "minimum": 1}},
        "required": ["text", "times"],
        "additionalProperties": False,
    }

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.calls.append(arguments)
        if arguments["text"] == "fail":
            raise ToolError("asked to fail")
        return ToolResult(arguments["text"] * arguments["times"])


def make_agent(
    llm: ScriptedLLM, *tools: ToolBase, config: AgentConfig | None = None, **kwargs: Any
) -> tuple[Agent, MemorySink]:
    sink = MemorySink()
    agent = Agent(
        llm=llm,
        tools=list(tools) or default_tools(),
        config=config or AgentConfig(),
        sinks=[sink],
        **kwargs,
    )
    return agent, sink


def default_tools() -> list[ToolBase]:
    return [LLMGenerator(), JavascriptExecutor(NodeRunner(), timeout_s=5)]


def of_type(events: list[Event], type_: str) -> list[Event]:
    return [e for e in events if e.type == type_]


def calls_for(llm: ScriptedLLM, purpose: str) -> int:
    return sum(1 for _, call in llm.calls if call.purpose == purpose)


class WorkspaceInMemory:
    """A page bridge's workspace methods answered as web/workspace.js answers them,
    its files in memory (``files``; a name under ``full/`` meets a full disk)."""

    files: dict[str, bytes] = {}  # never changed in place: a write gives the instance its own

    async def workspaceFiles(self) -> str:
        files = self.files
        listed = [{"name": n, "size": len(d), "modified": 0} for n, d in sorted(files.items())]
        return json.dumps({"ok": True, "files": listed})

    async def workspaceRead(self, name: str) -> str:
        data = self.files.get(name)
        if data is None:
            return json.dumps({"ok": False, "error": "no such file", "kind": "NotFoundError"})
        return json.dumps({"ok": True, "base64": base64.b64encode(data).decode()})

    async def workspaceWrite(self, name: str, base64_data: str) -> str:
        if name.startswith("full/"):
            return json.dumps(
                {"ok": False, "error": "the storage is full", "kind": "QuotaExceededError"}
            )
        self.files = {**self.files, name: base64.b64decode(base64_data)}
        return json.dumps({"ok": True, "size": len(self.files[name])})


@dataclass
class StoredPages:
    """A test fetcher for fetch_page: answers from ``pages`` (URL to FetchedPage); the reader
    gives each HTML body back as its text, under the title ``T``."""

    pages: dict[str, FetchedPage]
    is_online: bool = True
    asked: list[str] = field(default_factory=list)

    def online(self) -> bool:
        return self.is_online

    async def fetch(self, url: str, *, timeout_s: float, max_bytes: int) -> FetchedPage:
        self.asked.append(url)
        return self.pages[url]

    async def read(self, html: str, url: str) -> ReadablePage:
        return ReadablePage("T", html)


def stored_page(url: str, body: str, kind: str = "text/html; charset=utf-8") -> FetchedPage:
    return FetchedPage(url, 200, kind, body.encode())
