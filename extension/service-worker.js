// The bridge's service worker: performs HTTP requests for allowed pages, to the servers the
// user let each page reach.
//
// The messages (a runtime port per request from the content script, one-off messages for hello
// and the consent prompt) are in protocol.js.
//
// Disconnecting the port (the page went away, or it aborted) aborts the fetch; so does a change
// of the policy that no longer allows it (revoked, page removed, bridge paused).
//
// Every request is checked here, whatever the content script already checked: the page's
// origin (from the browser, not from the page) must be one the user added; the user must have
// allowed that page to reach the target (asked in consent.html the first time), and every
// redirect hop. Requests go out without cookies or other credentials, without a referrer, and
// with only the allowed headers. Each one is written to the activity log.
import {
  LIMITS,
  ORIGIN_BOUND_HEADERS,
  addActivity,
  addressRefusal,
  checkRequest,
  consentState,
  contentScriptId,
  originPattern,
  pairKey,
  parseOrigin,
  readPolicy,
  releaseAccess,
} from "./policy.js";
import "./protocol.js";

const { PORT_NAME, RuntimeMessage, extensionMessage, runtimeMessage, fromBase64, toBase64 } = globalThis.agentPyBridgeProtocol;

const WEBREQUEST_WAIT_MS = 2_000; // for webRequest to report what fetch() already saw
const WEBREQUEST_KEEP_MS = 10_000; // a report nobody asked for (the request was aborted) expires
const HEADERS_TIMEOUT = "headers-timeout";
const PAGE_GONE = "the page went away";
const PAGE_STOPPED = "the page stopped reading";
const REVOKED = "revoked: ";

let inFlight = 0;
const pageInFlight = new Map(); // page origin -> its requests at once (LIMITS.maxInFlightPerPage)
const running = new Map(); // request id -> {page, server, tabId, revoke(why)}
let nextRequestId = 1;

// Content scripts must not read the policy (it says which pages may reach which servers).
// A browser that cannot close it gets no bridge at all (every request is refused).
const trustedStorage = chrome.storage.local
  .setAccessLevel({ accessLevel: "TRUSTED_CONTEXTS" })
  .then(
    () => true,
    (error) => {
      console.error("storage.local access level:", error);
      return false;
    },
  );

chrome.runtime.onInstalled.addListener(async () => {
  // Version 0.1 trusted two page origins from install and shared one server list among
  // pages; nothing of that is carried over: every page and server is asked for again.
  await chrome.storage.local.remove(["pageOrigins", "approvedTargets"]);
  // Registrations outlive an update: made again, they load this version's files.
  await syncContentScripts({ again: true });
});

chrome.action.onClicked.addListener(() => chrome.runtime.openOptionsPage());

// --- the content script runs only on pages the user added --------------------------------------
let scriptSync = Promise.resolve();

function syncContentScripts({ again = false } = {}) {
  scriptSync = scriptSync
    .then(async () => {
      await trustedStorage;
      if (again) await chrome.scripting.unregisterContentScripts();
      const { pages } = await readPolicy();
      const wanted = new Map(Object.keys(pages).map((origin) => [contentScriptId(origin), origin]));
      const registered = await chrome.scripting.getRegisteredContentScripts();
      const stale = registered.map((script) => script.id).filter((id) => !wanted.has(id));
      if (stale.length) await chrome.scripting.unregisterContentScripts({ ids: stale });
      const have = new Set(registered.map((script) => script.id));
      const missing = [...wanted].filter(([id]) => !have.has(id));
      for (const [id, origin] of missing) {
        try {
          await chrome.scripting.registerContentScripts([
            { id, matches: [originPattern(origin)], js: ["protocol.js", "content-script.js"], runAt: "document_start", allFrames: false },
          ]);
        } catch (error) {
          console.warn(`content script for ${origin}:`, error); // no host access to that page
        }
      }
    })
    .catch((error) => console.warn("content scripts:", error));
  return scriptSync;
}
syncContentScripts();

