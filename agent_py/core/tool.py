"""What a tool is: a name, a description, a JSON Schema for its input, and an async run."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_py.core.errors import ToolError as ToolError  # tools raise it: part of their API

if TYPE_CHECKING:
    from agent_py.core.model_client import ModelClient

JSONSchema = dict[str, Any]
ProgressCallback = Callable[[str, dict[str, Any]], None]


@dataclass
class ToolResult:
    """What a tool returns.

    ``content`` is the text the model reads (it may be cut to fit a prompt); ``data`` is the
    full result, kept in Python for later steps that refer to it as ``${step_id}``.
    """

    content: str
    data: Any = None
    is_error: bool = False
    meta: dict[str, Any] = field(default_factory=dict)

    def reference_text(self) -> str:
        """What ``${step_id}`` inside a longer string becomes: the value, not its framing."""
        if isinstance(self.data, str):
            return self.data
        if self.data is not None:
            return json.dumps(self.data, ensure_ascii=False, default=str)
        return self.content


@dataclass
class ToolContext:
    """What a running tool may use besides its arguments."""

    model: ModelClient
    """Ask the model (budget-fitted, recorded); only tools with uses_model need it."""
    step_id: str | None = None
    question: str = ""
    """The user's task as the step's own calls are told it (a follow-up's with its earlier
    turns): the writer compares its instruction with it."""
    thinking: bool = False
    report_progress: ProgressCallback = field(default=lambda message, meta: None)


def main_input_property(schema: JSONSchema) -> str | None:
    """The property a one-string input fills: the only required property, when it is a
    string (``code`` of javascript_execute, ``prompt`` of llm_generator). None for tools
    that need more than one value."""
    required = schema.get("required") or []
    if len(required) != 1:
        return None
    spec = (schema.get("properties") or {}).get(required[0])
    if not isinstance(spec, dict) or spec.get("type") != "string":
        return None
    return str(required[0])


class ToolBase(ABC):
    """A tool the planner can name in a step."""

    name: str
    description: str
    input_schema: JSONSchema
    uses_model: bool = False
    """True when running the tool calls the model (so per_step residency loads it)."""
    timeout_s: float | None = None
    """Own time limit; None means the agent's default tool timeout."""
    remote: bool = False
    """True for a remote server's tool (MCP): its effects happen elsewhere, so plan review
    (``review="remote"``) shows a plan that calls it before it runs."""
    reads_data: bool = False
    """True for a tool that reads the user's data here (their files, a page they name): it
    looks things up, as a remote tool may, but changes nothing."""
    code_language: str | None = None
    """Set when the main input is source code in this language (name, fence tag): a small
    model writes code far better in a fenced block than inside a JSON string."""
    sees_files: bool = False
    """True for a code tool whose code opens the user's files by name (python_execute on a
    workspace that holds some): the plan's other code steps go to it."""
    file_names: tuple[str, ...] = ()
    """The user's files such a tool's code opens by name: a look-up of one of them that the
    plan gave the writer goes to it."""
    code_context: str = ""
    """What a code call for this tool is told besides the step: how the user's files begin
    (their columns, their format), so code uses the names the data has."""
    address_input: str | None = None
    """The parameter that takes a web address, for a tool that reads the page there
    (fetch_page's ``url``): a plan that reads no page for a question holding an address
    gets a step of it (see :func:`agent_py.core.plan_adoption.page_read_first`)."""

    @abstractmethod
    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Act. Raise ToolError (or return is_error=True) for failures the model should see."""


def takes_address(tool: ToolBase) -> bool:
    """Whether ``tool`` takes a web address: its ``address_input``, or a parameter of format
    ``uri`` (a fetch server's ``url``)."""
    properties = tool.input_schema.get("properties") or {}
    return tool.address_input is not None or any(
        isinstance(spec, dict) and spec.get("format") in ("uri", "url", "iri")
        for spec in properties.values()
    )
