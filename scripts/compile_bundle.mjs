// Compiles pure-Python wheels to Pyodide bytecode, for scripts/vendor.py.
//
//   node scripts/compile_bundle.mjs <web/vendor/pyodide dir> <out.zip> <wheel>...
//
// Unpacks every wheel into one tree inside the vendored Pyodide itself (so the bytecode is
// exactly what the page's interpreter reads) and replaces each .py with its .pyc, as Pyodide's
// own packages do: the page then imports without compiling, and unpacks half the bytes.
// Unchecked-hash .pyc (PEP 552) carry no file times, so the same wheels give the same bytes;
// the zip has sorted entries and a fixed timestamp. Data files and dist-info folders stay.
import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { basename, resolve } from "node:path";

const [pyodideDir, outPath, ...wheels] = process.argv.slice(2);
if (!pyodideDir || !outPath || !wheels.length) {
  console.error("usage: node scripts/compile_bundle.mjs <pyodide dir> <out.zip> <wheel>...");
  process.exit(2);
}
const indexURL = resolve(pyodideDir) + "/";
const { loadPyodide } = await import(pathToFileURL(indexURL + "pyodide.mjs").href);
// An empty lock with the runtime's ABI: nothing is installed from a lock here.
const pins = JSON.parse(readFileSync(new URL("./vendor-lock.json", import.meta.url), "utf8"));
const lockFileContents = { info: pins.pyodide.lock_info, packages: {} };
const pyodide = await loadPyodide({ indexURL, lockFileContents, packageBaseUrl: indexURL });

pyodide.FS.mkdirTree("/wheels");
for (const wheel of wheels) pyodide.FS.writeFile(`/wheels/${basename(wheel)}`, readFileSync(wheel));
pyodide.runPython(`
import compileall, os, py_compile, zipfile

TREE = "/bundle"
for name in sorted(os.listdir("/wheels")):
    with zipfile.ZipFile(f"/wheels/{name}") as wheel:
        wheel.extractall(TREE)
if not compileall.compile_dir(
    TREE, quiet=1, legacy=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
):
    raise SystemExit("some modules did not compile")
for folder, _, files in os.walk(TREE):
    for f in files:
        if f.endswith(".py") and f + "c" in files:
            os.remove(os.path.join(folder, f))
paths = sorted(
    os.path.relpath(os.path.join(folder, f), TREE)
    for folder, _, files in os.walk(TREE)
    for f in files
)
with zipfile.ZipFile("/bundle.zip", "w", zipfile.ZIP_DEFLATED) as out:
    for path in paths:
        info = zipfile.ZipInfo(path, (1980, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        with open(os.path.join(TREE, path), "rb") as f:
            out.writestr(info, f.read())
`);
writeFileSync(outPath, pyodide.FS.readFile("/bundle.zip"));