// --- policy changes cut what they no longer allow, at once ---------------------------------------
chrome.storage.onChanged.addListener(async (changes, area) => {
  if (area === "session" && "refusals" in changes) showRefusals(changes.refusals.newValue || 0);
  if (area === "local" && "pages" in changes) syncContentScripts();
  const keys = area === "local" ? ["pages", "paused"] : area === "session" ? ["once", "denied"] : [];
  if (!keys.some((key) => key in changes)) return;
  const policy = await readPolicy();
  for (const request of running.values()) {
    const why = noLongerAllowed(policy, request);
    if (why) request.revoke(why);
  }
});

function noLongerAllowed(policy, { page, server, tabId }) {
  if (policy.paused) return "the bridge was paused";
  if (!(page in policy.pages)) return `${page} was removed from the bridge's pages`;
  const state = consentState(policy, page, server, tabId);
  if (state !== "always" && state !== "once") return `access from ${page} to ${server} was revoked`;
  return null;
}

chrome.tabs.onRemoved.addListener((tabId) => {
  // "Allow once" ends with its tab.
  changePolicy(async () => {
    const { once = [] } = await chrome.storage.session.get("once");
    const kept = once.filter((grant) => grant.tabId !== tabId);
    if (kept.length === once.length) return;
    await chrome.storage.session.set({ once: kept });
    for (const grant of once) if (grant.tabId === tabId) await releaseAccess(grant.server);
  });
});

let policyWrites = Promise.resolve();

function changePolicy(change) {
  policyWrites = policyWrites.then(change).catch((error) => console.warn("policy:", error));
  return policyWrites;
}

// --- the activity log (storage.session: in memory only, gone when the browser closes) --------
let logWrites = Promise.resolve();

function logActivity(entry) {
  logWrites = logWrites
    .then(async () => {
      const { activity = {}, refusals = 0 } = await chrome.storage.session.get(["activity", "refusals"]);
      const update = { activity: addActivity(activity, entry) };
      if (entry.refused) update.refusals = refusals + 1;
      await chrome.storage.session.set(update);
    })
    .catch((error) => console.warn("activity log:", error));
}

function showRefusals(count) {
  chrome.action.setBadgeBackgroundColor({ color: "#b42318" }).catch(() => {});
  chrome.action.setBadgeText({ text: count ? String(count) : "" }).catch(() => {});
  chrome.action.setTitle({ title: count ? `agent_py bridge: ${count} refused since the log was cleared` : "agent_py bridge: open the options" }).catch(() => {});
}
chrome.storage.session.get("refusals").then(({ refusals = 0 }) => showRefusals(refusals));

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

// --- what webRequest saw: redirects and the address each answer came from ---------------------
// fetch(..., {redirect: "manual"}) in a service worker gives an opaque response: no status, no
// Location. The webRequest API does see the redirect (for hosts this extension may access),
// so the worker learns the next URL there, checks it like the first one, and only then asks
// for it. It also reports the IP address used, which the DNS-rebinding check needs.
//
// The bridge is granted each server's host when the user allows it, and Chromium (checked in
// 156) sends a running service worker's webRequest listeners no events for a host granted after
// they were added: not after webRequest.handlerBehaviorChanged(), nor after they are removed and
// added again, nor to a listener filtered by http and https patterns added later. Adding
// another listener for <all_urls> after the grant brings them (to every listener of that
// event). So before the first request to each origin in this worker's life, one more pair of
// listeners that do nothing is added (a handful in a worker's life: one per server used).
const seen = new Map(); // "METHOD url" -> {location, status, ip, at}
const waiting = new Map(); // "METHOD url" -> [resolve]
const watchedOrigins = new Set(); // origins requested since a listener was last added

