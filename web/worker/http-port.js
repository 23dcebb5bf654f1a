// HTTP for the MCP client (agent_py.page.http), in the agent worker.
//
// The worker registers `api` as the Pyodide module "agent_http": start(requestJson),
// read(id) and abort(id) take and return JSON strings and never reject. The JSON is typed on
// the Python side (BridgeRequest, StartReply, ReadReply in agent_py/page/http.py,
// with the error kinds); this file reads and writes the same names.
//
// mode "fetch": this worker's own fetch (AbortController, streamed reader). It works only
// for servers that send CORS headers; the page is cross-origin isolated, which CORS-mode
// requests satisfy.
// mode "bridge": the companion extension, reached through the UI thread (tool-host.js): a
// bridge-request goes out, bridge-head, bridge-chunk (in order), then bridge-end or
// bridge-error come back (protocol.js). The extension streams the body as it arrives; chunks
// wait here until Python reads them.
import { ToWorker, bridgeFailed, bridgeOk, fromBase64, toBase64, toUI } from "../protocol.js";

const BRIDGE_GRACE_MS = 5_000; // beyond the request's own limit, in case the UI thread is gone
const BRIDGE_ANSWERS = new Set([ToWorker.BRIDGE_HEAD, ToWorker.BRIDGE_CHUNK, ToWorker.BRIDGE_END, ToWorker.BRIDGE_ERROR]);


function originOf(url) {
  try {
    return new URL(url).origin;
  } catch {
    return url;
  }
}

/**
 * The "agent_http" object and the handler for the UI thread's bridge messages.
 * `post` sends a message to the UI thread.
 */
