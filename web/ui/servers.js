// The MCP servers panel: the list of servers the user added (saved in this browser, tokens
// included), each with its state as the agent worker reports it (once connected: its tools
// and the MCP revision it is spoken to in), and a form to add or edit one. It only edits the
// list and draws states; connecting is the worker's job
// (agent_py.page.session.PageSession.configure_servers). No server is built in. A server that
// wants an OAuth sign-in gets a "Sign in" button (user-prompts.js opens the popup); one
// signed in can forget its tokens. Tools the agent cannot use are named with the reason.

const STORAGE_KEY = "agent_py.mcp_servers";
const NAME_PATTERN = /^[A-Za-z0-9_-]{1,32}$/;
const TRANSPORTS = ["auto", "fetch", "bridge"];
const TOOLS_SHOWN = 8;

export function loadServers() {
  try {
    const stored = JSON.parse(localStorage.getItem(STORAGE_KEY) || "[]");
    return Array.isArray(stored) ? withDefaults(stored.filter((s) => s && typeof s.name === "string")) : [];
  } catch {
    return [];
  }
}

/** Servers as the panel keeps them: what a list leaves out (written by hand, by a test or by
 * an older page) takes the form's defaults. */
function withDefaults(servers) {
  return servers.map((server) => ({ transport: "auto", enabled: true, token: "", ...server }));
}

function saveServers(servers) {
  localStorage.setItem(STORAGE_KEY, JSON.stringify(servers));
}

/** A sentence saying what is wrong with a server's settings, or "" when they can be used. */
export function validateServer(server, others) {
  if (!NAME_PATTERN.test(server.name)) {
    return "The name may use letters, digits, _ and - (at most 32), and names the server's tools (name__tool).";
  }
  if (server.name.includes("__")) return "The name cannot contain __ (it separates server and tool).";
  if (others.some((other) => other.name === server.name)) return `There is already a server named ${server.name}.`;
  let url;
  try {
    url = new URL(server.url);
  } catch {
    return "The URL is not valid; write the server's MCP endpoint, e.g. http://127.0.0.1:8000/mcp.";
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return "The URL must start with http:// or https://.";
  if (!TRANSPORTS.includes(server.transport)) return `Unknown transport ${server.transport}.`;
  return "";
}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "text") node.textContent = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value);
  }
  node.append(...children);
  return node;
}

function describeStatus(server, status) {
  if (!server.enabled) return "Disabled";
  if (!status) return "Not connected yet";
  if (status.state === "connecting") return "Connecting…";
  if (status.state === "error") return `Error: ${status.error || "unknown error"}`;
  if (status.state === "connected") {
    const count = status.tool_count ?? 0;
    const names = (status.tools || []).slice(0, TOOLS_SHOWN).join(", ");
    const more = (status.tools || []).length > TOOLS_SHOWN ? ", …" : "";
    // Which revision is spoken tells what the server sees: a session (2025) or none (2026).
    const revision = status.protocol_version ? ` · MCP ${status.protocol_version}` : "";
    return `Connected: ${count} tool${count === 1 ? "" : "s"}${names ? ` (${names}${more})` : ""}${revision}`;
  }
  return status.state;
}

function describePresence(presence) {
  if (!presence) return "Checking for the bridge extension…";
  if (!presence.present) {
    // The extension answers only pages the user added, so "absent" and "not added" look the same.
    return `Bridge extension: not detected, or this page (${presence.origin}) is not one of its pages (add it in the extension's options). It is needed only for servers that send no CORS headers (see the README).`;
  }
  if (!presence.allowed) {
    return `Bridge extension ${presence.version || ""}: paused in its options.`;
  }
  return `Bridge extension ${presence.version || ""}: ready for this page.`;
}

export class ServersPanel {
  #servers = loadServers();
  #statuses = new Map(); // name -> last status from the worker
  #editing = null; // name of the server in the form, or null when adding
  #signIns = new Map(); // name -> {open, cancel, note}
  #onChange;
  #onReconnect;
  #onForget;
  #$;