function noteRequest(details, location) {
  if (details.initiator !== self.location.origin) return;
  const key = `${details.method} ${details.url}`;
  const report = { location, status: details.statusCode, ip: details.ip, at: Date.now() };
  const waiters = waiting.get(key);
  if (waiters?.length) {
    waiting.delete(key);
    for (const resolve of waiters) resolve(report);
    return;
  }
  for (const [old, value] of seen) if (report.at - value.at > WEBREQUEST_KEEP_MS) seen.delete(old);
  seen.set(key, report);
}

const OWN_REQUESTS = { urls: ["http://*/*", "https://*/*"], tabId: -1 };
chrome.webRequest.onBeforeRedirect.addListener((details) => noteRequest(details, details.redirectUrl), OWN_REQUESTS);
chrome.webRequest.onResponseStarted.addListener((details) => noteRequest(details, null), OWN_REQUESTS);

/** Before a request to `origin`: a listener added since its host was granted (see above). */
function watch(origin) {
  if (watchedOrigins.has(origin)) return;
  const nothing = () => {};
  chrome.webRequest.onBeforeRedirect.addListener(nothing, { urls: ["<all_urls>"], tabId: -1 });
  chrome.webRequest.onResponseStarted.addListener(nothing, { urls: ["<all_urls>"], tabId: -1 });
  watchedOrigins.add(origin);
}
chrome.permissions.onRemoved.addListener(() => watchedOrigins.clear());

function reportOf(method, url) {
  const key = `${method} ${url}`;
  const report = seen.get(key);
  if (report && Date.now() - report.at < WEBREQUEST_KEEP_MS) {
    seen.delete(key);
    return Promise.resolve(report);
  }
  return new Promise((resolve) => {
    const waiters = waiting.get(key) || [];
    waiters.push(resolve);
    waiting.set(key, waiters);
    setTimeout(() => resolve(null), WEBREQUEST_WAIT_MS);
  });
}

// --- the consent prompt ------------------------------------------------------------------------
const prompts = new Map(); // id -> {id, page, server, kind, tabId, windowId, waiters}

async function askUser(page, server, kind, tabId, signal) {
  let prompt = [...prompts.values()].find((p) => p.page === page && p.server === server && p.tabId === tabId);
  if (!prompt) {
    if (prompts.size >= LIMITS.maxOpenPrompts) {
      throw new Refusal(`${LIMITS.maxOpenPrompts} questions of the bridge are already waiting for an answer; answer them first.`);
    }
    prompt = { id: crypto.randomUUID(), page, server, kind, tabId, windowId: null, waiters: new Set() };
    prompts.set(prompt.id, prompt);
    try {
      const window = await chrome.windows.create({
        url: `consent.html?id=${prompt.id}`,
        type: "popup",
        width: 560,
        height: 340,
        focused: true,
      });
      prompt.windowId = window.id;
    } catch (error) {
      prompts.delete(prompt.id);
      throw new Refusal(`The bridge could not open its question window (${error.message || error}).`);
    }
  }
  if (signal.aborted) return "aborted";
  return new Promise((resolve) => {
    const done = (answer) => {
      clearTimeout(timer);
      signal.removeEventListener("abort", stop);
      prompt.waiters.delete(done);
      resolve(answer);
    };
    const stop = () => done("aborted");
    const timer = setTimeout(() => done("timeout"), LIMITS.consentWaitMs);
    signal.addEventListener("abort", stop);
    prompt.waiters.add(done);
  });
}

function settle(prompt, answer) {
  prompts.delete(prompt.id);
  for (const done of [...prompt.waiters]) done(answer);
}

chrome.windows.onRemoved.addListener((windowId) => {
  for (const prompt of [...prompts.values()]) if (prompt.windowId === windowId) settle(prompt, "dismissed");
});

