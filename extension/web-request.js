// What webRequest saw of the bridge's own requests: redirects and the address each answer came
// from. fetch(..., {redirect: "manual"}) in a service worker gives an opaque response: no status,
// no Location. The webRequest API does see the redirect (for hosts this extension may access),
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
const WEBREQUEST_WAIT_MS = 2_000; // for webRequest to report what fetch() already saw
const WEBREQUEST_KEEP_MS = 10_000; // a report nobody asked for (the request was aborted) expires

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
export function watch(origin) {
  if (watchedOrigins.has(origin)) return;
  const nothing = () => {};
  chrome.webRequest.onBeforeRedirect.addListener(nothing, { urls: ["<all_urls>"], tabId: -1 });
  chrome.webRequest.onResponseStarted.addListener(nothing, { urls: ["<all_urls>"], tabId: -1 });
  watchedOrigins.add(origin);
}
chrome.permissions.onRemoved.addListener(() => watchedOrigins.clear());

/** What webRequest saw of `method` `url` ({location, status, ip, at}), or null when it said
 * nothing within WEBREQUEST_WAIT_MS. */
export function reportOf(method, url) {
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
