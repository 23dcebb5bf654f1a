"""Tools: what a tool is, how a step calls one, and the built-ins."""

from agent_py.tools.base import ToolBase, ToolContext, ToolError, ToolResult
from agent_py.tools.call import ToolCall, resolve_references, validate_arguments
from agent_py.tools.javascript import JavascriptExecutor, JSRunner, JSRunResult
from agent_py.tools.llm_generator import LLMGenerator
from agent_py.tools.registry import ToolRegistry

__all__ = [
    "JSRunResult",
    "JSRunner",
    "JavascriptExecutor",
    "LLMGenerator",
    "ToolBase",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "resolve_references",
    "validate_arguments",
]
