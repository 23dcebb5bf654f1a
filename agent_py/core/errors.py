"""Every error agent_py raises on purpose, in one tree; ``str(error)`` is for the user.

    AgentError
    ├── LLMError                  the model engine failed; a run fails with the message
    │   ├── ModelNotLoadedError   a chat named a model the engine does not hold
    │   ├── MemoryPressureError   out of (GPU) memory; may succeed after unload and reload
    │   └── PromptTooLargeError   the prompt does not fit the window, even cut to its floors
    ├── ToolError                 a step failed; the message is the step's observation
    │   └── InvalidArgumentsError the model's arguments do not meet the tool's schema
    ├── ReplyParseError           a model reply cannot be read (also a ValueError)
    │   └── PlanParseError
    ├── RunFailure                the run cannot go on (max_steps, every step failed, ...)
    ├── SetupError                the terminal runner cannot start (browser, page, files)
    └── MCPError                  an MCP server's failure (agent_py.mcp.errors has its tree)

A step ends through one place (``StepExecutor.run``): an AgentError becomes the step's
observation as it is, anything else (a bug) as ``Type: message``.
"""

from __future__ import annotations


class AgentError(Exception):
    """Base class of every error agent_py raises on purpose."""


class LLMError(AgentError):
    """An engine failed; the message is meant for the user."""


class ModelNotLoadedError(LLMError):
    pass


class MemoryPressureError(LLMError):
    """The engine ran out of (GPU) memory; the call may succeed after an unload and reload."""


class PromptTooLargeError(LLMError):
    """Even cut to its floors, the prompt does not fit the budget."""


class ToolError(AgentError):
    """A tool failed; the message is shown to the model and the user as the observation."""


class InvalidArgumentsError(ToolError):
    pass


class ReplyParseError(AgentError, ValueError):
    """A reply could not be read; ``reason`` says why, in words a model can act on."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PlanParseError(ReplyParseError):
    pass


class RunFailure(AgentError):
    """The run cannot go on; the message says why, for the user."""


class PlanCancelled(AgentError):
    """The user cancelled the plan at its review: the run ends cancelled, nothing ran."""


class SetupError(AgentError):
    """Something the agent needs to start is missing or unusable (a terminal command's tool,
    the page's settings); the message says how to get it right."""
