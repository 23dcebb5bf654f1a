// Registers the service worker, adds this page's own files to its cache (they are not part of
// the app shell), then boots Pyodide with the worker of pyodide_boot.html. Progress and the
// result go to window.offlineReport and <body data-status="registering|caching|booting|ready|
// failed">; a test reloads it with the server stopped and expects "ready" again.
// ?boot=no stops once the service worker is active (for tests about caching only).
import { registerServiceWorker, cacheForOffline } from "../ui/sw-register.js";

const started = performance.now();
const since = () => Math.round(performance.now() - started);
const status = document.getElementById("status");
const report = {
  crossOriginIsolated: globalThis.crossOriginIsolated,
  controlledAtLoad: Boolean(navigator.serviceWorker?.controller),
  progress: [],
  timings: {},
};
window.offlineReport = report;

function show(state, text) {
  document.body.dataset.status = state;
  status.textContent = text;
  status.className = state === "failed" ? "failed" : "";
  document.getElementById("report").textContent = JSON.stringify(report, null, 1);
}

function bootPyodide() {
  const worker = new Worker(new URL("./pyodide_boot_worker.js", import.meta.url), { type: "module" });
  return new Promise((resolve, reject) => {
    worker.onmessage = (event) => { worker.terminate(); resolve(event.data); };
    worker.onerror = (event) => reject(new Error(event.message || "the boot worker failed to start"));
  });
}

async function main() {
  const sw = await registerServiceWorker({
    onProgress: (p) => {
      if (p.type === "sw-installed") report.installed = p;
      else report.progress.push([p.done, p.total]);
      show("caching", `Caching for offline use: ${p.done ?? p.files}/${p.total ?? p.files} files`);
    },
  });
  report.timings.sw_active_ms = since();
  report.vendorVersion = sw.vendorVersion;
  report.controlled = sw.controlled;
  await cacheForOffline([
    "offline_harness.html", "offline_harness.js", "pyodide_boot_worker.js", "pyodide_boot_checks.py",
    "event_loop_checks.py",
  ]);
  report.timings.page_cached_ms = since();
  if (new URLSearchParams(location.search).get("boot") === "no") {
    show("ready", "ready (Pyodide not booted: ?boot=no)");
    return;
  }

  show("booting", "Booting Pyodide…");
  const boot = await bootPyodide();
  report.timings.pyodide_ready_ms = since();
  report.boot = boot;
  const failed = boot.error || Object.values(boot.checks).some((check) => !check.ok);
  if (failed) throw new Error(boot.error || "some imports failed: see boot.checks");
  show("ready", "ready");
}

main().catch((error) => {
  report.error = String(error.message || error);
  show("failed", report.error);
});
