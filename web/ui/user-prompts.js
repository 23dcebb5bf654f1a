// The user's part of MCP in the page (UI thread): OAuth sign-in popups, the tokens they
// yield, and elicitation forms. The worker side is user-port.js (messages: protocol.js).
//
// Sign-in: a popup may only open on the user's click, so a server that needs authorization
// gets a "Sign in" button in the servers panel; the popup goes to the authorization server,
// which sends it back to oauth-callback.html, which broadcasts its URL (protocol.js,
// OAUTH_CHANNEL). The answer goes to the request whose `state` it carries.
// Tokens are kept per server URL in localStorage (this browser only, like the servers'
// tokens) and can be forgotten from the panel. They are never logged.

import { OAUTH_CALLBACK, OAUTH_CHANNEL, ToUI, toWorker } from "../protocol.js";

const AUTH_KEY = "agent_py.mcp_auth";

function stateOf(url) {
  try {
    return new URL(url).searchParams.get("state");
  } catch {
    return null;
  }
}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "text") node.textContent = value;
    else if (value === true) node.setAttribute(key, "");
    else if (value !== false && value !== null && value !== undefined) node.setAttribute(key, value);
  }
  node.append(...children);
  return node;
}

export function loadAuthRecords() {
  try {
    const stored = JSON.parse(localStorage.getItem(AUTH_KEY) || "{}");
    return stored && typeof stored === "object" && !Array.isArray(stored) ? stored : {};
  } catch {
    return {};
  }
}

export class UserPrompts {
  #send;
  #panel;
  #signIns = new Map(); // state -> {id, server}
  #channel = new BroadcastChannel(OAUTH_CHANNEL);

  /** `send(message)` posts to the worker; `panel` is the ServersPanel. */
  constructor({ send, panel }) {
    this.#send = send;
    this.#panel = panel;
    this.#channel.onmessage = (event) => this.#callback(event.data);
  }

  /** Handles the worker's messages of this module; true when it was one. */
  onWorkerMessage(message) {
    switch (message.type) {
      case ToUI.MCP_AUTHORIZE:
        this.#authorize(message);
        return true;
      case ToUI.MCP_AUTH_SAVE:
        this.#save(message.url, message.record);
        return true;
      case ToUI.MCP_ELICIT:
        this.#elicit(message);
        return true;
      default:
        return false;
    }
  }

  #authorize({ id, server, url }) {
    const state = stateOf(url);
    this.#signIns.set(state, { id, server });
    this.#panel.setSignIn(server, {
      open: () => {
        const popup = window.open(url, "agent_py-sign-in", "popup,width=520,height=680");
        if (!popup) this.#panel.setSignInNote(server, "The browser blocked the sign-in window: allow pop-ups for this page and try again.");
      },
      cancel: () => this.#finish(state, { error: "the user cancelled the sign-in" }),
    });
  }

  #callback(data) {
    if (data?.type !== OAUTH_CALLBACK) return;
    const state = stateOf(data.url);
    if (this.#signIns.has(state)) this.#finish(state, { url: data.url });
  }

  #finish(state, answer) {
    const signIn = this.#signIns.get(state);
    if (!signIn) return;
    this.#signIns.delete(state);
    this.#panel.setSignIn(signIn.server, null);
    this.#send(toWorker.mcpAuthorized(signIn.id, answer));
  }

  #save(url, record) {
    const records = loadAuthRecords();
    if (record) records[url] = record;
    else delete records[url];
    localStorage.setItem(AUTH_KEY, JSON.stringify(records));
  }

  #elicit({ id, form }) {
    const dialog = el("dialog", { class: "elicitation", "aria-labelledby": `elicit-title-${id}` });
    const body = el("form", { method: "dialog" });
    body.append(
      el("h3", { id: `elicit-title-${id}`, text: `${form.server} asks` }),
      el("p", { text: form.message }),
    );
    const inputs = form.fields.map((field) => this.#field(body, field));
    const error = el("p", { class: "form-error", role: "alert" });
    const accept = el("button", { type: "submit", value: "accept", text: "Send" });
    const decline = el("button", { type: "submit", value: "decline", formnovalidate: true, text: "Decline" });
    const cancel = el("button", { type: "submit", value: "cancel", formnovalidate: true, text: "Cancel" });
    body.append(error, el("div", { class: "buttons" }, accept, decline, cancel));
    dialog.append(body);
    document.body.append(dialog);
    dialog.addEventListener("close", () => {
      const action = ["accept", "decline"].includes(dialog.returnValue) ? dialog.returnValue : "cancel";
      const answer = { action };
      if (action === "accept") answer.content = Object.fromEntries(inputs.map((read) => read()).filter((entry) => entry));
      dialog.remove();
      this.#send(toWorker.mcpElicited(id, answer));
    });
    dialog.showModal();
  }

  /** Adds a field's input to `body`; returns a function giving [name, value] or null. */
  #field(body, field) {
    const id = `elicit-${field.name}-${Math.random().toString(36).slice(2, 8)}`;
    const label = el("label", { for: id, text: field.label + (field.required ? " (required)" : "") });
    const hint = field.description ? el("small", { class: "muted", text: field.description }) : "";
    if (field.kind === "boolean") {
      const box = el("input", { type: "checkbox", id, checked: field.default === true });
      body.append(el("label", { class: "inline" }, box, ` ${field.label}`), hint);
      return () => [field.name, box.checked];
    }
    if (field.kind === "choice" || field.kind === "choices") {
      const select = el("select", { id, multiple: field.kind === "choices", required: field.required });
      if (field.kind === "choice" && !field.required) select.append(el("option", { value: "", text: "(none)" }));
      const chosen = new Set([].concat(field.default ?? []));
      for (const choice of field.choices) {
        select.append(el("option", { value: choice.value, text: choice.label, selected: chosen.has(choice.value) }));
      }
      body.append(label, select, hint);
      return () => {
        const values = [...select.selectedOptions].map((option) => option.value).filter((value) => value !== "");
        if (field.kind === "choices") return values.length || field.required ? [field.name, values] : null;
        return values.length ? [field.name, values[0]] : null;
      };
    }
    const numeric = field.kind === "number" || field.kind === "integer";
    const type = numeric ? "number" : { email: "email", uri: "url", date: "date" }[field.format] || "text";
    const input = el("input", {
      type,
      id,
      required: field.required,
      min: field.minimum ?? null,
      max: field.maximum ?? null,
      step: field.kind === "integer" ? "1" : numeric ? "any" : null,
      minlength: field.min_length ?? null,
      maxlength: field.max_length ?? null,
      value: field.default ?? null,
    });
    body.append(label, input, hint);
    return () => {
      if (input.value === "") return null;
      return [field.name, numeric ? Number(input.value) : input.value];
    };
  }
}
