// The page's side of the bridge extension (extension/): the UI thread relays the agent
// worker's bridge requests (http-port.js) to the extension's content script and streams
// the answer back. It holds no policy: the extension decides what may be fetched.
//
// The messages are in protocol.js (EXTENSION_*). The extension answers only pages the user
// added in its options (allowed: false means it is paused); for any other page it stays
// silent, exactly as when it is not installed. Each server a page asks for is allowed or
// denied by the user in the extension's own window, while the request waits. A page that
// asked before the content script started asks again when it announces itself. When the page
// goes away, every request is aborted (the content script's connection to the extension
// closes with the page, which aborts too).
import { EXTENSION_CHANNEL, ExtensionMessage, extensionMessage } from "../protocol.js";

const HELLO_TIMEOUT_MS = 1_000;

export const NO_EXTENSION = {
  present: false,
  allowed: false,
  version: null,
  origin: location.origin,
};

export class ExtensionRelay {
  #presence = null; // last answer to hello, or NO_EXTENSION
  #detecting = null;
  #open = new Map(); // id -> MessagePort
  #listeners = new Set();

  constructor() {
    window.addEventListener("message", (event) => {
      if (event.source !== window || event.data?.channel !== EXTENSION_CHANNEL || event.data.type !== ExtensionMessage.READY) return;
      this.detect({ again: true });
    });
    window.addEventListener("pagehide", () => this.abortAll());
  }

  /** The last known presence: {present, allowed, version, origin}, or null before the first check. */
  get presence() {
    return this.#presence;
  }

  /** Calls `listener(presence)` whenever a check finishes. */
  onPresence(listener) {
    this.#listeners.add(listener);
    if (this.#presence) listener(this.#presence);
  }

  /** Asks the content script whether the extension is here and allows this page. */
  detect({ again = false } = {}) {
    if (this.#detecting && !again) return this.#detecting;
    if (this.#presence && !again) return Promise.resolve(this.#presence);
    const check = new Promise((resolve) => {
      const channel = new MessageChannel();
      const timer = setTimeout(() => {
        channel.port1.close();
        resolve(NO_EXTENSION);
      }, HELLO_TIMEOUT_MS);
      channel.port1.onmessage = (event) => {
        clearTimeout(timer);
        channel.port1.close();
        const { version = null, allowed = false } = event.data || {};
        resolve({ present: true, allowed: Boolean(allowed), version, origin: location.origin });
      };
      window.postMessage(extensionMessage.hello(), location.origin, [channel.port2]);
    }).then((presence) => {
      this.#presence = presence;
      if (this.#detecting === check) this.#detecting = null;
      for (const listener of this.#listeners) listener(presence);
      return presence;
    });
    this.#detecting = check;
    return check;
  }

  /**
   * Sends one request through the extension. `on` receives head(status, headers),
   * chunk(base64), end() and error({kind, message}); exactly one of end and error comes last.
   */
  async start(id, request, on) {
    const presence = await this.detect();
    if (!presence.present) {
      on.error({ kind: "no-bridge", message: "The agent_py bridge extension is not installed or not enabled in this browser." });
      return;
    }
    const channel = new MessageChannel();
    const port = channel.port1;
    this.#open.set(id, port);
    const finish = () => {
      this.#open.delete(id);
      port.close();
    };
    port.onmessage = (event) => {
      const message = event.data || {};
      if (message.type === ExtensionMessage.HEAD) on.head(message.status, message.headers || {});
      else if (message.type === ExtensionMessage.CHUNK) on.chunk(message.chunk);
      else if (message.type === ExtensionMessage.END) {
        finish();
        on.end();
      } else if (message.type === ExtensionMessage.ERROR) {
        finish();
        on.error(message.error || { kind: "network", message: "The bridge failed." });
      }
    };
    window.postMessage(extensionMessage.fetch(request), location.origin, [channel.port2]);
  }

  /** Aborts one request (the worker stopped reading, or its task was cancelled). */
  abort(id) {
    const port = this.#open.get(id);
    if (!port) return;
    this.#open.delete(id);
    port.postMessage(extensionMessage.abort());
    port.close();
  }

  abortAll() {
    for (const id of [...this.#open.keys()]) this.abort(id);
  }
}
