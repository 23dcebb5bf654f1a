"""What the code tools share (``javascript_execute``, ``python_execute``): one input, the
source code, run by an injected runner under a time limit and an output cap."""

from __future__ import annotations

from typing import Generic, TypeVar

from agent_py.tools.base import JSONSchema, ToolBase

RunnerT = TypeVar("RunnerT")


def code_input_schema(description: str) -> JSONSchema:
    """The input of a code tool: ``code``, a non-empty string."""
    return {
        "type": "object",
        "properties": {"code": {"type": "string", "minLength": 1, "description": description}},
        "required": ["code"],
        "additionalProperties": False,
    }


class CodeTool(ToolBase, Generic[RunnerT]):
    """A tool that runs source code with ``runner``, which enforces ``timeout_s`` itself; the
    agent's own limit for the tool is a backstop ``start_margin_s`` above it (what a runner
    may need before the code starts: a sandbox's first start)."""

    start_margin_s = 5.0

    def __init__(self, runner: RunnerT, *, timeout_s: float, output_limit: int) -> None:
        self.runner = runner
        self.run_timeout_s = timeout_s
        self.output_limit = output_limit
        self.timeout_s = timeout_s + self.start_margin_s
