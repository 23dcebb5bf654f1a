"""The tools a run may use: the built-ins plus those of the MCP servers the user added."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from agent_py.core.tool import ToolBase


class ToolRegistry:
    def __init__(self, tools: Iterable[ToolBase] = ()) -> None:
        self._tools: dict[str, ToolBase] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: ToolBase) -> None:
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def replace_all(self, tools: Iterable[ToolBase], *, keep: Iterable[str] = ()) -> None:
        """Swap in a new set of tools (an MCP refresh), keeping the named ones."""
        kept = {name: self._tools[name] for name in keep if name in self._tools}
        self._tools = kept
        for tool in tools:
            self.add(tool)

    def get(self, name: str) -> ToolBase | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    @property
    def files_code(self) -> str | None:
        """The code tool that writes code on the user's files: the first that sees them
        (python_execute in the page), or None when no tool here sees any."""
        return next((tool.name for tool in self._tools.values() if tool.sees_files), None)

    def __iter__(self) -> Iterator[ToolBase]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def unknown_tool_message(self, name: str) -> str:
        return f"unknown tool {name}; available: {', '.join(self.names) or 'none'}"
