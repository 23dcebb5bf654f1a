// Registers sw.js, the offline copy of the page, from any page under web/ (index.html or a
// dev page): URLs are resolved against this module, not against the page.
//
//   import { registerServiceWorker } from "./sw-register.js";
//   registerServiceWorker({ onProgress: (p) => show(`${p.done}/${p.total}`) })
//     .then(({ installed }) => installed && show("Ready for offline use"))
//     .catch((error) => warn(error.message));   // the page works online without it
//
// It resolves once the newest version is active and controls the page. A first visit (or a new
// version) precaches about 32 MB first; call it without awaiting it before booting.

import { ServiceWorkerMessage, cacheExtra } from "../protocol.js";

const SW_URL = new URL("../sw.js", import.meta.url);
const SCOPE = new URL("../", import.meta.url).href;
const MANIFEST_URL = new URL("../vendor/manifest.json", import.meta.url);
const CLAIM_WAIT_MS = 1_000;
const ERROR_WAIT_MS = 500;
const SUMMARY_WAIT_MS = 2_000;

function unavailable(detail) {
  return new Error(`Offline use is unavailable: ${detail}`);
}

// The vendor version names the cache; it goes in the script URL so that a new vendor build
// changes the URL and installs a new version. When online the service worker fetches the
// manifest from the network; offline it answers from its cache.
async function vendorVersion() {
  let response;
  try {
    response = await fetch(MANIFEST_URL, { cache: "no-cache" });
  } catch (error) {
    throw unavailable(`vendor/manifest.json could not be read (${error.message}).`);
  }
  if (!response.ok) {
    throw unavailable(`vendor/manifest.json answered HTTP ${response.status}; run scripts/vendor.py.`);
  }
  const { version } = await response.json();
  if (!version) throw unavailable("vendor/manifest.json has no version; run scripts/vendor.py.");
  return version;
}

function nextState(worker) {
  return new Promise((resolve) => {
    worker.addEventListener("statechange", () => resolve(worker.state), { once: true });
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Follows the registration until a worker is activated; a newer version appearing meanwhile
// is followed too. A worker that goes redundant before ever activating failed to install.
// Resolves to whether a worker was installed meanwhile.
async function untilActive(registration, installError) {
  let installed = false;
  for (;;) {
    const pending = registration.installing || registration.waiting;
    if (!pending) {
      const active = registration.active;
      if (!active) throw unavailable("the service worker disappeared (unregistered by another tab?).");
      if (active.state === "activated") return installed;
      await nextState(active);
      continue;
    }
    installed = true;
    const state = await nextState(pending);
    if (state === "redundant" && !registration.installing && !registration.waiting
        && registration.active !== pending) {
      if (!installError()) await sleep(ERROR_WAIT_MS); // its message may still be on the way
      throw unavailable(installError() || "the offline copy failed to install (see the service worker's console).");
    }
  }
}

// clients.claim() runs during activation; the page's controller is usually set already.
async function untilControlled() {
  const container = navigator.serviceWorker;
  if (container.controller) return true;
  await Promise.race([
    new Promise((resolve) => container.addEventListener("controllerchange", resolve, { once: true })),
    sleep(CLAIM_WAIT_MS),
  ]);
  return Boolean(container.controller);
}

/**
 * Register ./sw.js (classic script, scope ./) and resolve once it is active.
 * onProgress receives the worker's progress messages and, at the end of an install, its
 * summary (protocol.js, ServiceWorkerMessage).
 * Resolves to {registration, vendorVersion, installed (a version was installed by this call),
 * controlled (this page's requests now go through it)}; rejects with an Error saying why.
 */
export async function registerServiceWorker({ onProgress } = {}) {
  if (!("serviceWorker" in navigator)) {
    throw unavailable("this browser has no service workers here (they need https or localhost, and some private modes turn them off).");
  }
  const version = await vendorVersion();
  let error = null;
  let summarized;
  const summary = new Promise((resolve) => { summarized = resolve; });
  const listen = (event) => {
    const data = event.data ?? {};
    if (data.type === ServiceWorkerMessage.ERROR) error = data.message;
    if (data.type === ServiceWorkerMessage.PROGRESS || data.type === ServiceWorkerMessage.INSTALLED) onProgress?.(data);
    if (data.type === ServiceWorkerMessage.INSTALLED) summarized();
  };
  navigator.serviceWorker.addEventListener("message", listen);
  navigator.serviceWorker.startMessages(); // else messages wait for the end of parsing
  try {
    const script = new URL(SW_URL);
    script.searchParams.set("v", version);
    let registration;
    try {
      registration = await navigator.serviceWorker.register(script, { scope: SCOPE, updateViaCache: "none" });
    } catch (cause) {
      throw unavailable(`the service worker could not be registered (${cause.message}).`);
    }
    // register() with an unchanged URL does not look for a changed sw.js (a new APP_VERSION).
    // Offline the check fails, which is fine: the installed version keeps working.
    if (!registration.installing && !registration.waiting) await registration.update().catch(() => {});
    const installed = await untilActive(registration, () => error);
    // Messages and state changes travel on different queues: the install's summary can arrive
    // after the activation is seen. Wait a little for it, so onProgress always gets it.
    if (installed) await Promise.race([summary, sleep(SUMMARY_WAIT_MS)]);
    return { registration, vendorVersion: version, installed, controlled: await untilControlled() };
  } finally {
    navigator.serviceWorker.removeEventListener("message", listen);
  }
}

/**
 * Keep same-origin files outside the app shell (a dev page and its scripts) in the current
 * offline cache. URLs are relative to the page. Offline, files already kept count as kept.
 */
export async function cacheForOffline(urls) {
  const registration = await navigator.serviceWorker.ready;
  const { port1, port2 } = new MessageChannel();
  const reply = new Promise((resolve) => { port1.onmessage = (event) => resolve(event.data); });
  registration.active.postMessage(
    cacheExtra(urls.map((url) => new URL(url, document.baseURI).href)),
    [port2],
  );
  const answer = await reply;
  port1.close();
  if (!answer.ok) throw new Error(`Could not keep files for offline use: ${answer.error}`);
  return answer.cached;
}
