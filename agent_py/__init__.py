"""agent_py: a local plan-and-execute agent for the browser (Pyodide) and CPython."""

from agent_py.core.agent import DEFAULT_MODEL, Agent, AgentConfig, RunResult, RunStats, StepRecord
from agent_py.core.errors import AgentError, PlanParseError, RunFailure
from agent_py.core.events import AgentState, Event, EventType
from agent_py.core.history import EventRecorder, FileSink, Hooks, MemorySink, read_history_file
from agent_py.core.llm import (
    LLM,
    CallInfo,
    CallPurpose,
    ChatReply,
    LLMError,
    MemoryPressureError,
    Message,
    Usage,
)
from agent_py.core.managed_llm import ManagedLLM, ModelRoles, ResidencyPolicy
from agent_py.core.model_client import ReplyBudgets
from agent_py.core.parsing import parse_plan, parse_rethink
from agent_py.core.plan import PlanSchema, PlanShape, StepSchema, TaskSchema, plan_json_schema
from agent_py.core.planner import PlanAndRethink
from agent_py.core.scripted_llm import ScriptedLLM
from agent_py.core.step_action import StepAction
from agent_py.tools import (
    JavascriptExecutor,
    LLMGenerator,
    ToolBase,
    ToolContext,
    ToolError,
    ToolRegistry,
    ToolResult,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MODEL",
    "LLM",
    "Agent",
    "AgentConfig",
    "AgentError",
    "AgentState",
    "CallInfo",
    "CallPurpose",
    "ChatReply",
    "Event",
    "EventRecorder",
    "EventType",
    "FileSink",
    "Hooks",
    "JavascriptExecutor",
    "LLMError",
    "LLMGenerator",
    "ManagedLLM",
    "MemoryPressureError",
    "MemorySink",
    "Message",
    "ModelRoles",
    "PlanAndRethink",
    "PlanParseError",
    "PlanSchema",
    "PlanShape",
    "ReplyBudgets",
    "ResidencyPolicy",
    "RunFailure",
    "RunResult",
    "RunStats",
    "ScriptedLLM",
    "StepAction",
    "StepRecord",
    "StepSchema",
    "TaskSchema",
    "ToolBase",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "Usage",
    "parse_plan",
    "parse_rethink",
    "plan_json_schema",
    "read_history_file",
]
