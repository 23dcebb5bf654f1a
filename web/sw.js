// Service worker: makes the page work offline after the first visit.
//
// Install precaches the app shell (SHELL_FILES) and every file of vendor/manifest.json
// (Pyodide, wheels, lock, WebLLM, the CPU engine's wasm, marked, DOMPurify) into one versioned cache, less
// those the manifest marks "precache": false (vendored for set-up and benchmarks only);
// activate deletes older versions. Fetch serves vendor files cache first (they are pinned and
// versioned by the manifest) and the app shell network first, falling back to the cache
// when offline, so a change to the page is picked up at the next online visit.
// What is never cached (it passes straight to the network):
//   - cross-origin requests: model weights come from the model URL the user configured, and
//     WebLLM keeps them in its own cache;
//   - same-origin .gguf/.bin/.safetensors files and Range requests (weights, gigabytes);
//   - anything that was not precached: it is fetched from the network each time, not stored.
// Responses are stored with the status and headers the server sent, so pages and workers
// served offline keep their COOP/COEP/CORP headers and stay cross-origin isolated.
//
// Versions: the cache is named from APP_VERSION and the vendor manifest's version, which
// sw-register.js passes as ?v=. A new `scripts/vendor.py` output therefore installs a new
// version by itself; shell files refresh themselves (network first). Bump APP_VERSION only
// when this file's caching rules change.
//
// Its messages to pages and from them are protocol.js's ServiceWorkerMessage; this classic
// script cannot import that module, so it writes the same names (tests/web/test_protocol.py
// checks them).

const APP_VERSION = "2";
const CACHE_PREFIX = "agent_py-";
const VENDOR_VERSION = new URL(self.location.href).searchParams.get("v");
const CACHE_NAME = `${CACHE_PREFIX}${APP_VERSION}-${VENDOR_VERSION}`;
const BASE = new URL("./", self.location.href).href;
const MANIFEST_URL = new URL("vendor/manifest.json", BASE).href;

// Files of the page itself, relative to this file. A missing one is skipped, not fatal;
// tests/web/test_offline.py checks that this list is exactly the files of web/ outside
// vendor/, dev/ and models/ (sw.js itself aside).
const SHELL_FILES = [
  "index.html",
  "models.json",
  "style.css",
  "protocol.js",
  "sandbox.html",
  "python-sandbox.html",
  "oauth-callback.html",
  "oauth-callback.js",
  "ui/app.js",
  "ui/agent-link.js",
  "ui/conversation.js",
  "ui/driver-api.js",
  "ui/progress-view.js",
  "ui/run-controls.js",
  "ui/settings-panel.js",
  "ui/status-line.js",
  "ui/render.js",
  "ui/tool-host.js",
  "ui/sandbox-host.js",
  "ui/plan-review.js",
  "ui/python-sandbox-host.js",
  "ui/servers.js",
  "ui/extension-relay.js",
  "ui/user-prompts.js",
  "ui/sessions.js",
  "ui/cpu-models.js",
  "ui/waiting.js",
  "ui/sw-register.js",
  "ui/workspace-panel.js",
  "ui/page-reader.js",
  "worker/worker.js",
  "worker/agent.js",
  "worker/bridge.js",
  "worker/engine-choice.js",
  "worker/engine-early.js",
  "worker/page-session.js",
  "worker/webllm-cache.js",
  "worker/python-boot.js",
  "worker/http-port.js",
  "worker/user-port.js",
  "worker/engine-port.js",
  "worker/outbox.js",
  "worker/step-clock.js",
  "workspace.js",
  "worker/engines/cpu.js",
  "worker/engines/cpu-api.js",
  "worker/engines/cpu-gguf.js",
  "worker/engines/cpu-model-store.js",
  "worker/engines/cpu-rpc.js",
  "worker/engines/cpu-schema.js",
  "worker/engines/cpu-state-store.js",
  "worker/engines/cpu-threads.js",
  "worker/engines/cpu-worker.js",
  "worker/engines/errors.js",
  "worker/engines/gpu.js",
  "worker/engines/scripted.js",
  "worker/engines/webllm.js",
];

