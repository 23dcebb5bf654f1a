"""The user's workspace: the files a run may read and the files its steps write.

In the page it lives in the origin's private file system (OPFS, ``web/workspace.js``);
from the terminal and in tests, in a folder (:class:`FolderWorkspace`). Either way a file is
named by a relative POSIX path (``sales.csv``, ``out/report.txt``), checked here, so no
name reaches outside the workspace. Tools get it injected (``agent_py.tools.files``); nothing
of it leaves the machine.
"""

from __future__ import annotations

import mimetypes
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

from agent_py.core.errors import ToolError

MAX_NAME_CHARS = 255
OUTPUT_FOLDER = "out"
"""Where steps write their files; the user's own files stay as they are."""


@dataclass(frozen=True)
class WorkspaceFile:
    name: str
    """The relative POSIX path (``sales.csv``, ``out/chart.svg``)."""
    size: int
    """Bytes."""
    type: str
    """The media type its name gives (``text/csv``), ``application/octet-stream`` if none."""


class WorkspaceError(ToolError):
    """A workspace operation that cannot be done: a bad name, a missing file, no room."""


class Workspace(Protocol):
    async def files(self) -> list[WorkspaceFile]:
        """Every file, sorted by name."""
        ...

    async def read(self, name: str) -> bytes:
        """The file's bytes; WorkspaceError when there is none by that name."""
        ...

    async def write(self, name: str, data: bytes) -> WorkspaceFile:
        """Create or replace the file; WorkspaceError when it cannot be stored."""
        ...


def checked_name(name: str) -> str:
    """``name`` as a workspace path (``./a.csv`` is ``a.csv``); raises WorkspaceError for one
    that is empty, absolute, climbs out (``..``), holds a backslash or a control character,
    or is too long."""
    text = name.strip()
    if not text or len(text) > MAX_NAME_CHARS:
        raise WorkspaceError(f"{name!r} is not a file name (1 to {MAX_NAME_CHARS} characters)")
    if "\\" in text or any(ord(char) < 32 for char in text):
        raise WorkspaceError(f"{name!r} is not a file name: use / between folders")
    path = PurePosixPath(text)
    if path.is_absolute() or ".." in path.parts:
        raise WorkspaceError(f"{name!r} is outside the workspace: name a file in it")
    parts = [part for part in path.parts if part != "."]
    if not parts:
        raise WorkspaceError(f"{name!r} is not a file name")
    return "/".join(parts)


def media_type(name: str) -> str:
    known = {
        ".csv": "text/csv",
        ".md": "text/markdown",
        ".log": "text/plain",
        ".jsonl": "application/jsonl",
    }
    suffix = PurePosixPath(name).suffix.lower()
    return known.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def missing(name: str, files: list[WorkspaceFile]) -> WorkspaceError:
    """Why ``name`` cannot be read: it is not there, and what is."""
    there = ", ".join(f.name for f in files[:20]) or "none: the workspace is empty"
    more = f" and {len(files) - 20} more" if len(files) > 20 else ""
    return WorkspaceError(f"no file named {name!r} in the workspace (files: {there}{more})")


class FolderWorkspace:
    """A workspace in a folder of this machine (the terminal's runs, tests). Its files are
    small and local: they are read and written at once, not in a thread."""

    def __init__(self, root: Path, *, max_bytes: int | None = None) -> None:
        self.root = root
        self.max_bytes = max_bytes
        """The most all files may hold together; None: no bound but the disk's."""
        root.mkdir(parents=True, exist_ok=True)

    async def files(self) -> list[WorkspaceFile]:
        return _listing(self.root)

    async def read(self, name: str) -> bytes:
        path = self.root / checked_name(name)
        if not path.is_file():
            raise missing(name, _listing(self.root))
        return path.read_bytes()

    async def write(self, name: str, data: bytes) -> WorkspaceFile:
        name = checked_name(name)
        if self.max_bytes is not None:
            others = sum(f.size for f in _listing(self.root) if f.name != name)
            if others + len(data) > self.max_bytes:
                raise WorkspaceError(
                    f"{name} ({len(data)} bytes) does not fit: the workspace holds "
                    f"{others} of its {self.max_bytes} bytes"
                )
        _store(self.root / name, data)
        return WorkspaceFile(name, len(data), media_type(name))


def _listing(root: Path) -> list[WorkspaceFile]:
    found = []
    for directory, _, names in os.walk(root):
        for file_name in names:
            path = Path(directory, file_name)
            name = path.relative_to(root).as_posix()
            found.append(WorkspaceFile(name, path.stat().st_size, media_type(name)))
    return sorted(found, key=lambda f: f.name)


def _store(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
