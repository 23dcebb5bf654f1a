"""The built-in tools (JavaScript, Python, the model as a writer), and for tool authors what a
tool is, re-exported from the core (``agent_py.core.tool``, ``registry``, ``tool_schema``). How
a step calls a tool is the executor's (``agent_py.core.step_action``)."""

from agent_py.core.registry import ToolRegistry
from agent_py.core.tool import ToolBase, ToolContext, ToolError, ToolResult
from agent_py.core.tool_schema import validate_arguments
from agent_py.tools.javascript import JavascriptExecutor, JSRunner, JSRunResult
from agent_py.tools.llm_generator import LLMGenerator
from agent_py.tools.python import PyRunner, PyRunResult, PythonExecutor

__all__ = [
    "JSRunResult",
    "JSRunner",
    "JavascriptExecutor",
    "LLMGenerator",
    "PyRunResult",
    "PyRunner",
    "PythonExecutor",
    "ToolBase",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "validate_arguments",
]
