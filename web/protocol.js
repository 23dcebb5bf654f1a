// Every message between the page's parts, in one place: type names, and one constructor per
// message, so a field is named once. Field names are Python's (snake_case) wherever Python
// reads or writes the same data (agent_py/page/ports.py, agent_py/page/http.py).
//
//   UI thread (app.js, tool-host.js)  <->  agent worker (worker.js, http-port.js,
//                                          user-port.js): ToWorker / ToUI below
//   UI thread (extension-relay.js)    <->  bridge extension's content script: the
//                                          EXTENSION_* part, mirrored in extension/protocol.js
//                                          (tests/web/test_protocol.py checks they agree)
//
// A handler switches on `message.type` against these constants and reads the fields the
// constructor of that type writes.

// --- UI thread -> agent worker -------------------------------------------------------------------
export const ToWorker = Object.freeze({
  BOOT: "boot", // {settings: the user's settings (what differs from the defaults), engine: a ?engine= override or null}
  CONFIGURE: "configure", // {settings}: from the next run
  RUN: "run", // {question}
  SESSION: "session", // {events}: go on with that recorded session from the next run ([]: a new one)
  STOP: "stop", // cancel the run and interrupt the generation
  SCRIPT: "script", // {replies}: the scripted test engine only
  SANDBOX_RESULT: "sandbox-result", // {id, result: {value, console, error, timed_out, truncated}}
  PYTHON_RESULT: "python-result", // {id, result: {json, error, timed_out}}
  PAGE_TEXT: "page-text", // {id, result: {ok, title, text} | {ok: false, error}}: a page's readable text
  ENGINE_COUNTS: "engine-counts", // reloads/unloads so far (answered with ToUI.ENGINE_COUNTS)
  MODELS: "models", // the WebLLM models, prebuilt and cached (answered with ToUI.MODELS)
  DELETE_MODEL: "delete-model", // {id}
  MCP_SERVERS: "mcp-servers", // {servers}: the servers panel's list (MCPServerConfig JSON)
  MCP_RECONNECT: "mcp-reconnect", // {name}
  MCP_AUTH_RECORDS: "mcp-auth-records", // {records}: kept OAuth tokens, {server url: record}
  MCP_FORGET: "mcp-forget", // {name}: forget a server's sign-in
  MCP_AUTHORIZED: "mcp-authorized", // {id, url} | {id, error}: the sign-in popup's answer
  MCP_ELICITED: "mcp-elicited", // {id, answer: {action, content?}}: the form's answer
  PLAN_REVIEWED: "plan-reviewed", // {id, answer: {action, plan?, auto?}}: the user's review
  BRIDGE_HEAD: "bridge-head", // {id, status, headers}: the extension's answer, in order:
  BRIDGE_CHUNK: "bridge-chunk", // {id, chunk}: body bytes, base64
  BRIDGE_END: "bridge-end", // {id}
  BRIDGE_ERROR: "bridge-error", // {id, error: {kind, message}}
});

export const toWorker = Object.freeze({
  boot: (settings, engine) => ({ type: ToWorker.BOOT, settings, engine }),
  configure: (settings) => ({ type: ToWorker.CONFIGURE, settings }),
  run: (question) => ({ type: ToWorker.RUN, question }),
  session: (events) => ({ type: ToWorker.SESSION, events }),
  stop: () => ({ type: ToWorker.STOP }),
  script: (replies) => ({ type: ToWorker.SCRIPT, replies }),
  /** `result` is JavaScriptSandbox.run's (JavaScript names); Python reads snake_case. */
  sandboxResult: (id, { value, console, error, timedOut, truncated }) => ({
    type: ToWorker.SANDBOX_RESULT,
    id,
    result: { value, console, error, timed_out: timedOut, truncated },
  }),
  /** `result` is PythonSandbox.run's (JavaScript names); Python reads snake_case. */
  pythonResult: (id, { json, error, timedOut }) => ({ type: ToWorker.PYTHON_RESULT, id, result: { json, error, timed_out: timedOut } }),
  pageText: (id, result) => ({ type: ToWorker.PAGE_TEXT, id, result }),
  engineCounts: () => ({ type: ToWorker.ENGINE_COUNTS }),
  models: () => ({ type: ToWorker.MODELS }),
  deleteModel: (id) => ({ type: ToWorker.DELETE_MODEL, id }),
  mcpServers: (servers) => ({ type: ToWorker.MCP_SERVERS, servers }),
  mcpReconnect: (name) => ({ type: ToWorker.MCP_RECONNECT, name }),
  mcpAuthRecords: (records) => ({ type: ToWorker.MCP_AUTH_RECORDS, records }),
  mcpForget: (name) => ({ type: ToWorker.MCP_FORGET, name }),
  /** `answer`: {url} when the callback page landed, {error} when the user gave up. */
  mcpAuthorized: (id, answer) => ({ type: ToWorker.MCP_AUTHORIZED, id, url: answer.url, error: answer.error }),
  mcpElicited: (id, answer) => ({ type: ToWorker.MCP_ELICITED, id, answer }),
  planReviewed: (id, answer) => ({ type: ToWorker.PLAN_REVIEWED, id, answer }),
  bridgeHead: (id, status, headers) => ({ type: ToWorker.BRIDGE_HEAD, id, status, headers }),
  bridgeChunk: (id, chunk) => ({ type: ToWorker.BRIDGE_CHUNK, id, chunk }),
  bridgeEnd: (id) => ({ type: ToWorker.BRIDGE_END, id }),
  bridgeError: (id, error) => ({ type: ToWorker.BRIDGE_ERROR, id, error }),
});

