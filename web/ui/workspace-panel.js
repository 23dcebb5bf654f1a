// The Files panel: the user's workspace (../workspace.js, the origin's private file
// system). Files dropped or picked (a folder keeps its layout) are stored under their names;
// the list shows each one's size and type with Preview, Download and Delete; the line under
// the drop zone says how much the browser lets this page store. What the agent's steps write
// (under out/) shows here after the run. Nothing leaves the machine: the files are read by the
// agent's worker through the same module, and downloaded straight from storage.
import { WorkspaceError, deleteFile, fileOf, listFiles, usage, writeFile } from "../workspace.js";

const PREVIEW_BYTES = 64 * 1024;
const MAX_NAME_CHARS = 255;
// The media type a name gives, as agent_py/core/workspace.py's media_type gives it to the
// agent (the common ones; others show as their extension).
const TYPES = {
  csv: "text/csv", tsv: "text/tab-separated-values", txt: "text/plain", log: "text/plain",
  md: "text/markdown", json: "application/json", jsonl: "application/jsonl", html: "text/html",
  xml: "application/xml", svg: "image/svg+xml", png: "image/png", jpg: "image/jpeg",
  jpeg: "image/jpeg", pdf: "application/pdf", py: "text/x-python", js: "text/javascript",
};
const TEXT = /^(text\/|application\/(json|jsonl|xml)$|image\/svg\+xml$)/;

export function mediaType(name) {
  const dot = name.lastIndexOf(".");
  const extension = dot > name.lastIndexOf("/") ? name.slice(dot + 1).toLowerCase() : "";
  return TYPES[extension] ?? (extension ? `.${extension} file` : "file");
}

/** `name` as the agent takes a workspace name (agent_py/core/workspace.py's checked_name),
 * or throws a WorkspaceError saying why not. */
export function checkedName(name) {
  const text = String(name).trim();
  if (!text || text.length > MAX_NAME_CHARS) throw new WorkspaceError(`${JSON.stringify(name)} is not a file name (1 to ${MAX_NAME_CHARS} characters)`);
  if (/[\\\u0000-\u001f]/.test(text)) throw new WorkspaceError(`${JSON.stringify(name)} holds a backslash or a control character`);
  const parts = text.split("/").filter((part) => part && part !== ".");
  if (!parts.length || parts.includes("..")) throw new WorkspaceError(`${JSON.stringify(name)} is not a name inside the workspace`);
  return parts.join("/");
}

