// Compiles Python for Pyodide at set-up, in the vendored Pyodide itself (so the bytecode is
// exactly what the page's interpreter reads), for scripts/vendor.py:
//
//   node scripts/compile_bundle.mjs <web/vendor/pyodide dir> bundle <out.zip> <wheel>...
//   node scripts/compile_bundle.mjs <web/vendor/pyodide dir> stdlib <out.zip>
//   node scripts/compile_bundle.mjs <web/vendor/pyodide dir> wheel <out.whl> <wheel>
//
// bundle: unpacks every wheel into one tree and replaces each .py with its .pyc, as Pyodide's
// own packages do: the page imports without compiling, from half the bytes.
// stdlib: the runtime's python_stdlib.zip (sources only) with a .pyc beside each .py; Pyodide
// compiled every module it imports, its own start included, at every start.
// The .pyc are unchecked-hash (PEP 552): no file times, so the same input gives the same bytes;
// zips have sorted entries and a fixed timestamp. Data files and dist-info folders stay, and so
// does the source of a module marked KEEP_SOURCE (below).
import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { basename, resolve } from "node:path";

const [pyodideDir, mode, outPath, ...wheels] = process.argv.slice(2);
const usage = !pyodideDir || !outPath || !["bundle", "stdlib", "wheel"].includes(mode)
  || (mode === "bundle" && !wheels.length) || (mode === "wheel" && wheels.length !== 1);
if (usage) {
  console.error("usage: node scripts/compile_bundle.mjs <pyodide dir> bundle <out.zip> <wheel>... | stdlib <out.zip> | wheel <out.whl> <wheel>");
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
import importlib.util, marshal, os, zipfile

def pyc(source, filename):
    code = compile(source, filename, "exec", dont_inherit=True)
    unchecked_hash = (1).to_bytes(4, "little")
    return importlib.util.MAGIC_NUMBER + unchecked_hash + importlib.util.source_hash(source) + marshal.dumps(code)

def write_zip(path, files):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            out.writestr(info, files[name])

# A module whose source is data (agent_py/tools/python_driver.py, sent to the Python sandbox)
# says so with this line; it keeps its .py beside the .pyc.
KEEP_SOURCE = b"# agent_py: keep this source in the page's bundle"

files = {}
if ${JSON.stringify(mode)} in ("bundle", "wheel"):
    for name in sorted(os.listdir("/wheels")):
        with zipfile.ZipFile(f"/wheels/{name}") as wheel:
            for entry in wheel.namelist():
                data = wheel.read(entry)
                if entry.endswith(".py"):
                    files[entry + "c"] = pyc(data, entry)
                    if KEEP_SOURCE in data:  # read as text at run time: the source stays too
                        files[entry] = data
                else:
                    files[entry] = data
else:
    import sys

    stdlib = f"/lib/python{sys.version_info.major}{sys.version_info.minor}.zip"
    with zipfile.ZipFile(stdlib) as source:
        for entry in source.namelist():
            data = source.read(entry)
            files[entry] = data
            if entry.endswith(".py"):
                files[entry + "c"] = pyc(data, f"{stdlib}/{entry}")
write_zip("/out.zip", files)
`);
writeFileSync(outPath, pyodide.FS.readFile("/out.zip"));
