// The page side of the JavaScript sandbox used by the agent's `javascript_execute` tool.
//
//   const sandbox = new JavaScriptSandbox();
//   const {value, console, error, timedOut, truncated} = await sandbox.run("return 1 + 1");
//
// The code runs in a fresh Worker inside a hidden <iframe sandbox="allow-scripts"> (see
// sandbox.html): opaque origin, strict CSP, hard timeout. This module only creates the frame,
// matches answers to requests, and replaces the frame if it ever stops answering.

import { SandboxMessage, sandboxRun } from "../protocol.js";

const FRAME_URL = new URL("../sandbox.html", import.meta.url);
const READY_TIMEOUT_MS = 10_000;
// Slack beyond the run's own timeout before we decide the frame itself is gone: the frame needs
// a few ms to spawn the worker and, in a background tab, its kill timer may fire up to ~1 s late.
const FRAME_MARGIN_MS = 3_000;

export class JavaScriptSandbox {
  #frame = new SandboxFrame({ url: FRAME_URL, title: "JavaScript sandbox" });

  /** The current frame, for diagnostics and tests. */
  get iframe() {
    return this.#frame.iframe;
  }

  /** Resolves once the frame can take runs; rejects if it did not load in time. */
  ready() {
    return this.#frame.ready();
  }

  /**
   * Run `code` as the body of an async function (`return` gives the value; `await` works).
   * Rejects only for invalid options; otherwise resolves, whatever the code does, with:
   *   value     the returned value after a JSON round trip (null for undefined); when its JSON
   *             is longer than outputLimit, the first outputLimit chars of that JSON, as a string
   *   console   lines written with console.log/info/debug (warn and error get a [warn]/[error]
   *             prefix), outputLimit chars in total at most
   *   error     "TypeError: ..." when the code threw, a message on timeout, else null
   *   timedOut  true when the run was stopped after timeoutMs
   *   truncated true when the value, the console or the error was cut to outputLimit
   */
  async run(code, { timeoutMs = 10_000, outputLimit = 20_000 } = {}) {
    for (const [name, limit] of Object.entries({ timeoutMs, outputLimit })) {
      if (!Number.isSafeInteger(limit) || limit < 0) {
        throw new TypeError(`${name} must be a whole number >= 0, got ${limit}`);
      }
    }
    try {
      await this.#frame.ready();
    } catch (error) {
      this.#frame.reloadIfFailed(); // the next run tries again
      return failure(error.message);
    }
    const message = await this.#frame.ask(
      (id) => sandboxRun(id, String(code), timeoutMs, outputLimit),
      timeoutMs + FRAME_MARGIN_MS,
      { ...failure(`Timed out after ${timeoutMs} ms: the sandbox stopped answering; restarted.`), timedOut: true },
    );
    return {
      value: message.value ?? null,
      console: Array.isArray(message.console) ? message.console.map(String) : [],
      error: message.error == null ? null : String(message.error),
      timedOut: message.timedOut === true,
      truncated: message.truncated === true,
    };
  }

  /** Remove the frame; pending runs resolve with an error. */
  close() {
    this.#frame.close();
  }
}

/**
 * A hidden <iframe sandbox="allow-scripts"> whose document (`url`, fetched and set as srcdoc)
 * answers requests by id: the JavaScript sandbox's and the Python sandbox's frame. It says
 * SandboxMessage.READY once loaded (then `onReady(this)` runs, again after each restart) and
 * answers each request with a SandboxMessage.RESULT carrying the request's id.
 */
export class SandboxFrame {
  #url;
  #title;
  #onReady;
  #container;
  #iframe = null;
  #ready = null;
  #markReady = null;
  #loadFailed = false; // the current frame did not load: replaced at reloadIfFailed()
  #pending = new Map(); // id -> {resolve, timer}
  #nextId = 1;

