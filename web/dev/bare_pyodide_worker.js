// Module worker for bare_pyodide.html: times loadPyodide() with the vendored runtime and our
// lock, loading no package, and posts {pyodide_ms} (or {error}).
import { loadPyodide } from "../vendor/pyodide/pyodide.mjs";

const PYODIDE_URL = new URL("../vendor/pyodide/", import.meta.url).href;
const t0 = performance.now();
loadPyodide({ indexURL: PYODIDE_URL, lockFileURL: PYODIDE_URL + "pyodide-lock.json" }).then(
  () => postMessage({ pyodide_ms: Math.round(performance.now() - t0) }),
  (error) => postMessage({ error: String(error?.stack || error) }),
);
