// The bridge's rules, shared by the service worker (which enforces them on every request),
// the consent prompt and the options page.
//
// Consent is per pair: a page origin may reach a server origin only after the user said so in
// the extension's own prompt (consent.html). The answers live in two places that content
// scripts cannot read (the service worker sets storage.local to trusted contexts only;
// storage.session is so by default):
//   storage.local   pages: {pageOrigin: [serverOrigin, ...]}  pages the user added, and the
//                          servers each may always reach
//                   paused: true stops every request at once
//   storage.session once: [{page, server, tabId}]   "allow once": that tab, until it closes
//                   denied: ["page server", ...]     "deny": not asked again this session
//                   activity: {pageOrigin: [entry, ...]}, refusals: count (the badge)
// Origins are compared exactly (scheme, host and port). Plain http is allowed for servers on
// this machine only (loopback); everything else must be https.

export const LIMITS = {
  requestBytes: 4 * 1024 * 1024, // a request body larger than this is refused
  responseBytes: 16 * 1024 * 1024, // a response body is cut off (with an error) past this
  defaultHeadersTimeoutMs: 30_000, // status line and headers, when the page gives no limit
  maxDurationMs: 15 * 60_000, // a whole request, streamed body included; its headers too
  maxRedirects: 5,
  maxInFlight: 32,
  maxHeaderBytes: 8 * 1024,
  consentWaitMs: 120_000, // a request waits this long for the user's answer in the prompt
  maxOpenPrompts: 3, // more unanswered questions than this and new ones are refused
  activityPerPage: 50, // log entries kept per page origin: one page cannot push out another's
  activityPages: 16, // page origins kept in the log (the least recent is dropped)
  // One entry's text: a page chooses a request's path and method, and megabytes of them
  // filled storage.session (10 MB) and froze the options page. Cut to a prefix and the length.
  activityFieldChars: { page: 200, method: 24, target: 300, address: 64, result: 400 },
  activityBytes: 1024 * 1024, // the whole log, as JSON: the oldest entries go first past this
  maxInFlightPerPage: 16, // a page's requests at once, waiting on a prompt included: one page
  // cannot take another's share of maxInFlight
};

export const METHODS = ["GET", "POST", "DELETE"];
const ALLOWED_HEADERS = new Set(["accept", "content-type", "authorization", "last-event-id"]);

/** True for the request headers the bridge passes on: MCP's own and a few standard ones. MCP's
 * may use any character a header name may (RFC 9110's tchar): a tool's x-mcp-header names
 * an Mcp-Param-* header (MCP 2026-07-28), and "Region_ID" is a valid name. */
export function headerAllowed(name) {
  const lower = String(name).toLowerCase();
  return ALLOWED_HEADERS.has(lower) || /^mcp-[!#$%&'*+.^_`|~0-9a-z-]+$/.test(lower);
}

function ipv4(host) {
  const parts = host.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) return null;
  return parts.map(Number);
}

function kindOfIPv4([a, b]) {
  if (a === 127) return "loopback";
  if (a === 169 && b === 254) return "link-local";
  if (a === 10 || a === 0 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168)) return "private";
  if (a === 100 && b >= 64 && b <= 127) return "private"; // carrier-grade NAT
  return "public";
}

/**
 * Where a URL's host lives: "loopback" (this machine), "private" (a local network),
 * "link-local", or "public". Judged from the name or address as written; what a name
 * resolved to is checked after the request (addressRefusal).
 */
export function hostKind(hostname) {
  const host = hostname.toLowerCase().replace(/\.$/, "");
  if (host === "localhost" || host.endsWith(".localhost")) return "loopback";
  const v4 = ipv4(host);
  if (v4) return kindOfIPv4(v4);
  if (host.startsWith("[") && host.endsWith("]")) {
    const v6 = host.slice(1, -1);
    if (v6 === "::1") return "loopback";
    if (v6 === "::") return "private";
    const mapped = v6.match(/^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/);
    if (mapped) {
      const [hi, lo] = [parseInt(mapped[1], 16), parseInt(mapped[2], 16)];
      return kindOfIPv4([hi >> 8, hi & 255, lo >> 8, lo & 255]);
    }
    if (/^fe[89ab][0-9a-f]?:/.test(v6)) return "link-local";
    if (/^f[cd][0-9a-f]{0,2}:/.test(v6)) return "private";
    return "public";
  }
  if (host.endsWith(".local") || host.endsWith(".internal") || host.endsWith(".home.arpa") || host.endsWith(".lan")) {
    return "private";
  }
  return "public";
}

