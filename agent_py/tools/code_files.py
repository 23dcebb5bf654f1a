"""What the code tools share on the user's workspace (:mod:`agent_py.core.workspace`): its
files copied into each call's sandbox, how the tool's description and its code calls name
them, and what the code wrote under out/ kept in it.

A sandbox never reaches the page's storage: it is given copies, and gives back bytes that
are checked (a name under out/, inside the workspace) and stored here. Its isolation is
what it is without files.
"""

from __future__ import annotations

import codecs
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from agent_py.core.tool import ToolBase, ToolError
from agent_py.core.workspace import (
    OUTPUT_FOLDER,
    Workspace,
    WorkspaceError,
    WorkspaceFile,
    checked_name,
)
from agent_py.tools.code import code_input_schema

INPUT_BYTES = 16 * 1024 * 1024
"""The most of the workspace one call copies into the sandbox: files past it are left out
(and the code is told, if it opens one)."""
LISTED_FILES = 12
HEAD_LINES = 3  # the lines of each text file a code call is shown
HEAD_LINE_CHARS = 200
PREVIEW_CHARS = 80  # of a file's first line, in the plan's prompt
_HEAD_BYTES = 8 * 1024


def text_head(data: bytes) -> str | None:
    """The first lines of ``data`` as text (each cut to HEAD_LINE_CHARS), or None when it is
    no UTF-8 text (an image, a zip)."""
    try:
        text = codecs.getincrementaldecoder("utf-8-sig")().decode(data[:_HEAD_BYTES])
    except UnicodeDecodeError:
        return None
    if "\x00" in text:
        return None
    lines = text.splitlines()[:HEAD_LINES]
    return "\n".join(line[:HEAD_LINE_CHARS] for line in lines)


async def file_heads(workspace: Workspace, files: Sequence[WorkspaceFile]) -> dict[str, str]:
    """How each of the first LISTED_FILES text files begins (name to its first lines): a
    code call that sees the columns a CSV has uses them, and one whose column is not there
    can say so. A file that cannot be read is left out; its read fails later, with why."""
    heads = {}
    for file in files[:LISTED_FILES]:
        if file.size > INPUT_BYTES:
            continue
        try:
            head = text_head(await workspace.read(file.name))
        except WorkspaceError:
            continue
        if head:
            heads[file.name] = head
    return heads


def written_record(name: str, data: bytes) -> dict[str, Any]:
    """How the history records a file a step wrote: name, size, sha256."""
    return {"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def not_copied(left_out: Sequence[str]) -> str:
    """What a code call that failed to open a file is told of the files left out for size."""
    return (
        f"\n(not copied into the sandbox, over {INPUT_BYTES} bytes in all: "
        f"{', '.join(left_out)}; read it with read_file)"
    )


class OnWorkspace(ToolBase):
    """A code tool whose calls see the user's workspace: its files copied into each call's
    sandbox, what the code writes under out/ kept in it. ``with_files`` (the tool's
    description given files, ending before their list) and ``code_with_files`` (what its code
    calls are told, ``%s`` the files' names) say how the code opens and writes them."""

    workspace: Workspace | None = None
    with_files: str = ""
    code_with_files: str = ""

    def see(
        self,
        workspace: Workspace | None,
        files: Sequence[WorkspaceFile],
        heads: Mapping[str, str] | None,
    ) -> None:
        """``workspace``, holding ``files`` now: named in the description (names, sizes and
        first lines, never contents), and ``heads`` (:func:`file_heads`) shown to its code
        calls only (the plan's prompt stays short). A workspace without files keeps the
        description of a sandbox without them (what the code writes under out/ is kept)."""
        self.workspace = workspace
        if workspace is None or not files:
            return
        heads = heads or {}
        shown = ", ".join(_listed(f, heads.get(f.name)) for f in files[:LISTED_FILES])
        more = f" and {len(files) - LISTED_FILES} more" if len(files) > LISTED_FILES else ""
        self.description = f"{self.with_files} The files: {shown}{more}."
        self.sees_files = True
        self.reads_data = True  # a look-up of the user's files can be done here
        self.file_names = tuple(f.name for f in files)
        # What the code call is told of its input (the code prompt shows no description).
        names = ", ".join(f.name for f in files[:LISTED_FILES])
        self.input_schema = code_input_schema(self.code_with_files % names)
        if heads:
            self.code_context = "How the user's files begin:\n" + "\n".join(
                f"{name}:\n{head}" for name, head in heads.items()
            )

    async def given_files(self) -> tuple[dict[str, bytes] | None, list[str]]:
        """The workspace's files for the sandbox (None without a workspace), and the names of
        those left out for size."""
        if self.workspace is None:
            return None, []
        given: dict[str, bytes] = {}
        left_out: list[str] = []
        total = 0
        for file in await self.workspace.files():
            if total + file.size > INPUT_BYTES:
                left_out.append(file.name)
                continue
            data = await self.workspace.read(file.name)
            total += len(data)
            given[file.name] = data
        return given, left_out

    async def keep(self, written: Mapping[str, bytes]) -> list[dict[str, Any]]:
        """Stores what the code wrote into the workspace; the records of what was kept."""
        assert self.workspace is not None
        kept = []
        for name, data in sorted(written.items()):
            try:
                stored = await self.workspace.write(_output_name(name), data)
            except WorkspaceError as error:
                raise ToolError(f"the code ran, but {name} could not be kept: {error}") from None
            kept.append(written_record(stored.name, data))
        return kept


def with_written(content: str, value: Any, kept: Sequence[Mapping[str, Any]]) -> tuple[str, Any]:
    """A result's text and value with the files the code wrote named: a file written and
    nothing given back is a result of its own."""
    if not kept:
        return content, value
    listed = ", ".join(f"{f['name']} ({f['size']} bytes)" for f in kept)
    content = "\n".join(part for part in (content, f"files written: {listed}") if part)
    if value is None or value == "":
        value = f"files written: {listed}"
    return content, value


def _listed(file: WorkspaceFile, head: str | None) -> str:
    """How the plan's prompt names a file: its size, and its first line when it is text
    (a CSV's columns), cut to PREVIEW_CHARS."""
    if not head:
        return f"{file.name} ({file.size} bytes)"
    first = head.split("\n", 1)[0]
    if len(first) > PREVIEW_CHARS:
        first = first[:PREVIEW_CHARS] + "…"
    return f"{file.name} ({file.size} bytes, first line: {first})"


def _output_name(name: str) -> str:
    """A name the sandbox sent back, checked: under out/ and inside the workspace."""
    checked = checked_name(name)
    if not checked.startswith(f"{OUTPUT_FOLDER}/"):
        raise ToolError(f"the sandbox sent back {name!r}, which is not under {OUTPUT_FOLDER}/")
    return checked
