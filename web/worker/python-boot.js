// Starts Pyodide with our packages; shared by agent.js (the agent worker's boot) and the dev boot check.
//
//   const { pyodide, phases } = await startPython(PYODIDE_URL);
//
// vendor/pyodide/pyodide-lock.json (written by scripts/vendor.py) lists the compiled wheels
// (pydantic-core) and one bundle of every pure-Python package, compiled to bytecode. The
// wheels load through Pyodide's `packages` option, which fetches them while the runtime
// starts (with a compiled standard library); the bundle is fetched from the start too,
// checked against the lock's sha256, and imported from as a zip on sys.path: no unpacking,
// no compiling. Phases are ms: `*_at` since the start, the others each phase's own time.
import { loadPyodide } from "../vendor/pyodide/pyodide.mjs";

export const BUNDLE_NAME = "agent-py-bundle"; // scripts/vendor.py's BUNDLE_NAME
// The standard library with bytecode beside each source (scripts/vendor.py, COMPILED_STDLIB):
// upstream ships sources only, so Pyodide compiled every module it imported, its own start
// included, at every start.
export const COMPILED_STDLIB = "python_stdlib_compiled.zip";
const BUNDLE_PATH = "/lib/agent_py_bundle.zip";
// No package we ship registers a pydantic plugin; without this switch pydantic looks for one
// by reading every package's metadata at its first model (the email package and more: about
// 150 ms in Pyodide). scripts/vendor.py checks that none does.
const PYTHON_ENV = { PYDANTIC_DISABLE_PLUGINS: "__all__" };

function hexToBase64(hex) {
  return btoa(String.fromCharCode(...hex.match(/../g).map((byte) => parseInt(byte, 16))));
}

export async function startPython(indexURL) {
  const t0 = performance.now();
  const phases = {};
  const lock = await (await fetch(indexURL + "pyodide-lock.json")).json();
  const bundle = lock.packages[BUNDLE_NAME];
  if (!bundle) throw new Error("pyodide-lock.json lists no package bundle: run scripts/vendor.py");
  const bundleBytes = fetch(indexURL + bundle.file_name, { integrity: `sha256-${hexToBase64(bundle.sha256)}` })
    .then((response) => {
      if (!response.ok) throw new Error(`${bundle.file_name}: HTTP ${response.status}; run scripts/vendor.py`);
      return response.arrayBuffer();
    })
    .then((bytes) => {
      phases.bundle_fetched_at = Math.round(performance.now() - t0);
      return bytes;
    });
  bundleBytes.catch(() => {}); // awaited below; this only keeps an early failure from going unhandled
  const pyodide = await loadPyodide({
    indexURL,
    lockFileContents: lock,
    packageBaseUrl: indexURL,
    stdLibURL: indexURL + COMPILED_STDLIB,
    env: PYTHON_ENV,
    packages: Object.keys(lock.packages).filter((name) => name !== BUNDLE_NAME),
  });
  phases.pyodide_and_wheels = Math.round(performance.now() - t0);
  const started = performance.now();
  pyodide.FS.writeFile(BUNDLE_PATH, new Uint8Array(await bundleBytes));
  pyodide.runPython(`import sys; sys.path.append(${JSON.stringify(BUNDLE_PATH)})`);
  phases.bundle_mount = Math.round(performance.now() - started);
  return { pyodide, phases };
}
