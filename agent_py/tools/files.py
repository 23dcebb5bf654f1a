"""``list_files`` and ``read_file``: the steps that look at the user's workspace without
writing code for it (:mod:`agent_py.core.workspace`).

A file is read as UTF-8 text by lines, a slice at a time: a small model's context holds a
few thousand tokens, and a file that does not fit is read in parts (the result says which
lines it holds and how many the file has). ``${s1}`` of a read keeps the slice's text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_py.core.tool import ToolBase, ToolContext, ToolResult
from agent_py.core.workspace import Workspace, WorkspaceError, WorkspaceFile

DEFAULT_LINES = 200
MAX_LINES = 1000
LISTED_FILES = 12
"""Of the workspace's files, how many read_file's description names."""
MAX_READ_CHARS = 20_000
"""The most text one read gives back, whatever the lines (a file of one long line)."""


class ListFiles(ToolBase):
    name = "list_files"
    description = (
        "Lists the files in the user's workspace (the files the user added, and those earlier "
        "steps wrote under out/), with their sizes and types."
    )
    input_schema = {"type": "object", "properties": {}, "additionalProperties": False}
    reads_data = True

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        files = await self.workspace.files()
        if not files:
            return ToolResult("the workspace is empty: the user has added no files", data=[])
        lines = [f"{f.name} ({f.size} bytes, {f.type})" for f in files]
        data = [{"name": f.name, "size": f.size, "type": f.type} for f in files]
        return ToolResult("\n".join(lines), data=data)


class ReadFile(ToolBase):
    name = "read_file"
    description = (
        "Reads a text file of the user's workspace by its name, some lines at a time "
        f"(from first_line, at most max_lines, {DEFAULT_LINES} unless given). The result "
        "says which lines it holds of how many."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "the file's name in the workspace, e.g. sales.csv",
            },
            "first_line": {"type": "integer", "minimum": 1, "description": "1 for the start"},
            "max_lines": {"type": "integer", "minimum": 1, "maximum": MAX_LINES},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    reads_data = True

    def __init__(self, workspace: Workspace, files: Sequence[WorkspaceFile] = ()) -> None:
        self.workspace = workspace
        if files:  # the planner sees what there is to read (names and sizes, never contents)
            shown = ", ".join(f"{f.name} ({f.size} bytes)" for f in files[:LISTED_FILES])
            more = f" and {len(files) - LISTED_FILES} more" if len(files) > LISTED_FILES else ""
            self.description = f"{self.description} The workspace holds: {shown}{more}."

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        name = str(arguments["path"])
        first = int(arguments.get("first_line", 1))
        count = int(arguments.get("max_lines", DEFAULT_LINES))
        data = await self.workspace.read(name)
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise WorkspaceError(
                f"{name} is not a text file (not UTF-8): read it with python_execute"
            ) from None
        lines = text.splitlines(keepends=True)
        if first > max(len(lines), 1):
            raise WorkspaceError(
                f"{name} has {len(lines)} lines: first_line {first} is past its end"
            )
        chosen = lines[first - 1 : first - 1 + count]
        part = "".join(chosen)
        cut = len(part) > MAX_READ_CHARS
        if cut:
            part = part[:MAX_READ_CHARS]
        last = first - 1 + len(chosen)
        whole = first == 1 and last == len(lines) and not cut
        where = (
            f"{name}: all {len(lines)} lines"
            if whole
            else f"{name}: lines {first} to {last} of {len(lines)}"
            + (f", cut at {MAX_READ_CHARS} characters" if cut else "")
        )
        return ToolResult(
            f"{where}\n{part}",
            data=part,
            meta={"path": name, "first_line": first, "last_line": last, "lines": len(lines)},
        )