const WHERE = {
  loopback: "on this machine",
  private: "on a private network",
  "link-local": "a link-local address",
  public: "on the internet",
};

/**
 * Reads what a user typed (an origin, or any URL on it) as an origin the bridge can list, as
 * a server or as a page. Returns {ok: true, origin, kind} or {ok: false, reason}.
 */
export function parseOrigin(text) {
  let url;
  try {
    url = new URL(String(text).trim());
  } catch {
    return { ok: false, reason: `"${text}" is not a URL; write it like https://mcp.example.org or http://127.0.0.1:8000.` };
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return { ok: false, reason: `Only http:// and https:// servers can be reached, not ${url.protocol}//.` };
  }
  if (url.username || url.password) {
    return { ok: false, reason: "A URL with a user name or password in it is refused; use a token instead." };
  }
  const kind = hostKind(url.hostname);
  if (url.protocol === "http:" && kind !== "loopback") {
    return {
      ok: false,
      reason: `${url.origin} uses plain http on a server that is not on this machine; only https is allowed there.`,
    };
  }
  return { ok: true, origin: url.origin, kind };
}

/**
 * Validates a request from a page: method, headers, body size and time limit. Returns
 * {ok: true, method, headers, body, headersTimeoutMs} or {ok: false, reason}.
 */
export function checkRequest(request) {
  const method = String(request?.method || "").toUpperCase();
  if (!METHODS.includes(method)) {
    return { ok: false, reason: `The method ${cutText(method, 24) || "(none)"} is not allowed; only ${METHODS.join(", ")}.` };
  }
  const headers = {};
  let headerBytes = 0;
  for (const [name, value] of Object.entries(request.headers || {})) {
    if (!headerAllowed(name)) {
      return { ok: false, reason: `The header ${cutText(name, 64)} is not allowed (only Accept, Content-Type, Authorization, Last-Event-ID and MCP-*).` };
    }
    const text = String(value);
    if (/[\r\n\0]/.test(text)) return { ok: false, reason: `The header ${cutText(name, 64)} contains a line break.` };
    headerBytes += name.length + text.length;
    headers[name] = text;
  }
  if (headerBytes > LIMITS.maxHeaderBytes) {
    return { ok: false, reason: `The request headers are larger than ${LIMITS.maxHeaderBytes} bytes.` };
  }
  const body = request.body == null ? null : String(request.body);
  if (body !== null && method !== "POST") return { ok: false, reason: `A ${method} request cannot carry a body.` };
  // The body arrives as base64: about 4/3 of its size.
  if (body !== null && body.length * 0.75 > LIMITS.requestBytes) {
    return { ok: false, reason: `The request body is larger than ${LIMITS.requestBytes / 1024 / 1024} MB.` };
  }
  const asked = Number(request.timeout_ms);
  const headersTimeoutMs = Number.isFinite(asked) && asked > 0
    ? Math.min(asked, LIMITS.maxDurationMs)
    : LIMITS.defaultHeadersTimeoutMs;
  return { ok: true, method, headers, body, headersTimeoutMs };
}

/** The host-permission pattern that covers exactly one origin. */
export function originPattern(origin) {
  return `${origin}/*`;
}

/** The id of the content script registered for one allowed page origin. */
export function contentScriptId(origin) {
  return `page-${origin.replace(/[^A-Za-z0-9]/g, "_")}`;
}

/**
 * What the user said about `page` reaching `server` (from the tab `tabId`):
 * "always", "once", "denied", or "ask" when nobody asked yet.
 */
export function consentState({ pages = {}, once = [], denied = [] }, page, server, tabId) {
  if ((pages[page] || []).includes(server)) return "always";
  if (once.some((grant) => grant.page === page && grant.server === server && grant.tabId === tabId)) return "once";
  if (denied.includes(pairKey(page, server))) return "denied";
  return "ask";
}

export function pairKey(page, server) {
  return `${page} ${server}`;
}