const NEVER_CACHED = /\.(gguf|bin|safetensors)$/i;
const PARALLEL_FETCHES = 4;
const NETWORK_TIMEOUT_MS = 3_000;

async function notify(message) {
  const clients = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  for (const client of clients) client.postMessage({ cache: CACHE_NAME, ...message });
}

function hex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
}

// The same response with its body read: its headers and status as sent, never `redirected`
// (a redirected response cannot answer a navigation).
function stored(response, body) {
  return new Response(body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

// Vendor files of older caches whose sha256 matches: a shell-only update then copies them
// locally instead of downloading tens of megabytes again.
async function previousCopies() {
  const copies = new Map();
  for (const name of await caches.keys()) {
    if (!name.startsWith(CACHE_PREFIX) || name === CACHE_NAME) continue;
    const cache = await caches.open(name);
    const manifest = await cache.match(MANIFEST_URL);
    if (!manifest) continue;
    try {
      for (const file of (await manifest.json()).files) copies.set(`${file.path}:${file.sha256}`, cache);
    } catch { /* an unreadable old manifest only means no reuse */ }
  }
  return copies;
}

async function fetchVendorFile(file) {
  const url = new URL(file.path, BASE).href;
  let lastError = "";
  // "no-cache" revalidates (cheap when unchanged); "reload" bypasses an HTTP cache that held
  // a stale copy under the same URL.
  for (const mode of ["no-cache", "reload"]) {
    const response = await fetch(url, { cache: mode });
    if (!response.ok) throw new Error(`${file.path}: HTTP ${response.status} ${response.statusText}`);
    const body = await response.arrayBuffer();
    const sha256 = hex(await crypto.subtle.digest("SHA-256", body));
    if (sha256 === file.sha256) return stored(response, body);
    lastError = `${file.path}: sha256 ${sha256} differs from the manifest (${file.sha256})`;
  }
  throw new Error(`${lastError}; run scripts/vendor.py again`);
}

async function fetchShellFile(path) {
  try {
    const response = await fetch(new URL(path, BASE), { cache: "reload" });
    return response.ok ? stored(response, await response.arrayBuffer()) : null;
  } catch {
    return null; // unreachable: same as missing for an optional file
  }
}

async function precache() {
  if (!VENDOR_VERSION) {
    throw new Error("sw.js was registered without ?v=<vendor manifest version>: use sw-register.js");
  }
  const started = Date.now();
  const manifestResponse = await fetch(MANIFEST_URL, { cache: "no-cache" });
  if (!manifestResponse.ok) {
    throw new Error(`vendor/manifest.json: HTTP ${manifestResponse.status}; run scripts/vendor.py`);
  }
  const manifestBody = await manifestResponse.arrayBuffer();
  const manifest = JSON.parse(new TextDecoder().decode(manifestBody));
  if (manifest.version !== VENDOR_VERSION) {
    throw new Error(`vendor/manifest.json changed (${VENDOR_VERSION} -> ${manifest.version}) during the update; reload the page`);
  }

  const cache = await caches.open(CACHE_NAME);
  const copies = await previousCopies();
  // A file marked "precache": false is vendored for set-up and benchmarks, never loaded here.
  const vendorFiles = manifest.files.filter((file) => file.precache !== false);
  const jobs = [
    ...SHELL_FILES.map((path) => ({ path, size: 0, shell: true })),
    ...vendorFiles.map((file) => ({ ...file, shell: false })),
  ];
  const totalBytes = vendorFiles.reduce((sum, file) => sum + file.size, 0);
  let done = 0, bytes = 0, reused = 0;
  const skipped = [];

  async function run(job) {
    const url = new URL(job.path, BASE).href;
    if (job.shell) {
      const response = await fetchShellFile(job.path);
      if (response) await cache.put(url, response);
      else skipped.push(job.path);
    } else if (await cache.match(url)) {
      // Left by an earlier attempt at this same version: it passed the sha256 check then.
    } else if (copies.has(`${job.path}:${job.sha256}`)) {
      await cache.put(url, await copies.get(`${job.path}:${job.sha256}`).match(url));
      reused += 1;
    } else {
      await cache.put(url, await fetchVendorFile(job));
    }
    done += 1;
    bytes += job.size;
    await notify({ type: "sw-progress", done, total: jobs.length, bytes, totalBytes, file: job.path });
  }

  const queue = [...jobs];
  await Promise.all(Array.from({ length: PARALLEL_FETCHES }, async () => {
    while (queue.length) await run(queue.shift());
  }));
  // The manifest goes in last: a cache holding it is complete (previousCopies relies on it).
  await cache.put(MANIFEST_URL, stored(manifestResponse, manifestBody));
  await notify({
    type: "sw-installed", files: jobs.length - skipped.length, bytes: totalBytes, reused, skipped,
    ms: Date.now() - started,
  });
}

self.addEventListener("install", (event) => {
  event.waitUntil(precache().then(
    () => self.skipWaiting(),
    async (error) => {
      await notify({ type: "sw-error", message: `Offline copy not installed: ${error.message}` });
      throw error;
    },
  ));
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    const old = (await caches.keys()).filter((n) => n.startsWith(CACHE_PREFIX) && n !== CACHE_NAME);
    await Promise.all(old.map((name) => caches.delete(name)));
    await self.clients.claim();
  })());
});

