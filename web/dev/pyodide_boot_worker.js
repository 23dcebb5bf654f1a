// Module worker: boots Pyodide from web/vendor with our own lock file and every package it
// lists, as the page's worker does (../python-boot.js; no micropip, no network beyond this
// origin), runs pyodide_boot_checks.py, then event_loop_checks.py on agent_py's event loop, and
// posts one report: {timings, checks, versions, error?}.
import { startPython } from "../worker/python-boot.js";

const PYODIDE_URL = new URL("../vendor/pyodide/", import.meta.url).href;
const since = (t0) => Math.round(performance.now() - t0);

async function boot() {
  const t0 = performance.now();
  const timings = {};
  const checksSource = fetch(new URL("./pyodide_boot_checks.py", import.meta.url)).then((r) => r.text());
  const loopChecksSource = fetch(new URL("./event_loop_checks.py", import.meta.url)).then((r) => r.text());
  const { pyodide } = await startPython(PYODIDE_URL);
  timings.packages_loaded_ms = since(t0);
  const packages = Object.keys(pyodide.lockfile.packages);

  const result = JSON.parse(await pyodide.runPythonAsync(await checksSource));
  timings.imports_done_ms = since(t0);
  // The page's event loop, installed as the agent worker does (page-session.js), between tasks; its checks run on it.
  pyodide.runPython("import agent_py.page.loop; agent_py.page.loop.install()");
  Object.assign(result.checks, JSON.parse(await pyodide.runPythonAsync(await loopChecksSource)));
  return { timings, packages, ...result };
}

boot().then(
  (report) => postMessage(report),
  (error) => postMessage({ error: String(error && error.stack || error), timings: {}, checks: {} }),
);
