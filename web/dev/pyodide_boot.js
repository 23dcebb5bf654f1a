// Starts the boot worker and draws its report. The full report also goes to
// window.bootReport and <body data-status="ok|failed"> so tests can read it.

const started = performance.now();
const timings = document.getElementById("timings");
const checks = document.getElementById("checks");
const worker = new Worker(new URL("./pyodide_boot_worker.js", import.meta.url), { type: "module" });

function row(table, cells, failed = false) {
  const tr = table.insertRow();
  if (failed) tr.className = "failed";
  for (const cell of cells) tr.insertCell().textContent = String(cell);
}

function finish(report) {
  report.timings.page_total_ms = Math.round(performance.now() - started);
  window.bootReport = report;
  const failed = report.error || Object.values(report.checks).some((c) => !c.ok);
  document.body.dataset.status = failed ? "failed" : "ok";
  document.getElementById("status").textContent = report.error
    ? `Boot failed: ${report.error}`
    : failed ? "Some checks failed." : "Pyodide booted; every package imported.";
  for (const [name, ms] of Object.entries(report.timings)) row(timings, [name, ms]);
  for (const [name, check] of Object.entries(report.checks)) {
    row(checks, [name, check.ok ? "ok" : "FAILED", `${check.ms} ms`, check.detail], !check.ok);
  }
}

worker.onmessage = (event) => finish(event.data);
worker.onerror = (event) => finish({ error: event.message || "worker failed to start", timings: {}, checks: {} });
