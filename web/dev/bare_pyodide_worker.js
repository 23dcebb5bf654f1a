// Module worker for bare_pyodide.html: times loadPyodide() with the vendored runtime and our
// lock, loading no package, and posts {pyodide_ms} (or {error}). `?stdlib=compiled` starts it
// with the compiled standard library the page uses (../python-boot.js), else with the stock one.
import { loadPyodide } from "../vendor/pyodide/pyodide.mjs";
import { COMPILED_STDLIB } from "../worker/python-boot.js";

const PYODIDE_URL = new URL("../vendor/pyodide/", import.meta.url).href;
const compiled = new URL(import.meta.url).searchParams.get("stdlib") === "compiled";
const t0 = performance.now();
loadPyodide({
  indexURL: PYODIDE_URL,
  lockFileURL: PYODIDE_URL + "pyodide-lock.json",
  ...(compiled ? { stdLibURL: PYODIDE_URL + COMPILED_STDLIB } : {}),
}).then(
  () => postMessage({ pyodide_ms: Math.round(performance.now() - t0) }),
  (error) => postMessage({ error: String(error?.stack || error) }),
);