export function createHttpPort(post) {
  const requests = new Map(); // id -> FetchRequest | BridgeRequest

  async function startFetch(id, request) {
    const controller = new AbortController();
    const state = { kind: "fetch", controller, reader: null, aborted: false, timedOut: false };
    requests.set(id, state);
    const timer = request.timeout_ms
      ? setTimeout(() => {
          state.timedOut = true;
          controller.abort();
        }, request.timeout_ms)
      : null;
    let response;
    try {
      response = await fetch(request.url, {
        method: request.method,
        headers: request.headers,
        body: request.body == null ? undefined : fromBase64(request.body),
        signal: controller.signal,
        mode: "cors",
        credentials: "omit",
        cache: "no-store",
        referrerPolicy: "no-referrer",
      });
    } catch (error) {
      requests.delete(id);
      if (state.timedOut) return bridgeFailed("timeout", `${originOf(request.url)} did not answer in time.`);
      if (state.aborted) return bridgeFailed("network", "The request was aborted.");
      // fetch reports a CORS block, a refused connection and a DNS failure alike.
      if (error?.name === "TypeError") {
        return bridgeFailed("blocked", `The browser blocked the request to ${originOf(request.url)} or could not connect.`);
      }
      return bridgeFailed("network", String(error?.message || error));
    } finally {
      clearTimeout(timer);
    }
    if (state.aborted) {
      requests.delete(id);
      response.body?.cancel().catch(() => {});
      return bridgeFailed("network", "The request was aborted.");
    }
    state.reader = response.body ? response.body.getReader() : null;
    // url: where the answer came from, after any redirects fetch followed.
    return bridgeOk({ id, status: response.status, headers: Object.fromEntries(response.headers), url: response.url });
  }

  async function readFetch(id, state) {
    if (!state.reader) {
      requests.delete(id);
      return bridgeOk({ done: true });
    }
    try {
      const { done, value } = await state.reader.read();
      if (done) {
        requests.delete(id);
        return bridgeOk({ done: true });
      }
      return bridgeOk({ chunk: toBase64(value) });
    } catch (error) {
      requests.delete(id);
      return bridgeFailed("network", String(error?.message || error));
    }
  }

  function startBridge(id, request) {
    return new Promise((resolve) => {
      const state = {
        kind: "bridge",
        chunks: [],
        done: false,
        error: null,
        waiter: null, // resolve of a pending read
        head: resolve, // resolve of start, until the head or an error arrives
        timer: null,
      };
      requests.set(id, state);
      if (request.timeout_ms) {
        state.timer = setTimeout(() => {
          if (!state.head) return;
          abort(id);
          // The extension answers a server's silence itself, at the request's limit: past
          // it and the grace, the extension is what went silent.
          const seconds = (request.timeout_ms + BRIDGE_GRACE_MS) / 1000;
          resolve(bridgeFailed("bridge-silent", `the agent_py bridge extension sent no answer within ${seconds} s (it was disabled, reloaded or updated while the page was open?). Reload this page; if that does not help, reload the extension.`));
        }, request.timeout_ms + BRIDGE_GRACE_MS);
      }
      post(toUI.bridgeRequest(id, request));
    });
  }

  function settleRead(id, state) {
    if (!state.waiter) return;
    const resolve = state.waiter;
    if (state.chunks.length) {
      state.waiter = null;
      resolve(bridgeOk({ chunk: state.chunks.shift() }));
    } else if (state.error) {
      state.waiter = null;
      requests.delete(id);
      resolve(bridgeFailed(state.error.kind, state.error.message));
    } else if (state.done) {
      state.waiter = null;
      requests.delete(id);
      resolve(bridgeOk({ done: true }));
    }
  }

  function abort(id) {
    const state = requests.get(id);
    if (!state) return;
    requests.delete(id);
    if (state.kind === "fetch") {
      state.aborted = true;
      state.controller.abort();
      state.reader?.cancel().catch(() => {});
      return;
    }
    clearTimeout(state.timer);
    post(toUI.bridgeAbort(id));
    state.head?.(bridgeFailed("network", "The request was aborted."));
    state.head = null;
    state.waiter?.(bridgeFailed("network", "The request was aborted."));
    state.waiter = null;
  }

  const api = {
    async start(requestJson) {
      let request;
      try {
        request = JSON.parse(requestJson);
      } catch (error) {
        return bridgeFailed("network", `unreadable request: ${error.message}`);
      }
      if (request.mode === "bridge") return startBridge(request.id, request);
      if (request.mode === "fetch") return startFetch(request.id, request);
      return bridgeFailed("network", `unknown mode ${request.mode}`);
    },
    async read(id) {
      const state = requests.get(id);
      if (!state) return bridgeFailed("network", "The request was aborted or has already ended.");
      if (state.kind === "fetch") return readFetch(id, state);
      return new Promise((resolve) => {
        state.waiter = resolve;
        settleRead(id, state);
      });
    },
    abort(id) {
      abort(id);
    },
  };

  /** Handles a bridge-* message from the UI thread; false for any other message. */
  function onMessage(message) {
    if (!BRIDGE_ANSWERS.has(message.type)) return false;
    const state = requests.get(message.id);
    if (!state || state.kind !== "bridge") return true; // aborted meanwhile: drop it
    switch (message.type) {
      case ToWorker.BRIDGE_HEAD:
        clearTimeout(state.timer);
        state.head?.(bridgeOk({ id: message.id, status: message.status, headers: message.headers || {} }));
        state.head = null;
        break;
      case ToWorker.BRIDGE_CHUNK:
        state.chunks.push(message.chunk);
        break;
      case ToWorker.BRIDGE_END:
        state.done = true;
        break;
      case ToWorker.BRIDGE_ERROR:
        clearTimeout(state.timer);
        if (state.head) {
          requests.delete(message.id);
          state.head(bridgeFailed(message.error?.kind || "network", message.error?.message || "The bridge failed."));
          state.head = null;
          return true;
        }
        state.error = message.error || { kind: "network", message: "The bridge failed." };
        break;
      default:
        return true;
    }
    settleRead(message.id, state);
    return true;
  }

  return { api, onMessage };
}
