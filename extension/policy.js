// The bridge's rules, shared by the service worker (which enforces them on every request)
// and the options page (which refuses to approve what could never be used).
//
// Who may use the bridge: only pages whose origin is in `pageOrigins`, compared exactly
// (scheme, host and port). What they may reach: only targets whose origin is in
// `approvedTargets`, again exactly; the user adds both in the options page. Plain http is
// allowed for servers on this machine only (loopback); everything else must be https.

export const STORAGE_DEFAULTS = {
  // The page as `bash scripts/start.sh` serves it. Other origins are added in the options.
  pageOrigins: ["http://127.0.0.1:8765", "http://localhost:8765"],
  approvedTargets: [],
};

export const LIMITS = {
  requestBytes: 4 * 1024 * 1024, // a request body larger than this is refused
  responseBytes: 16 * 1024 * 1024, // a response body is cut off (with an error) past this
  defaultHeadersTimeoutMs: 30_000, // status line and headers, when the page gives no limit
  maxHeadersTimeoutMs: 300_000,
  maxDurationMs: 15 * 60_000, // a whole request, streamed body included
  maxRedirects: 5,
  maxInFlight: 32,
  maxHeaderBytes: 8 * 1024,
  activityEntries: 100,
};

export const METHODS = ["GET", "POST", "DELETE"];
const ALLOWED_HEADERS = new Set(["accept", "content-type", "authorization", "last-event-id"]);

/** True for the request headers the bridge passes on: MCP's own and a few standard ones. */
export function headerAllowed(name) {
  const lower = String(name).toLowerCase();
  return ALLOWED_HEADERS.has(lower) || /^mcp-[a-z0-9-]+$/.test(lower);
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
 * "link-local", or "public". Judged from the name or address as written: a public name that
 * resolves to a private address cannot be seen from an extension, so approval is per origin.
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
 * Decides whether the bridge may send a request to `url` now. Returns {ok: true, origin} or
 * {ok: false, reason} with a sentence that says what to do.
 */
export function checkTarget(url, approvedTargets) {
  const parsed = parseOrigin(url);
  if (!parsed.ok) return parsed;
  if (!approvedTargets.includes(parsed.origin)) {
    const where = parsed.kind === "public" ? "" : ` (${WHERE[parsed.kind]})`;
    return {
      ok: false,
      reason: `${parsed.origin}${where} is not an approved server. Approve it in the agent_py bridge's options if you trust it.`,
    };
  }
  return { ok: true, origin: parsed.origin };
}

/**
 * Validates a request from a page: method, headers, body size and time limit. Returns
 * {ok: true, method, headers, body, headersTimeoutMs} or {ok: false, reason}.
 */
export function checkRequest(request) {
  const method = String(request?.method || "").toUpperCase();
  if (!METHODS.includes(method)) {
    return { ok: false, reason: `The method ${method || "(none)"} is not allowed; only ${METHODS.join(", ")}.` };
  }
  const headers = {};
  let headerBytes = 0;
  for (const [name, value] of Object.entries(request.headers || {})) {
    if (!headerAllowed(name)) {
      return { ok: false, reason: `The header ${name} is not allowed (only Accept, Content-Type, Authorization, Last-Event-ID and MCP-*).` };
    }
    const text = String(value);
    if (/[\r\n\0]/.test(text)) return { ok: false, reason: `The header ${name} contains a line break.` };
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
  const asked = Number(request.timeoutMs);
  const headersTimeoutMs = Number.isFinite(asked) && asked > 0
    ? Math.min(asked, LIMITS.maxHeadersTimeoutMs)
    : LIMITS.defaultHeadersTimeoutMs;
  return { ok: true, method, headers, body, headersTimeoutMs };
}

/** The host-permission pattern that covers exactly one origin. */
export function originPattern(origin) {
  return `${origin}/*`;
}

/** True when the manifest's own host permissions already cover the origin (no prompt). */
export function coveredByManifest(origin) {
  const url = new URL(origin);
  return url.protocol === "http:" && ["127.0.0.1", "localhost", "[::1]"].includes(url.hostname);
}

/** True when the manifest's content script already runs on pages of this origin. */
export function contentScriptBuiltIn(origin) {
  const url = new URL(origin);
  return url.protocol === "http:" && ["127.0.0.1", "localhost"].includes(url.hostname);
}
