// The user's workspace in the origin's private file system (OPFS), under the folder
// "workspace". createWorkspacePort() is what Python's PageWorkspace (agent_py/page/workspace.py)
// calls through the bridge: names arrive checked by Python (relative POSIX paths,
// agent_py/core/workspace.py) and are checked again here, and every method resolves to a JSON
// string and never rejects: {"ok": true, ...} or {"ok": false, "error": "..."} with the reason
// in words. The functions exported below it are the page's panel's (ui/workspace-panel.js),
// on the UI thread: they take and give Blobs and throw a WorkspaceError with the reason.

const ROOT = "workspace";

/** The workspace's folder, made on first use. */
async function root() {
  const origin = await navigator.storage.getDirectory();
  return origin.getDirectoryHandle(ROOT, { create: true });
}

/** The parts of a checked name; throws on one that reaches outside the workspace. */
function parts(name) {
  const split = String(name).split("/");
  if (!name || split.some((part) => !part || part === "." || part === "..")) {
    throw new Error(`${JSON.stringify(name)} is not a file name in the workspace`);
  }
  return split;
}

/** The folder that holds `name`, and the file's own name; `create` makes the folders. */
async function folderOf(name, create) {
  const split = parts(name);
  let folder = await root();
  for (const part of split.slice(0, -1)) {
    folder = await folder.getDirectoryHandle(part, { create });
  }
  return { folder, file: split.at(-1) };
}

async function* walk(folder, prefix) {
  for await (const [entry, handle] of folder.entries()) {
    if (handle.kind === "directory") {
      yield* walk(handle, `${prefix}${entry}/`);
    } else {
      const file = await handle.getFile();
      yield { name: `${prefix}${entry}`, size: file.size, modified: file.lastModified };
    }
  }
}

export class WorkspaceError extends Error {
  constructor(message, cause) {
    super(message, { cause });
    this.name = "WorkspaceError";
  }
}

function bytesToBase64(bytes) {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(text);
}

function base64ToBytes(base64) {
  const text = atob(base64);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

/** Why an OPFS call failed, in words (a full disk says so). */
export function why(error) {
  if (error?.name === "QuotaExceededError") {
    return "the browser's storage for this page is full: delete files from the workspace";
  }
  if (error?.name === "NotFoundError") return "there is no such file in the workspace";
  return error?.message || String(error);
}

async function answer(work) {
  try {
    return JSON.stringify({ ok: true, ...(await work()) });
  } catch (error) {
    return JSON.stringify({ ok: false, error: why(error), kind: error?.name ?? "Error" });
  }
}

export function createWorkspacePort() {
  return {
    /** Every file: name, size, last modified (ms), sorted by name. */
    workspaceFiles() {
      return answer(async () => {
        const files = [];
        for await (const file of walk(await root(), "")) files.push(file);
        files.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
        return { files };
      });
    },
    /** One file's bytes, base64. */
    workspaceRead(name) {
      return answer(async () => {
        const { folder, file } = await folderOf(name, false);
        const handle = await folder.getFileHandle(file);
        const bytes = new Uint8Array(await (await handle.getFile()).arrayBuffer());
        return { base64: bytesToBase64(bytes) };
      });
    },
    /** Create or replace a file from base64; a write that fails leaves the old file whole
     * (createWritable writes a swap file that replaces the file only on close). */
    workspaceWrite(name, base64) {
      return answer(async () => {
        const { folder, file } = await folderOf(name, true);
        const existed = await folder.getFileHandle(file).then(
          () => true,
          () => false,
        );
        const handle = await folder.getFileHandle(file, { create: true });
        try {
          const writable = await handle.createWritable();
          try {
            await writable.write(base64ToBytes(base64));
            await writable.close();
          } catch (error) {
            await writable.abort().catch(() => {});
            throw error;
          }
        } catch (error) {
          if (!existed) await folder.removeEntry(file).catch(() => {});
          throw error;
        }
        return { size: (await handle.getFile()).size };
      });
    },
  };
}

// --- the panel's (UI thread) ------------------------------------------------------------------

/** Every file, as workspaceFiles() lists them: [{name, size, modified}], sorted by name. */
export async function listFiles() {
  const files = [];
  for await (const file of walk(await root(), "")) files.push(file);
  return files.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** The File stored under `name`. */
export async function fileOf(name) {
  try {
    const { folder, file } = await folderOf(name, false);
    return await (await folder.getFileHandle(file)).getFile();
  } catch (error) {
    throw new WorkspaceError(`${name}: ${why(error)}`, error);
  }
}

/** What the browser lets this page store and has stored, in bytes ({usage, quota}). */
export async function usage() {
  const { usage: used = 0, quota = 0 } = await navigator.storage.estimate();
  return { usage: used, quota };
}

/** Store `blob` as `name` (replacing a file of that name). One that does not fit in what the
 * browser lets this page store is refused before anything is written; a write that fails
 * midway leaves the old file whole and no new one (createWritable writes a swap file). */
export async function writeFile(name, blob) {
  const { usage: used, quota } = await usage();
  if (quota && used + blob.size > quota) {
    throw new WorkspaceError(
      `${name} (${blob.size} bytes) does not fit: the browser lets this page store ${quota} bytes `
      + `and ${used} are used; delete files or sessions to make room`,
    );
  }
  let folder;
  let file;
  let existed = false;
  try {
    ({ folder, file } = await folderOf(name, true));
    existed = await folder.getFileHandle(file).then(() => true, () => false);
    const handle = await folder.getFileHandle(file, { create: true });
    const writable = await handle.createWritable();
    try {
      await writable.write(blob);
      await writable.close();
    } catch (error) {
      await writable.abort().catch(() => {});
      throw error;
    }
  } catch (error) {
    if (folder && !existed) await folder.removeEntry(file).catch(() => {});
    // Chromium reports some writes past the quota as the blob's read failing
    // (NotReadableError): a blob that still reads was refused by the storage, not by its
    // file. What the page may store now also says so where the estimate shows the quota.
    const now = await usage().catch(() => ({ usage: 0, quota: 0 }));
    const refused = error?.name === "NotReadableError"
      && await blob.slice(0, 1).arrayBuffer().then(() => true, () => false);
    const full = refused || (now.quota && now.usage + blob.size > now.quota);
    const reason = full ? why({ name: "QuotaExceededError" }) : why(error);
    throw new WorkspaceError(`${name} could not be stored: ${reason}`, error);
  }
}

/** Remove the file `name`, and the folders it leaves empty. */
export async function deleteFile(name) {
  try {
    const split = parts(name);
    const chain = [await root()];
    for (const part of split.slice(0, -1)) chain.push(await chain.at(-1).getDirectoryHandle(part));
    await chain.at(-1).removeEntry(split.at(-1));
    for (let i = chain.length - 1; i > 0; i--) {
      const empty = (await chain[i].keys().next()).done;
      if (!empty) break;
      await chain[i - 1].removeEntry(split[i - 1]);
    }
  } catch (error) {
    throw new WorkspaceError(`${name} could not be deleted: ${why(error)}`, error);
  }
}
