// The bridge's service worker: performs HTTP requests for allowed pages, to approved servers.
//
// A content script (content-script.js) opens one port named "agent_py-fetch" per request:
//   content script -> here   {type: "fetch", request: {method, url, headers, body, timeoutMs}}
//                            {type: "ping"}            keeps this worker alive while waiting
//                            {type: "abort"}           the page stopped reading (then disconnects)
//   here -> content script   {type: "head", status, headers, url}
//                            {type: "chunk", data}     body bytes as base64, as they arrive
//                            {type: "end"}
//                            {type: "error", error: {kind, message}}
//                              kind: "refused" (a rule said no), "network", "timeout", "too-large"
// Disconnecting the port (the page went away, or it aborted) aborts the fetch.
//
// Every request is checked here, whatever the content script already checked: the page's
// origin (from the browser, not from the page) must be listed; the target, and every
// redirect hop, must be approved (see policy.js). Requests go out without cookies or other
// credentials, without a referrer, and with only the allowed headers. Each one is written to
// the activity log that the options page shows.
import { LIMITS, STORAGE_DEFAULTS, checkRequest, checkTarget, originPattern } from "./policy.js";

const PORT_NAME = "agent_py-fetch";
const REDIRECT_WAIT_MS = 2_000; // for webRequest to report a redirect fetch() already saw
const REDIRECT_KEEP_MS = 10_000; // a report nobody asked for (the request was aborted) expires
const HEADERS_TIMEOUT = "headers-timeout";
const PAGE_GONE = "the page went away";
const PAGE_STOPPED = "the page stopped reading";

let inFlight = 0;

chrome.runtime.onInstalled.addListener(async () => {
  const stored = await chrome.storage.local.get(Object.keys(STORAGE_DEFAULTS));
  const missing = Object.fromEntries(
    Object.entries(STORAGE_DEFAULTS).filter(([key]) => stored[key] === undefined),
  );
  if (Object.keys(missing).length) await chrome.storage.local.set(missing);
});

chrome.action.onClicked.addListener(() => chrome.runtime.openOptionsPage());

async function settings() {
  const stored = await chrome.storage.local.get(Object.keys(STORAGE_DEFAULTS));
  return { ...STORAGE_DEFAULTS, ...stored };
}

// --- the activity log (chrome.storage.session: in memory only, gone when the browser closes) --
let logWrites = Promise.resolve();

function logActivity(entry) {
  logWrites = logWrites
    .then(async () => {
      const { activity = [] } = await chrome.storage.session.get("activity");
      activity.unshift(entry);
      await chrome.storage.session.set({ activity: activity.slice(0, LIMITS.activityEntries) });
    })
    .catch((error) => console.warn("activity log:", error));
}

// Where a request went when it was not given: origin and path, never the query string (which
// may hold a key).
function shortTarget(url) {
  try {
    const parsed = new URL(url);
    return parsed.origin + parsed.pathname;
  } catch {
    return String(url).slice(0, 200);
  }
}

// --- redirects ------------------------------------------------------------------------------
// fetch(..., {redirect: "manual"}) in a service worker gives an opaque response: no status, no
// Location. The webRequest API does see the redirect (for hosts this extension may access),
// so the worker learns the next URL there, checks it like the first one, and only then asks
// for it. Nothing is ever sent to a host that is not approved.
const seenRedirects = new Map(); // "METHOD url" -> {location, status, at}
const redirectWaiters = new Map(); // "METHOD url" -> [resolve]

chrome.webRequest.onBeforeRedirect.addListener(
  (details) => {
    if (details.initiator !== self.location.origin) return;
    const key = `${details.method} ${details.url}`;
    const seen = { location: details.redirectUrl, status: details.statusCode, at: Date.now() };
    const waiters = redirectWaiters.get(key);
    if (waiters?.length) {
      redirectWaiters.delete(key);
      for (const resolve of waiters) resolve(seen);
    } else {
      for (const [old, value] of seenRedirects) if (seen.at - value.at > REDIRECT_KEEP_MS) seenRedirects.delete(old);
      seenRedirects.set(key, seen);
    }
  },
  { urls: ["http://*/*", "https://*/*"], tabId: -1 },
);