const ORIGIN_BOUND_HEADERS = new Set(["authorization", "mcp-session-id", "last-event-id", "mcp-method", "mcp-name"]);

/**
 * True for a request header that never follows a redirect to another origin. Some belong to
 * one server (its token, its session, a position in its stream); the others mirror the
 * request's body (MCP 2026-07-28: Mcp-Method, Mcp-Name, and Mcp-Param-* with a tool's
 * arguments), and a body is never sent on to another server either. MCP-Protocol-Version
 * names no server and no body: it follows.
 */
export function originBound(name) {
  const lower = String(name).toLowerCase();
  return ORIGIN_BOUND_HEADERS.has(lower) || lower.startsWith("mcp-param-");
}

/**
 * DNS rebinding: a server approved by a public name must have been reached at a public
 * address (webRequest reports the address used). Returns a refusal sentence, or null.
 * `ip` is what webRequest gave ("127.0.0.1", "::1"), or undefined when it said nothing.
 */
export function addressRefusal(origin, ip) {
  const { hostname } = new URL(origin);
  const named = !ipv4(hostname) && !hostname.startsWith("[");
  if (!named) return null; // an address was approved as such: nothing was resolved
  const expected = hostKind(hostname);
  if (expected !== "public" && expected !== "loopback") return null;
  if (!ip) {
    return expected === "public" ? `The bridge could not see which address ${origin} resolved to; refused.` : null;
  }
  const used = hostKind(ip.includes(":") ? `[${ip}]` : ip);
  if (used === expected) return null;
  return `${origin} resolved to ${ip} (${WHERE[used]}), not ${WHERE[expected]}: refused (DNS rebinding?).`;
}

/** `text` cut to `limit` characters, saying how long it was. */
export function cutText(text, limit) {
  const value = String(text ?? "");
  return value.length <= limit ? value : `${value.slice(0, limit)}… (${value.length} characters)`;
}

/** The entry as the log keeps it: each text field cut (LIMITS.activityFieldChars). */
export function boundedEntry(entry) {
  const bounded = { ...entry };
  for (const [field, limit] of Object.entries(LIMITS.activityFieldChars)) {
    if (typeof bounded[field] === "string") bounded[field] = cutText(bounded[field], limit);
  }
  return bounded;
}

/**
 * Adds `entry` (cut by boundedEntry) to the log, keeping at most LIMITS.activityPerPage entries
 * per page origin, LIMITS.activityPages pages, and LIMITS.activityBytes in all (the oldest
 * entries of the page with the most go first).
 */
export function addActivity(log, entry) {
  const kept = boundedEntry(entry);
  const byPage = { ...log };
  byPage[kept.page] = [kept, ...(byPage[kept.page] || [])].slice(0, LIMITS.activityPerPage);
  const pages = Object.keys(byPage).sort((a, b) => (byPage[b][0].time < byPage[a][0].time ? -1 : 1));
  for (const page of pages.slice(LIMITS.activityPages)) delete byPage[page];
  while (JSON.stringify(byPage).length > LIMITS.activityBytes) {
    const largest = Object.keys(byPage).sort((a, b) => byPage[b].length - byPage[a].length)[0];
    byPage[largest] = byPage[largest].slice(0, -1);
    if (!byPage[largest].length) delete byPage[largest];
  }
  return byPage;
}

/** Every entry of the log, newest first. */
export function activityEntries(log) {
  return Object.values(log || {})
    .flat()
    .sort((a, b) => (a.time < b.time ? 1 : a.time > b.time ? -1 : 0));
}

/** The whole policy, from trusted storage (service worker and extension pages only). */
export async function readPolicy() {
  const [local, session] = await Promise.all([
    chrome.storage.local.get(["pages", "paused"]),
    chrome.storage.session.get(["once", "denied"]),
  ]);
  return { pages: local.pages || {}, paused: Boolean(local.paused), once: session.once || [], denied: session.denied || [] };
}

/** Gives back the browser's access to an origin once no page or grant needs it. */
export async function releaseAccess(origin) {
  const { pages, once } = await readPolicy();
  const used =
    origin in pages ||
    Object.values(pages).some((servers) => servers.includes(origin)) ||
    once.some((grant) => grant.server === origin);
  if (!used) await chrome.permissions.remove({ origins: [originPattern(origin)] }).catch(() => {});
}
