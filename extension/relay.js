// One request of a page, relayed from its port to its entry in the activity log: every check
// (the page is one the user added, the bridge is on, the limits, the request itself, the user's
// grant), the fetch hop by hop with each redirect checked like the first URL, and the answer
// streamed back. It stops when its page goes away or stops reading, at its time limits, and when
// the policy no longer allows it. service-worker.js states the rules it keeps.
import { logActivity, shortTarget } from "./activity-log.js";
import { trustedStorage } from "./content-scripts.js";
import { consent } from "./grants.js";
import {
  LIMITS,
  addressRefusal,
  checkRequest,
  consentState,
  originBound,
  originPattern,
  parseOrigin,
  readPolicy,
} from "./policy.js";
import "./protocol.js";
import { Refusal } from "./refusal.js";
import { reportOf, watch } from "./web-request.js";

const { PORT_NAME, RuntimeMessage, extensionMessage, runtimeMessage, fromBase64, toBase64 } = globalThis.agentPyBridgeProtocol;

const HEADERS_TIMEOUT = "headers-timeout";
const PAGE_GONE = "the page went away";
const PAGE_STOPPED = "the page stopped reading";
const REVOKED = "revoked: ";

let inFlight = 0;
const pageInFlight = new Map(); // page origin -> its requests at once (LIMITS.maxInFlightPerPage)
const running = new Map(); // request id -> {page, server, tabId, revoke(why)}
let nextRequestId = 1;

// --- policy changes cut what they no longer allow, at once ---------------------------------------
/** Stops each running request that `policy` no longer allows. */
export function cutWhatIsNoLongerAllowed(policy) {
  for (const request of running.values()) {
    const why = noLongerAllowed(policy, request);
    if (why) request.revoke(why);
  }
}

function noLongerAllowed(policy, { page, server, tabId }) {
  if (policy.paused) return "the bridge was paused";
  if (!(page in policy.pages)) return `${page} was removed from the bridge's pages`;
  const state = consentState(policy, page, server, tabId);
  if (state !== "always" && state !== "once") return `access from ${page} to ${server} was revoked`;
  return null;
}

// --- one request ----------------------------------------------------------------------------------
/** A runtime port from a content script: one request (a fetch message), or pings. */
export function relayPort(port) {
  if (port.name !== PORT_NAME) return;
  const pageOrigin = port.sender?.origin;
  let started = false;
  const abortByPage = { reason: PAGE_GONE };
  port.onMessage.addListener((message) => {
    if (message?.type === RuntimeMessage.ABORT) abortByPage.reason = PAGE_STOPPED;
    if (message?.type !== RuntimeMessage.FETCH || started) return; // pings only keep this worker awake
    started = true;
    relay(port, pageOrigin, message.request, abortByPage);
  });
}

async function relay(port, pageOrigin, request, abortByPage) {
  const id = nextRequestId++;
  const entry = {
    time: new Date().toISOString(),
    page: pageOrigin || "(unknown)",
    method: String(request?.method || "?").toUpperCase(),
    target: shortTarget(request?.url),
    address: null,
    result: "",
    refused: false,
  };
  let connected = true;
  let silent = false;
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
  pageInFlight.set(pageOrigin, (pageInFlight.get(pageOrigin) || 0) + 1);
  try {
    if (!(await trustedStorage)) throw new Refusal("This browser cannot keep the bridge's rules from web pages' content scripts; update it.");
    const tabId = port.sender?.tab?.id;
    if (!port.sender?.tab || port.sender.frameId !== 0) throw new Refusal("Only a page's top frame may use the bridge.");
    const policy = await readPolicy();
    if (!(pageOrigin in policy.pages)) {
      silent = true; // the same silence as a browser without the extension
      throw new Refusal(`${pageOrigin} is not one of the bridge's pages.`);
    }
    if (policy.paused) throw new Refusal("The agent_py bridge is paused; switch it back on in its options.");
    if (inFlight > LIMITS.maxInFlight) throw new Refusal(`More than ${LIMITS.maxInFlight} requests at once; try again.`);
    if (pageInFlight.get(pageOrigin) > LIMITS.maxInFlightPerPage) {
      throw new Refusal(`More than ${LIMITS.maxInFlightPerPage} requests at once from ${pageOrigin}; try again.`);
    }
    const checked = checkRequest(request);
    if (!checked.ok) throw new Refusal(checked.reason);
    const target = parseOrigin(request.url);
    if (!target.ok) throw new Refusal(target.reason);
    await consent(policy, pageOrigin, target.origin, target.kind, tabId, controller.signal);
    const me = { page: pageOrigin, server: target.origin, tabId, revoke: (why) => abort(REVOKED + why) };
    running.set(id, me);
    // The policy may have changed while the question was open.
    const why = noLongerAllowed(await readPolicy(), me);
    if (why) abort(REVOKED + why);
    const response = await fetchHopByHop(request.url, checked, me, controller.signal, abort, () => abortReason, entry);
    entry.target = shortTarget(response.url);
    status = response.status;
    send(extensionMessage.head(status, Object.fromEntries(response.headers), response.url));
    await streamBody(response, send, () => abortReason);
    send(extensionMessage.end());
    entry.result = `HTTP ${response.status}`;
  } catch (error) {
    const failure = describeFailure(error, abortReason, request);
    entry.refused = failure.kind === "refused";
    entry.result = `${failure.kind}: ${failure.message}`;
    if (abortReason === PAGE_GONE || abortReason === PAGE_STOPPED) {
      // An SSE answer is often left early on purpose: the page had what it waited for.
      entry.result = status === null ? `aborted: ${abortReason}` : `HTTP ${status}, then ${abortReason}`;
    } else if (abortReason?.startsWith(REVOKED)) {
      entry.result = `${status === null ? "" : `HTTP ${status}, then `}stopped: ${abortReason.slice(REVOKED.length)}`;
    }
    send(runtimeMessage.error(failure, silent));
  } finally {
    running.delete(id);
    inFlight -= 1;
    const left = pageInFlight.get(pageOrigin) - 1;
    if (left > 0) pageInFlight.set(pageOrigin, left);
    else pageInFlight.delete(pageOrigin);
    clearTimeout(deadline);
    logActivity(entry);
    if (connected) port.disconnect();
  }
}

