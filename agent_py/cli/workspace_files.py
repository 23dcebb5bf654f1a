"""``run --file PATH``: the files of a terminal run, put into the page's workspace (OPFS).

The terminal's browser profile is its own (``.artifacts/browser-profile``), not the user's
browser: each run's workspace holds exactly the files it was given, so a file of an earlier
run never joins a later one. The files go in through the page itself (the origin's private
file system, as ``web/workspace.js`` lays it out), named by their base names; the files
the run's steps wrote (under ``out/``) come back out of it into a folder of the run's own
(``.artifacts/outputs/<run>/``), checked against the sha256 the history records.
"""

from __future__ import annotations

import base64
import hashlib
import time
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from agent_py.core.errors import SetupError
from agent_py.core.workspace import OUTPUT_FOLDER, WorkspaceError, checked_name

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

_READ = """async (name) => {
  let folder = await (await navigator.storage.getDirectory()).getDirectoryHandle("workspace");
  const parts = name.split("/");
  for (const part of parts.slice(0, -1)) folder = await folder.getDirectoryHandle(part);
  const bytes = new Uint8Array(await (await folder.getFileHandle(parts.at(-1))).getFile()
    .then((file) => file.arrayBuffer()));
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(text);
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


def outputs_folder(root: Path) -> Path:
    """A new folder under ``root`` for one run's files, named by the time it ends."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder, n = root / stamp, 1
    while folder.exists():
        n += 1
        folder = root / f"{stamp}-{n}"
    return folder


def save_outputs(page: Page, written: list[dict[str, Any]], root: Path) -> list[Path]:
    """Copy the files a run wrote (``written``: the run result's name, size, sha256) from the
    page's workspace into a new folder under ``root``; the paths saved. Raises SetupError
    for a file that is gone or differs from what its step recorded."""
    if not written:
        return []
    folder = outputs_folder(root)
    saved = []
    for record in written:
        name = checked_name(str(record["name"]))
        data = base64.b64decode(page.evaluate(_READ, name))
        if hashlib.sha256(data).hexdigest() != record["sha256"]:
            raise SetupError(f"{name} in the workspace is not the file the run wrote")
        parts = PurePosixPath(name).parts
        relative = Path(*parts[1:]) if parts[0] == OUTPUT_FOLDER and len(parts) > 1 else Path(name)
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        saved.append(path)
    return saved
