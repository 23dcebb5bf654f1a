"""``run --file PATH``: the files of a terminal run, put into the page's workspace (OPFS).

The terminal's browser profile is its own (``.artifacts/browser-profile``), not the user's
browser: each run's workspace holds exactly the files it was given, so a file of an earlier
run never joins a later one. The files go in through the page itself (the origin's private
file system, as ``web/worker/workspace.js`` lays it out), named by their base names.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_py.core.errors import SetupError
from agent_py.core.workspace import WorkspaceError, checked_name

if TYPE_CHECKING:
    from playwright.sync_api import Page

MAX_FILE_BYTES = 64 * 1024 * 1024
"""The largest file a terminal run takes: its bytes cross into the page as base64 text."""

_REPLACE = """async (files) => {
  const origin = await navigator.storage.getDirectory();
  await origin.removeEntry("workspace", { recursive: true }).catch((error) => {
    if (error.name !== "NotFoundError") throw error;
  });
  const root = await origin.getDirectoryHandle("workspace", { create: true });
  for (const { name, base64 } of files) {
    const text = atob(base64);
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    const writable = await (await root.getFileHandle(name, { create: true })).createWritable();
    await writable.write(bytes);
    await writable.close();
  }
  return files.length;
}"""


def workspace_files(paths: list[Path]) -> list[tuple[str, bytes]]:
    """The files ``paths`` name, as (workspace name, bytes); raises SetupError for one that
    cannot be read, is too large, or shares its name with another."""
    files: dict[str, bytes] = {}
    for path in paths:
        if not path.is_file():
            raise SetupError(f"--file {path}: no such file")
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise SetupError(f"--file {path}: {size} bytes, more than {MAX_FILE_BYTES} a run takes")
        try:
            name = checked_name(path.name)
        except WorkspaceError as error:
            raise SetupError(f"--file {path}: {error}") from None
        if name in files:
            raise SetupError(f"--file {path}: another file of this run is named {name} too")
        files[name] = path.read_bytes()
    return list(files.items())


def replace_workspace(page: Page, files: list[tuple[str, bytes]]) -> None:
    """Make the page's workspace hold exactly ``files``."""
    sent: list[dict[str, Any]] = [
        {"name": name, "base64": base64.b64encode(data).decode("ascii")} for name, data in files
    ]
    page.evaluate(_REPLACE, sent)