async function cacheFirst(request) {
  const cache = await caches.open(CACHE_NAME);
  const url = new URL(request.url);
  // "/" and "/?session=…" are the same page: index.html.
  const hit = request.mode === "navigate"
    ? await cache.match(new URL(url.pathname.endsWith("/") ? "index.html" : url.pathname, url), { ignoreSearch: true })
    : await cache.match(request);
  return hit || fetch(request);
}

// The page itself and the version source must be fresh when online, or an update would never
// be noticed; offline (or too slow), the cached copy answers. Fresh shell files refresh it.
async function networkFirst(request, cacheKey) {
  const cache = await caches.open(CACHE_NAME);
  try {
    const response = await fetch(request, { signal: AbortSignal.timeout(NETWORK_TIMEOUT_MS) });
    if (response.ok) {
      if (cacheKey !== MANIFEST_URL && !response.redirected) {
        await cache.put(cacheKey, stored(response.clone(), await response.clone().arrayBuffer()));
      }
      return response;
    }
  } catch { /* offline or too slow */ }
  return (await cache.match(cacheKey)) || fetch(request);
}

function shellKey(request) {
  const url = new URL(request.url);
  if (request.mode === "navigate" && url.pathname.endsWith("/")) return new URL("index.html", url).href;
  const path = url.href.split("?")[0].slice(BASE.length);
  return SHELL_FILES.includes(path) ? url.href.split("?")[0] : null;
}

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET") return;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin) return;
  if (NEVER_CACHED.test(url.pathname) || request.headers.has("range")) return;
  const shell = shellKey(request);
  if (url.href.split("?")[0] === MANIFEST_URL) event.respondWith(networkFirst(request, MANIFEST_URL));
  else if (shell) event.respondWith(networkFirst(request, shell));
  else event.respondWith(cacheFirst(request));
});

async function cacheExtra(urls) {
  const cache = await caches.open(CACHE_NAME);
  let cached = 0;
  for (const raw of urls) {
    const url = new URL(raw, BASE);
    if (url.origin !== self.location.origin) throw new Error(`not same-origin: ${raw}`);
    const response = await fetchShellFile(url.href);
    if (response) {
      await cache.put(url.href, response);
      cached += 1;
    } else if (!(await cache.match(url.href))) {
      throw new Error(`${url.pathname} could not be fetched`);
    }
  }
  return cached;
}

self.addEventListener("message", (event) => {
  const port = event.ports[0];
  if (event.data?.type !== "sw-cache-extra" || !port) return;
  event.waitUntil(cacheExtra(event.data.urls ?? []).then(
    (cached) => port.postMessage({ ok: true, cached }),
    (error) => port.postMessage({ ok: false, error: String(error.message || error) }),
  ));
});
