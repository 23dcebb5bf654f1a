// The user's workspace in the origin's private file system (OPFS), under the folder
// "workspace": what Python's PageWorkspace (agent_py/page/workspace.py) calls through the
// bridge. Names arrive checked by Python (relative POSIX paths, agent_py/core/workspace.py)
// and are checked again here. Every method resolves to a JSON string and never rejects:
// {"ok": true, ...} or {"ok": false, "error": "..."} with the reason in words.

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
function why(error) {
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