// --- agent worker -> UI thread -------------------------------------------------------------------
export const ToUI = Object.freeze({
  PROGRESS: "progress", // {what: "pyodide" | "packages" | "model" | "prefill", progress: 0..1, text}
  READY: "ready", // {engine: {name, label, usable, reason, context_window, threads?}, gpu, timings, settings}
  // (threads: the CPU engine's {used, automatic, most, cores, isolated}, engines/cpu-threads.js)
  SETTINGS: "settings", // {settings}: in effect after a configure
  WARMED: "warmed", // {ms}: after "ready", what the first task imports is in
  PREPARED: "prepared", // {report: {prefilled, prompt_tokens, ms, skipped?, error?, state?,
  // restored_tokens?, state_source?, warning?, server_models?}}: the model is loaded and the
  // planner's fixed prompt is in its KV cache (restored from the browser's storage when
  // restored_tokens > 0; state_source "shipped": from the state set-up ships with the page),
  // or why not ("prefill" progress before); server_models: what a model server lists
  EVENTS: "events", // {events}: agent events in order (JSONL history records), a batch per
  // turn of the worker's loop (one message each cost more than the orchestration of a step)
  TOKEN: "token", // {purpose, step, text}: streamed model output
  ENGINE_NOTE: "engine-note", // {purpose, step, text}: the engine's remark on a call
  WAITING: "waiting", // {what}: what the engine waits for ("the model server at … to answer …"),
  // shown with its time in the model bar once it lasts; null: the wait is over
  RUN_FINISHED: "run-finished", // {result, counts, overhead}
  SANDBOX_RUN: "sandbox-run", // {id, code, timeoutMs, outputLimit}: answer with SANDBOX_RESULT
  PYTHON_RUN: "python-run", // {id, program, timeoutMs}: answer with PYTHON_RESULT
  PYTHON_RESET: "python-reset", // the agent's run is over: its Python sandbox ends
  READ_PAGE: "read-page", // {id, html, url}: a fetched page's readable text (answer with PAGE_TEXT)
  ENGINE_COUNTS: "engine-counts", // {counts}
  MODELS: "models", // {prebuilt, cached}
  MCP_STATUS: "mcp-status", // {status}: one MCP server's state (agent_py/page/session.py)
  MCP_AUTHORIZE: "mcp-authorize", // {id, server, url}: sign in (answer with MCP_AUTHORIZED)
  MCP_AUTH_SAVE: "mcp-auth-save", // {url, record | null}: keep or drop a server's tokens
  MCP_ELICIT: "mcp-elicit", // {id, form}: ask the user (answer with MCP_ELICITED)
  PLAN_REVIEW: "plan-review", // {id, request: {plan, question, problem, policy, tools}} (answer with PLAN_REVIEWED)
  BRIDGE_REQUEST: "bridge-request", // {id, request: {method, url, headers, body, timeout_ms}}
  BRIDGE_ABORT: "bridge-abort", // {id}
  ERROR: "error", // {message}
});