export function sizeText(bytes) {
  if (bytes < 1024) return `${bytes} bytes`;
  const units = ["KB", "MB", "GB", "TB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

/** Save the workspace's file `name` to the user's downloads. */
export async function downloadFile(name) {
  const file = await fileOf(name);
  const url = URL.createObjectURL(file);
  const link = Object.assign(document.createElement("a"), { href: url, download: name.split("/").pop() });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

// Every file under a dropped entry, with its path from the drop (a folder keeps its layout).
async function* entryFiles(entry, prefix = "") {
  if (entry.isFile) {
    yield { name: `${prefix}${entry.name}`, file: await new Promise((resolve, reject) => entry.file(resolve, reject)) };
    return;
  }
  const reader = entry.createReader();
  for (;;) {
    const batch = await new Promise((resolve, reject) => reader.readEntries(resolve, reject));
    if (!batch.length) return;
    for (const child of batch) yield* entryFiles(child, `${prefix}${entry.name}/`);
  }
}

function el(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

export class WorkspacePanel {
  constructor() {
    const $ = (id) => document.getElementById(id);
    this.list = $("files-list");
    this.table = $("files-table");
    this.usageLine = $("files-usage");
    this.error = $("files-error");
    this.preview = $("files-preview");
    this.files = [];
    const drop = $("files-drop");
    drop.addEventListener("dragover", (event) => {
      event.preventDefault();
      drop.classList.add("over");
    });
    drop.addEventListener("dragleave", () => drop.classList.remove("over"));
    drop.addEventListener("drop", (event) => {
      event.preventDefault();
      drop.classList.remove("over");
      this.addDropped(event.dataTransfer);
    });
    for (const input of [$("files-pick"), $("files-pick-folder")]) {
      input.addEventListener("change", () => {
        const picked = [...input.files].map((file) => ({ name: file.webkitRelativePath || file.name, file }));
        input.value = "";
        this.add(picked);
      });
    }
    this.ready = this.refresh();
  }

  /** Store dropped files and folders. */
  async addDropped(transfer) {
    const entries = [...transfer.items].map((item) => item.webkitGetAsEntry?.()).filter(Boolean);
    const found = [];
    if (entries.length) {
      for (const entry of entries) for await (const file of entryFiles(entry)) found.push(file);
    } else {
      found.push(...[...transfer.files].map((file) => ({ name: file.name, file })));
    }
    return this.add(found);
  }

  /** Store `[{name, file}]`, each on its own: one that cannot be stored (a bad name, no room)
   * is said and the others are stored. Smallest first: a file too big for the room left does
   * not take the room of the others (Chromium frees a refused write's space only a while
   * later). Resolves once the list shows them. */
  async add(found) {
    const failed = [];
    const bySize = [...found].sort((a, b) => a.file.size - b.file.size);
    for (const { name, file } of bySize) {
      try {
        await writeFile(checkedName(name), file);
      } catch (error) {
        failed.push(error instanceof WorkspaceError ? error.message : `${name}: ${error?.message || error}`);
      }
    }
    await this.refresh();
    if (failed.length) this.error.textContent = `Not stored: ${failed.join("; ")}`;
  }

  async remove(name) {
    try {
      await deleteFile(name);
      if (this.preview.dataset.name === name) this.preview.hidden = true;
      await this.refresh();
    } catch (error) {
      this.error.textContent = error.message;
    }
  }

  async show(name) {
    try {
      const file = await fileOf(name);
      const head = await file.slice(0, PREVIEW_BYTES).text();
      const more = file.size > PREVIEW_BYTES ? `\n… (${sizeText(file.size - PREVIEW_BYTES)} more)` : "";
      this.preview.dataset.name = name;
      document.getElementById("files-preview-name").textContent = name;
      document.getElementById("files-preview-text").textContent = head + more;
      this.preview.hidden = false;
    } catch (error) {
      this.error.textContent = error.message;
    }
  }

  /** Read the workspace again (after a run: its steps may have written files). */
  async refresh() {
    this.error.textContent = "";
    try {
      this.files = await listFiles();
    } catch (error) {
      this.files = [];
      this.error.textContent = `The workspace cannot be read here: ${error?.message || error}`;
    }
    this.list.replaceChildren(...this.files.map((file) => this.row(file)));
    this.table.hidden = !this.files.length;
    const total = this.files.reduce((sum, file) => sum + file.size, 0);
    const { usage: used, quota } = await usage().catch(() => ({ usage: 0, quota: 0 }));
    const count = `${this.files.length} file${this.files.length === 1 ? "" : "s"}, ${sizeText(total)}`;
    this.usageLine.textContent = quota
      ? `${count}; this page uses ${sizeText(used)} of the ${sizeText(quota)} the browser lets it store (the model's files included).`
      : count;
  }

  row(file) {
    const type = mediaType(file.name);
    const button = (text, action) => {
      const node = el("button", { type: "button", textContent: text });
      node.setAttribute("aria-label", `${text} ${file.name}`);
      node.addEventListener("click", action);
      return node;
    };
    const actions = el("td", { className: "actions" });
    if (TEXT.test(type)) actions.append(button("Preview", () => this.show(file.name)));
    actions.append(
      button("Download", () => downloadFile(file.name).catch((error) => { this.error.textContent = error.message; })),
      button("Delete", () => this.remove(file.name)),
    );
    const row = el("tr", {}, el("td", { textContent: file.name }), el("td", { textContent: sizeText(file.size) }),
      el("td", { textContent: type }), actions);
    row.dataset.name = file.name;
    return row;
  }
}