  /**
   * `onChange(servers)` runs after every edit with the whole list; `onReconnect(name)` when
   * the user asks to connect a server again; `onForget(name)` to forget its OAuth sign-in.
   */
  constructor({ onChange, onReconnect, onForget = () => {} }) {
    this.#onChange = onChange;
    this.#onReconnect = onReconnect;
    this.#onForget = onForget;
    this.#$ = (id) => document.getElementById(id);
    this.#$("mcp-add").addEventListener("click", () => this.#openForm(null));
    this.#$("mcp-cancel").addEventListener("click", () => this.#closeForm());
    this.#$("mcp-server-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.#submit();
    });
    this.#render();
  }

  /** The servers as saved (what the worker should connect). */
  servers() {
    return this.#servers.map((server) => ({ ...server }));
  }

  /** Replaces the whole list (scripts and tests); same effect as editing it by hand. */
  setServers(servers) {
    this.#servers = withDefaults(servers);
    this.#changed();
  }

  setStatus(status) {
    this.#statuses.set(status.name, status);
    this.#render();
  }

  /** Each saved server's state as the panel shows it: {name, state ("pending", "connected",
   * "error", "sign-in", "disabled", …), error?}, and once connected what its line shows:
   * tool_count, tools and protocol_version (the MCP revision it is spoken to in). */
  states() {
    return this.#servers.map((server) => {
      const status = this.#statuses.get(server.name);
      const state = this.#stateOf(server);
      const shown = { name: server.name, state, ...(status?.error ? { error: status.error } : {}) };
      if (state !== "connected") return shown;
      const { tool_count = 0, tools = [], protocol_version = null } = status;
      return { ...shown, tool_count, tools, protocol_version };
    });
  }

  #stateOf(server) {
    if (this.#signIns.has(server.name)) return "sign-in";
    return server.enabled ? this.#statuses.get(server.name)?.state || "pending" : "disabled";
  }

  /** A sign-in waits for the user's click (`{open, cancel}`), or no longer (null). */
  setSignIn(name, handlers) {
    if (handlers) this.#signIns.set(name, { ...handlers, note: "" });
    else this.#signIns.delete(name);
    this.#render();
  }

  setSignInNote(name, note) {
    const signIn = this.#signIns.get(name);
    if (signIn) signIn.note = note;
    this.#render();
  }

  setPresence(presence) {
    this.#$("mcp-bridge-status").textContent = describePresence(presence);
  }

  #changed() {
    saveServers(this.#servers);
    const names = new Set(this.#servers.map((server) => server.name));
    for (const name of [...this.#statuses.keys()]) if (!names.has(name)) this.#statuses.delete(name);
    this.#render();
    this.#onChange(this.servers());
  }

  #render() {
    const list = this.#$("mcp-server-list");
    if (!this.#servers.length) {
      list.replaceChildren(el("li", { class: "muted", text: "No MCP server yet. Add one to give the agent its tools." }));
      return;
    }
    list.replaceChildren(...this.#servers.map((server) => this.#item(server)));
  }

  #item(server) {
    const status = this.#statuses.get(server.name);
    const signIn = this.#signIns.get(server.name);
    const state = this.#stateOf(server);
    const button = (text, label, onClick) => {
      const node = el("button", { type: "button", "aria-label": `${label} server ${server.name}`, text });
      node.addEventListener("click", onClick);
      return node;
    };
    const extra = [];
    if (signIn) {
      extra.push(
        el(
          "div",
          { class: "sign-in" },
          el("p", { text: `${server.name} asks you to sign in (OAuth). The sign-in opens in a new window.` }),
          button("Sign in", "Sign in to", () => signIn.open()),
          " ",
          button("Cancel sign-in", "Cancel sign-in to", () => signIn.cancel()),
          signIn.note ? el("p", { role: "alert", text: signIn.note }) : "",
        ),
      );
    }
    if (status?.left_out?.length) {
      extra.push(el("p", { class: "muted left-out", text: `Not offered to the agent: ${status.left_out.join("; ")}.` }));
    }
    const forget = status?.signed_in ? [button("Forget sign-in", "Forget sign-in of", () => this.#onForget(server.name))] : [];
    return el(
      "li",
      { class: "server", dataset: { server: server.name, state } },
      el(
        "div",
        { class: "server-head" },
        el("strong", { text: server.name }),
        " ",
        el("code", { text: server.url }),
        " ",
        el("span", { class: "muted", text: `transport: ${server.transport}` }),
      ),
      el("p", { class: "server-status", text: describeStatus(server, status) + (status?.signed_in ? " · Signed in (OAuth)." : "") }),
      ...extra,
      el(
        "div",
        { class: "buttons" },
        button("Edit", "Edit", () => this.#openForm(server.name)),
        button("Reconnect", "Reconnect", () => this.#onReconnect(server.name)),
        ...forget,
        button("Remove", "Remove", () => this.#remove(server.name)),
      ),
    );
  }

  #openForm(name) {
    this.#editing = name;
    const server = this.#servers.find((s) => s.name === name) || { name: "", url: "", token: "", transport: "auto", enabled: true };
    this.#$("mcp-form-legend").textContent = name ? `Edit the MCP server ${name}` : "Add an MCP server";
    this.#$("mcp-name").value = server.name;
    this.#$("mcp-url").value = server.url;
    this.#$("mcp-token").value = server.token || "";
    this.#$("mcp-transport").value = server.transport;
    this.#$("mcp-enabled").checked = server.enabled !== false;
    this.#$("mcp-form-error").textContent = "";
    this.#$("mcp-server-form").hidden = false;
    this.#$("mcp-name").focus();
  }

  #closeForm() {
    this.#editing = null;
    this.#$("mcp-server-form").hidden = true;
    this.#$("mcp-add").focus();
  }

  #submit() {
    const server = {
      name: this.#$("mcp-name").value.trim(),
      url: this.#$("mcp-url").value.trim(),
      token: this.#$("mcp-token").value.trim(),
      transport: this.#$("mcp-transport").value,
      enabled: this.#$("mcp-enabled").checked,
    };
    const others = this.#servers.filter((s) => s.name !== this.#editing);
    const problem = validateServer(server, others);
    if (problem) {
      this.#$("mcp-form-error").textContent = problem;
      return;
    }
    const index = this.#servers.findIndex((s) => s.name === this.#editing);
    if (index >= 0) this.#servers[index] = server;
    else this.#servers.push(server);
    this.#statuses.delete(server.name);
    this.#closeForm();
    this.#changed();
  }

  #remove(name) {
    this.#servers = this.#servers.filter((s) => s.name !== name);
    this.#changed();
  }
}