/**
 * A run's result: the core's RunResult (agent_py/core/agent.py) as its model_dump_json writes
 * it; the page passes it on as it is (window.agentApp.run settles with it).
 * @typedef {object} RunResult
 * @property {string} answer
 * @property {"completed" | "failed" | "cancelled"} state
 * @property {string | null} error
 * @property {"task" | "engine" | "internal" | null} failure  why a failed run failed
 * @property {object | null} plan  the latest plan
 * @property {object[]} steps
 * @property {object} stats
 */

export const toUI = Object.freeze({
  progress: (what, progress, text) => ({ type: ToUI.PROGRESS, what, progress, text }),
  ready: ({ engine, gpu, timings, settings }) => ({ type: ToUI.READY, engine, gpu, timings, settings }),
  settings: (settings) => ({ type: ToUI.SETTINGS, settings }),
  warmed: (ms) => ({ type: ToUI.WARMED, ms }),
  prepared: (report) => ({ type: ToUI.PREPARED, report }),
  events: (events) => ({ type: ToUI.EVENTS, events }),
  token: (purpose, step, text) => ({ type: ToUI.TOKEN, purpose, step, text }),
  engineNote: (purpose, step, text) => ({ type: ToUI.ENGINE_NOTE, purpose, step, text }),
  waiting: (what) => ({ type: ToUI.WAITING, what }),
  // result: a RunResult (below), or null when the page could not run the task.
  // overhead (a finished run only): {step_ms: the orchestration time per step, outside the
  // engine, one sample per step; drains: runs of the event loop's ready queue, or null}.
  runFinished: (result, counts, overhead = null) => ({
    type: ToUI.RUN_FINISHED,
    result,
    counts,
    overhead,
  }),
  sandboxRun: (id, code, timeoutMs, outputLimit) => ({
    type: ToUI.SANDBOX_RUN,
    id,
    code,
    timeoutMs,
    outputLimit,
  }),
  pythonRun: (id, program, timeoutMs) => ({ type: ToUI.PYTHON_RUN, id, program, timeoutMs }),
  pythonReset: () => ({ type: ToUI.PYTHON_RESET }),
  readPage: (id, html, url) => ({ type: ToUI.READ_PAGE, id, html, url }),
  engineCounts: (counts) => ({ type: ToUI.ENGINE_COUNTS, counts }),
  models: (prebuilt, cached) => ({ type: ToUI.MODELS, prebuilt, cached }),
  mcpStatus: (status) => ({ type: ToUI.MCP_STATUS, status }),
  mcpAuthorize: (id, server, url) => ({ type: ToUI.MCP_AUTHORIZE, id, server, url }),
  mcpAuthSave: (url, record) => ({ type: ToUI.MCP_AUTH_SAVE, url, record }),
  mcpElicit: (id, form) => ({ type: ToUI.MCP_ELICIT, id, form }),
  planReview: (id, request) => ({ type: ToUI.PLAN_REVIEW, id, request }),
  /** `request` is Python's BridgeRequest less `id` and `mode` (agent_py/page/http.py). */
  bridgeRequest: (id, { method, url, headers, body, timeout_ms }) => ({
    type: ToUI.BRIDGE_REQUEST,
    id,
    request: { method, url, headers, body: body ?? null, timeout_ms: timeout_ms ?? null },
  }),
  bridgeAbort: (id) => ({ type: ToUI.BRIDGE_ABORT, id }),
  error: (message) => ({ type: ToUI.ERROR, message }),
});

// --- UI thread <-> the JavaScript sandbox frame (sandbox-host.js <-> sandbox.html) ------------------
// sandbox.html runs at an opaque origin under a CSP that admits only its own inline script, so
// it cannot import this module: it writes the same names, and tests/web/test_protocol.py
// checks that it does.
export const SandboxMessage = Object.freeze({
  RUN: "run", // page -> frame {id, code, timeoutMs, outputLimit}
  READY: "ready", // frame -> page, once: it can take runs
  RESULT: "result", // frame -> page {id, value, console, error, timedOut, truncated}
});
export const sandboxRun = (id, code, timeoutMs, outputLimit) => ({ type: SandboxMessage.RUN, id, code, timeoutMs, outputLimit });

