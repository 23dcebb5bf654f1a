"""Tools: what a tool is, how its arguments are checked, and the built-ins. A leaf: how a step
calls a tool is the executor's (``agent_py.tool_call``)."""

from agent_py.tools.base import ToolBase, ToolContext, ToolError, ToolResult
from agent_py.tools.javascript import JavascriptExecutor, JSRunner, JSRunResult
from agent_py.tools.llm_generator import LLMGenerator
from agent_py.tools.python import PyRunner, PyRunResult, PythonExecutor
from agent_py.tools.registry import ToolRegistry
from agent_py.tools.schema import validate_arguments

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
