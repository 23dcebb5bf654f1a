"""The page's workspace: the user's files in the origin's private file system (OPFS),
reached through the worker's bridge (``web/workspace.js``), as a
:class:`~agent_py.core.workspace.Workspace`."""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable
from typing import Any, Protocol

from agent_py.core.workspace import (
    WorkspaceError,
    WorkspaceFile,
    checked_name,
    media_type,
    missing,
)


class WorkspaceBridge(Protocol):
    """The bridge's workspace methods (JavaScript's names); each resolves to JSON."""

    def workspaceFiles(self) -> Awaitable[str]: ...
    def workspaceRead(self, name: str) -> Awaitable[str]: ...
    def workspaceWrite(self, name: str, base64_data: str) -> Awaitable[str]: ...


def _parsed(raw: str, doing: str) -> dict[str, Any]:
    try:
        reply = json.loads(raw)
    except (TypeError, ValueError):
        reply = None
    if not isinstance(reply, dict):
        raise WorkspaceError(f"the workspace sent an unreadable reply while {doing}")
    return reply


def _reply(raw: str, doing: str) -> dict[str, Any]:
    reply = _parsed(raw, doing)
    if not reply.get("ok"):
        raise WorkspaceError(f"the workspace could not be used while {doing}: {reply.get('error')}")
    return reply


class PageWorkspace:
    def __init__(self, bridge: WorkspaceBridge) -> None:
        self._bridge = bridge

    async def files(self) -> list[WorkspaceFile]:
        reply = _reply(await self._bridge.workspaceFiles(), "listing its files")
        return [
            WorkspaceFile(str(f["name"]), int(f["size"]), media_type(str(f["name"])))
            for f in reply.get("files", [])
        ]

    async def read(self, name: str) -> bytes:
        checked = checked_name(name)
        raw = _parsed(await self._bridge.workspaceRead(checked), f"reading {checked}")
        if not raw.get("ok"):
            if raw.get("kind") in ("NotFoundError", "TypeMismatchError"):
                raise missing(name, await self.files())
            raise WorkspaceError(f"{checked} could not be read: {raw.get('error')}")
        return base64.b64decode(raw["base64"])

    async def write(self, name: str, data: bytes) -> WorkspaceFile:
        checked = checked_name(name)
        encoded = base64.b64encode(data).decode("ascii")
        _reply(await self._bridge.workspaceWrite(checked, encoded), f"writing {checked}")
        return WorkspaceFile(checked, len(data), media_type(checked))