// --- UI thread <-> the Python sandbox frame (python-sandbox-host.js <-> python-sandbox.html) --------
// The same frame protocol (READY, RESULT by id), with the same constraint: the frame writes these
// names itself.
export const PythonSandboxMessage = Object.freeze({
  FILES: "files", // page -> frame {files: {name: ArrayBuffer}}: Pyodide's files
  RUN: "run", // page -> frame {id, program, timeoutMs}
  RESET: "reset", // page -> frame: end the Pyodide worker
  READY: "ready", // frame -> page, once
  RESULT: "result", // frame -> page {id, json, error, timedOut}
});
export const pythonSandboxRun = (id, program, timeoutMs) => ({ type: PythonSandboxMessage.RUN, id, program, timeoutMs });

// --- the offline copy's service worker (sw.js) <-> pages (sw-register.js) ------------------------
// sw.js is a classic script (a module service worker is not everywhere yet): it writes the same
// names, and tests/web/test_protocol.py checks that it does.
export const ServiceWorkerMessage = Object.freeze({
  PROGRESS: "sw-progress", // {cache, done, total, bytes, totalBytes, file}: while precaching
  INSTALLED: "sw-installed", // {cache, files, bytes, reused, skipped, ms}: precache finished
  ERROR: "sw-error", // {cache, message}: the install failed
  CACHE_EXTRA: "sw-cache-extra", // page -> sw {urls}; reply on the port: {ok, cached} | {ok: false, error}
});
export const cacheExtra = (urls) => ({ type: ServiceWorkerMessage.CACHE_EXTRA, urls });

// --- OAuth callback page -> the page that opened the sign-in popup ---------------------------------
// A BroadcastChannel of this origin: the opener link does not survive the cross-origin
// navigation when the page is cross-origin isolated.
export const OAUTH_CHANNEL = "agent_py.oauth";
export const OAUTH_CALLBACK = "oauth-callback"; // {url}: where the authorization server sent the popup
export const oauthCallback = (url) => ({ type: OAUTH_CALLBACK, url });

// --- page <-> bridge extension (mirrored in extension/protocol.js) -------------------------------
// The page posts to its own window, on EXTENSION_CHANNEL, with a MessagePort for the answer;
// the content script answers on that port (so nothing is broadcast to other frames):
//   page -> window  hello                  port <- helloReply {version, allowed, origin}
//   page -> window  fetch {request}        port <- head {status, headers, url}, chunk {chunk}
//                                                  (base64, in order), then end | error {error}
//   page -> port    abort                  the extension aborts the fetch
//   content script -> window  ready        it started: a page that asked too early asks again
// A page the extension does not serve gets no answer at all, as without the extension.
export const EXTENSION_CHANNEL = "agent_py-bridge";

export const ExtensionMessage = Object.freeze({
  HELLO: "hello",
  READY: "ready",
  FETCH: "fetch",
  ABORT: "abort",
  HEAD: "head",
  CHUNK: "chunk",
  END: "end",
  ERROR: "error",
});

export const extensionMessage = Object.freeze({
  hello: () => ({ channel: EXTENSION_CHANNEL, type: ExtensionMessage.HELLO }),
  ready: () => ({ channel: EXTENSION_CHANNEL, type: ExtensionMessage.READY }),
  fetch: (request) => ({ channel: EXTENSION_CHANNEL, type: ExtensionMessage.FETCH, request }),
  abort: () => ({ type: ExtensionMessage.ABORT }),
  helloReply: (version, allowed, origin) => ({ type: ExtensionMessage.HELLO, version, allowed, origin }),
  head: (status, headers, url) => ({ type: ExtensionMessage.HEAD, status, headers, url }),
  chunk: (chunk) => ({ type: ExtensionMessage.CHUNK, chunk }),
  end: () => ({ type: ExtensionMessage.END }),
  error: (error) => ({ type: ExtensionMessage.ERROR, error }),
});

// Request and response bodies cross every JSON-only channel above as base64.
// The one envelope of every reply Python reads from a port (agent_py/page/ports.py, Reply):
// {ok: true, ...fields} or {ok: false, error: {kind, message}}, as a JSON string.
export const bridgeOk = (fields = {}) => JSON.stringify({ ok: true, ...fields });
export const bridgeFailed = (kind, message) => JSON.stringify({ ok: false, error: { kind, message } });

export function toBase64(bytes) {
  if (typeof bytes.toBase64 === "function") return bytes.toBase64();
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(text);
}

export function fromBase64(text) {
  if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(text);
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}