async function recordAnswer(prompt, answer) {
  const { page, server, tabId } = prompt;
  await changePolicy(async () => {
    if (answer === "always") {
      const { pages = {} } = await chrome.storage.local.get("pages");
      if (!(page in pages)) return; // removed while the question was open
      if (!pages[page].includes(server)) pages[page] = [...pages[page], server];
      await chrome.storage.local.set({ pages });
    } else if (answer === "once") {
      const { once = [] } = await chrome.storage.session.get("once");
      await chrome.storage.session.set({ once: [...once, { page, server, tabId }] });
    } else if (answer === "deny") {
      const { denied = [] } = await chrome.storage.session.get("denied");
      if (!denied.includes(pairKey(page, server))) await chrome.storage.session.set({ denied: [...denied, pairKey(page, server)] });
    }
  });
  settle(prompt, answer);
}

async function consent(policy, page, server, kind, tabId, signal) {
  const state = consentState(policy, page, server, tabId);
  if (state === "always" || state === "once") return;
  const undo = `Open the bridge's options to change that (under ${page}).`;
  if (state === "denied") throw new Refusal(`You did not allow ${page} to reach ${server}. ${undo}`);
  const answer = await askUser(page, server, kind, tabId, signal);
  if (answer === "always" || answer === "once") return;
  if (answer === "aborted") throw new DOMException("aborted", "AbortError");
  const why = {
    deny: `You did not allow ${page} to reach ${server}. ${undo}`,
    "no-permission": `The browser did not grant the bridge access to ${server}; nothing was sent.`,
    dismissed: `The bridge's question about ${server} was closed without an answer; nothing was sent.`,
    timeout: `Nobody answered the bridge's question about ${server} within ${LIMITS.consentWaitMs / 1000} s; nothing was sent.`,
  };
  throw new Refusal(why[answer] || `Not allowed: ${answer}.`);
}

// --- one-off messages: hello from content scripts, the prompt's question and answer ---------------
chrome.runtime.onMessage.addListener((message, sender, reply) => {
  if (sender.id !== chrome.runtime.id) return false;
  const fromExtensionPage = sender.origin === self.location.origin;
  if (message?.type === RuntimeMessage.HELLO && !fromExtensionPage) {
    hello(sender).then(reply, () => reply(null));
    return true;
  }
  if (!fromExtensionPage) return false; // a content script may only say hello
  const prompt = prompts.get(message?.id);
  if (message?.type === RuntimeMessage.CONSENT_QUESTION) {
    reply(prompt ? { page: prompt.page, server: prompt.server, kind: prompt.kind } : null);
  } else if (message?.type === RuntimeMessage.CONSENT_ANSWER && prompt) {
    const answer = ["once", "always", "deny", "no-permission"].includes(message.answer) ? message.answer : "deny";
    recordAnswer(prompt, answer).then(() => reply({ ok: true }), () => reply({ ok: false }));
    return true;
  }
  return false;
});

// Only pages the user added learn that the bridge exists; others get no answer at all.
async function hello(sender) {
  if (!(await trustedStorage)) return null;
  if (!sender.tab || sender.frameId !== 0) return null;
  const policy = await readPolicy();
  if (!(sender.origin in policy.pages)) return null;
  return { version: chrome.runtime.getManifest().version, allowed: !policy.paused };
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
    if (message?.type === RuntimeMessage.ABORT) abortByPage.reason = PAGE_STOPPED;
    if (message?.type !== RuntimeMessage.FETCH || started) return; // pings only keep this worker awake
    started = true;
    relay(port, pageOrigin, message.request, abortByPage);
  });
});

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
      // What belongs to one server stays with it: its token, its session, its body.
      if (body !== null) {
        throw new Refusal(
          `${shortTarget(url)} redirected a ${method} with a body to ${next.origin}; the bridge does not send a request body to another server. Use the final URL.`,
        );
      }
      for (const name of Object.keys(headers)) if (ORIGIN_BOUND_HEADERS.has(name.toLowerCase())) delete headers[name];
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