async function fetchHopByHop(firstUrl, checked, me, signal, abort, abortReason, entry) {
  let url = firstUrl;
  let { method, body } = checked;
  const headers = { ...checked.headers };
  for (let hop = 0; hop <= LIMITS.maxRedirects; hop++) {
    const target = parseOrigin(url); // checked before the first hop, and for each redirect below
    if (!(await chrome.permissions.contains({ origins: [originPattern(target.origin)] }))) {
      throw new Refusal(
        `The browser does not let the bridge reach ${target.origin}: the extension holds no access to it. Revoke it in the bridge's options and allow it again when the page asks.`,
      );
    }
    watch(target.origin);
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
    const report = await reportOf(method, url);
    if (abortReason()) throw new DOMException("aborted", "AbortError");
    entry.address = report?.ip || null;
    const rebound = addressRefusal(target.origin, report?.ip);
    if (rebound) {
      abort(rebound);
      throw new Refusal(rebound);
    }
    if (response.type !== "opaqueredirect") return response;
    if (!report?.location) {
      throw new Refusal(`${shortTarget(url)} answered with a redirect whose target the bridge could not see; refused. Use the final URL in the page's settings.`);
    }
    const next = new URL(report.location, url);
    const nextTarget = parseOrigin(next.href);
    if (!nextTarget.ok) throw new Refusal(`The server redirected to ${shortTarget(next.href)}: refused. ${nextTarget.reason}`);
    const state = consentState(await readPolicy(), me.page, nextTarget.origin, me.tabId);
    if (state !== "always" && state !== "once") {
      throw new Refusal(
        `The server redirected to ${shortTarget(next.href)}: refused. ${me.page} is not allowed to reach ${nextTarget.origin}; nothing was sent there.`,
      );
    }
    // The same rewriting browsers do: 303, and 301/302 after a POST, become a GET without a
    // body.
    if (report.status === 303 || ((report.status === 301 || report.status === 302) && method === "POST")) {
      method = "GET";
      body = null;
      for (const name of Object.keys(headers)) if (name.toLowerCase() === "content-type") delete headers[name];
    }
    if (next.origin !== new URL(url).origin) {
      // What belongs to one server stays with it: its token, its session, its body and the
      // headers that mirror the body.
      if (body !== null) {
        throw new Refusal(
          `${shortTarget(url)} redirected a ${method} with a body to ${next.origin}; the bridge does not send a request body to another server. Use the final URL.`,
        );
      }
      for (const name of Object.keys(headers)) if (originBound(name)) delete headers[name];
    }
    me.server = nextTarget.origin;
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
      send(extensionMessage.chunk(toBase64(value)));
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
  if (abortReason?.startsWith(REVOKED)) {
    return { kind: "refused", message: `Stopped: ${abortReason.slice(REVOKED.length)}.` };
  }
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