function redirectOf(method, url) {
  const key = `${method} ${url}`;
  const seen = seenRedirects.get(key);
  if (seen && Date.now() - seen.at < REDIRECT_KEEP_MS) {
    seenRedirects.delete(key);
    return Promise.resolve(seen);
  }
  return new Promise((resolve) => {
    const waiters = redirectWaiters.get(key) || [];
    waiters.push(resolve);
    redirectWaiters.set(key, waiters);
    setTimeout(() => resolve(null), REDIRECT_WAIT_MS);
  });
}

// --- base64, for bodies crossing the JSON-only extension message channel ------------------------
function toBase64(bytes) {
  if (typeof bytes.toBase64 === "function") return bytes.toBase64();
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(text);
}

function fromBase64(text) {
  if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(text);
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

class Refusal extends Error {
  constructor(message, kind = "refused") {
    super(message);
    this.kind = kind;
  }
}

// --- one request ----------------------------------------------------------------------------------
chrome.runtime.onConnect.addListener((port) => {
  if (port.name !== PORT_NAME) return;
  const pageOrigin = port.sender?.origin;
  let started = false;
  const abortByPage = { reason: PAGE_GONE };
  port.onMessage.addListener((message) => {
    if (message?.type === "abort") abortByPage.reason = PAGE_STOPPED;
    if (message?.type !== "fetch" || started) return; // pings only keep this worker awake
    started = true;
    relay(port, pageOrigin, message.request, abortByPage);
  });
});

async function relay(port, pageOrigin, request, abortByPage) {
  const entry = {
    time: new Date().toISOString(),
    page: pageOrigin || "(unknown)",
    method: String(request?.method || "?").toUpperCase(),
    target: shortTarget(request?.url),
    result: "",
  };
  let connected = true;
  const send = (message) => {
    if (connected) port.postMessage(message);
  };
  const controller = new AbortController();
  let abortReason = null;
  const abort = (reason) => {
    abortReason ??= reason;
    controller.abort();
  };
  port.onDisconnect.addListener(() => {
    connected = false;
    abort(abortByPage.reason);
  });
  const deadline = setTimeout(() => abort("time limit"), LIMITS.maxDurationMs);
  let status = null; // once the headers are in
  inFlight += 1;
  try {
    const { pageOrigins, approvedTargets } = await settings();
    if (!port.sender?.tab || port.sender.frameId !== 0) throw new Refusal("Only a page's top frame may use the bridge.");
    if (!pageOrigins.includes(pageOrigin)) {
      throw new Refusal(
        `This page (${pageOrigin}) is not allowed to use the agent_py bridge. Add it under "Pages" in the extension's options if it is yours.`,
      );
    }
    if (inFlight > LIMITS.maxInFlight) throw new Refusal(`More than ${LIMITS.maxInFlight} requests at once; try again.`);
    const checked = checkRequest(request);
    if (!checked.ok) throw new Refusal(checked.reason);
    const response = await fetchHopByHop(request.url, checked, approvedTargets, controller.signal, abort, () => abortReason);
    entry.target = shortTarget(response.url);
    status = response.status;
    send({ type: "head", status, headers: Object.fromEntries(response.headers), url: response.url });
    await streamBody(response, send, () => abortReason);
    send({ type: "end" });
    entry.result = `HTTP ${response.status}`;
  } catch (error) {
    const failure = describeFailure(error, abortReason, request);
    entry.result = `${failure.kind === "refused" ? "refused" : failure.kind}: ${failure.message}`;
    if (abortReason === PAGE_GONE || abortReason === PAGE_STOPPED) {
      // An SSE answer is often left early on purpose: the page had what it waited for.
      entry.result = status === null ? `aborted: ${abortReason}` : `HTTP ${status}, then ${abortReason}`;
    }
    send({ type: "error", error: failure });
  } finally {
    inFlight -= 1;
    clearTimeout(deadline);
    logActivity(entry);
    if (connected) port.disconnect();
  }
}

async function fetchHopByHop(firstUrl, checked, approvedTargets, signal, abort, abortReason) {
  let url = firstUrl;
  let { method, body } = checked;
  const headers = { ...checked.headers };
  for (let hop = 0; hop <= LIMITS.maxRedirects; hop++) {
    const target = checkTarget(url, approvedTargets);
    if (!target.ok) {
      throw new Refusal(hop === 0 ? target.reason : `The server redirected to ${shortTarget(url)}: refused. ${target.reason}`);
    }
    if (!(await chrome.permissions.contains({ origins: [originPattern(target.origin)] }))) {
      throw new Refusal(`The browser no longer lets the bridge reach ${target.origin}. Approve it again in the extension's options.`);
    }
    const timer = setTimeout(() => abort(HEADERS_TIMEOUT), checked.headersTimeoutMs);
    let response;
    try {
      response = await fetch(url, {
        method,
        headers,
        body: body === null ? undefined : fromBase64(body),
        signal,
        credentials: "omit",
        cache: "no-store",
        redirect: "manual",
        referrerPolicy: "no-referrer",
      });
    } finally {
      clearTimeout(timer);
    }
    if (response.type !== "opaqueredirect") return response;
    const seen = await redirectOf(method, url);
    if (abortReason()) throw new DOMException("aborted", "AbortError");
    if (!seen?.location) {
      throw new Refusal(`${shortTarget(url)} answered with a redirect whose target the bridge could not see; refused. Use the final URL in the page's settings.`);
    }
    const next = new URL(seen.location, url);
    // The same rewriting browsers do: 303, and 301/302 after a POST, become a GET without a
    // body; credentials do not follow a request to another origin.
    if (seen.status === 303 || ((seen.status === 301 || seen.status === 302) && method === "POST")) {
      method = "GET";
      body = null;
      for (const name of Object.keys(headers)) if (name.toLowerCase() === "content-type") delete headers[name];
    }
    if (next.origin !== new URL(url).origin) {
      for (const name of Object.keys(headers)) if (name.toLowerCase() === "authorization") delete headers[name];
    }
    url = next.href;
  }
  throw new Refusal(`More than ${LIMITS.maxRedirects} redirects; refused.`);
}

async function streamBody(response, send, abortReason) {
  if (!response.body) return;
  const reader = response.body.getReader();
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      total += value.length;
      if (total > LIMITS.responseBytes) {
        throw new Refusal(`The answer is larger than ${LIMITS.responseBytes / 1024 / 1024} MB; it was cut off.`, "too-large");
      }
      send({ type: "chunk", data: toBase64(value) });
    }
  } catch (error) {
    if (abortReason() || error instanceof Refusal) throw error;
    throw new Refusal(`The connection broke while the answer was arriving (${error.message || error}).`, "network");
  } finally {
    reader.cancel().catch(() => {});
  }
}

function describeFailure(error, abortReason, request) {
  if (error instanceof Refusal) return { kind: error.kind, message: error.message };
  let origin = "the server";
  try {
    origin = new URL(request.url).origin;
  } catch {
    /* the URL was checked before any fetch; keep the generic word */
  }
  if (abortReason === HEADERS_TIMEOUT) {
    return { kind: "timeout", message: `${origin} did not answer within ${checkRequest(request).headersTimeoutMs / 1000} s.` };
  }
  if (abortReason === "time limit") {
    return { kind: "timeout", message: `The request to ${origin} took longer than ${LIMITS.maxDurationMs / 60_000} minutes; it was stopped.` };
  }
  if (abortReason) return { kind: "network", message: `The request was aborted: ${abortReason}.` };
  if (error?.name === "TypeError") {
    return { kind: "network", message: `Cannot reach ${origin}: the connection failed. Check that the server is running.` };
  }
  return { kind: "network", message: `The request to ${origin} failed: ${error?.message || error}` };
}