  constructor({ url, title, onReady = () => {}, container = document.body }) {
    this.#url = url;
    this.#title = title;
    this.#onReady = onReady;
    this.#container = container;
    window.addEventListener("message", this.#onMessage);
    this.#createFrame();
  }

  get iframe() {
    return this.#iframe;
  }

  ready() {
    return this.#ready;
  }

  /** Makes the frame again when it did not load (its document could not be fetched, or it
   * never said it was ready), so a later run does not meet the same failure forever. */
  reloadIfFailed() {
    if (!this.#loadFailed || !this.#iframe) return;
    this.#restart();
  }

  /** Posts `make(id)` and resolves with the frame's answer; with `timeoutAnswer` when none
   * came within `waitMs` (the frame is then replaced), or an error when it is closed. */
  ask(make, waitMs, timeoutAnswer) {
    if (!this.#iframe) return Promise.resolve({ error: "The sandbox was closed." });
    const id = this.#nextId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        resolve(timeoutAnswer);
        this.#restart();
      }, waitMs);
      this.#pending.set(id, { resolve, timer });
      this.post(make(id));
    });
  }

  /** Posts to the frame (an opaque origin cannot be named: "*"). */
  post(message) {
    this.#iframe?.contentWindow?.postMessage(message, "*");
  }

  close() {
    window.removeEventListener("message", this.#onMessage);
    this.#dropFrame("The sandbox was closed.");
  }

  // The frame's origin is "null", so the only trustworthy check is which window sent it.
  #onMessage = (event) => {
    if (!this.#iframe || event.source !== this.#iframe.contentWindow) return;
    const message = event.data ?? {};
    if (message.type === SandboxMessage.READY) {
      this.#markReady?.();
      return;
    }
    const pending = message.type === SandboxMessage.RESULT && this.#pending.get(message.id);
    if (!pending) return;
    this.#pending.delete(message.id);
    clearTimeout(pending.timer);
    pending.resolve(message);
  };

  #createFrame() {
    const iframe = document.createElement("iframe");
    // allow-scripts only: no allow-same-origin (opaque origin), no popups, forms, top navigation.
    iframe.sandbox = "allow-scripts";
    iframe.title = this.#title;
    iframe.hidden = true;
    iframe.setAttribute("aria-hidden", "true");
    iframe.tabIndex = -1;
    this.#iframe = iframe;
    this.#loadFailed = false;
    let fail;
    this.#ready = new Promise((resolve, reject) => {
      const timer = setTimeout(() => fail(
        `did not load in ${READY_TIMEOUT_MS} ms. If this page is served with ` +
        `Cross-Origin-Embedder-Policy, serve ${this.#url.pathname} with it too.`,
      ), READY_TIMEOUT_MS);
      fail = (why) => {
        clearTimeout(timer);
        if (this.#iframe === iframe) {
          this.#markReady = null;
          this.#loadFailed = true;
        }
        reject(new Error(`The ${this.#title} (${this.#url.pathname}) ${why}`));
      };
      this.#markReady = () => {
        clearTimeout(timer);
        this.#markReady = null;
        this.#onReady(this);
        resolve();
      };
    });
    this.#ready.catch(() => {}); // reported by run(); not an unhandled rejection meanwhile
    // The frame's document comes as srcdoc, fetched by us: a service worker cannot answer a
    // sandboxed iframe's own navigation (w3c/ServiceWorker#1727), but it does answer this fetch,
    // so the sandbox works offline. srcdoc keeps the sandbox flags, the opaque origin and the
    // document's CSP, and inherits the page's COEP.
    fetch(this.#url)
      .then((response) => {
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        return response.text();
      })
      .then((html) => {
        if (this.#iframe !== iframe) return; // closed or restarted meanwhile
        iframe.srcdoc = html;
        this.#container.append(iframe); // after the listener exists, so "ready" cannot be missed
      })
      .catch((error) => fail(`could not be loaded: ${error.message}.`));
  }

  // Removing the frame destroys its document, which terminates every worker it started.
  #dropFrame(reason) {
    this.#iframe?.remove();
    this.#iframe = null;
    for (const { resolve, timer } of this.#pending.values()) {
      clearTimeout(timer);
      resolve({ error: reason });
    }
    this.#pending.clear();
  }

  #restart() {
    this.#dropFrame("The sandbox was restarted while this run was in progress.");
    this.#createFrame();
  }
}

function failure(error) {
  return { value: null, console: [], error, timedOut: false, truncated: false };
}
