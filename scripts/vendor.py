#!/usr/bin/env python3
"""Build web/vendor/: every third-party file the page serves, so it runs with no network.

    python scripts/vendor.py            # build or refresh web/vendor (fast when up to date)
    python scripts/vendor.py --relock   # record hashes after editing a version in
                                        # scripts/vendor-lock.json (fetches what is not cached)

What it makes (pins live in scripts/vendor-lock.json; downloads and what is compiled from them
are kept in the machine's build cache, ~/.cache/agent_py/vendor/, where a fresh clone finds
them: downloads are checked against the pins, compiled files against the sha256 written
beside them, on every use; AGENT_PY_BUILD_CACHE=0 keeps them in .artifacts/vendor-cache/):
- web/vendor/<dest>/...        files picked from npm tarballs (`npm pack`, sha512-checked)
- web/vendor/pyodide/*.whl     the compiled PyPI wheels for Pyodide (pydantic-core), their
                               Python sources replaced by bytecode
- web/vendor/pyodide/agent_py_bundle-*.zip   one archive of every pure-Python wheel (PyPI,
                               `pip download`, sha256-checked; the rpds-py stand-in from
                               scripts/rpds_standin/; agent_py itself), compiled to Pyodide's
                               bytecode by scripts/compile_bundle.mjs: one fetch, one unpack,
                               no compiling at import in the page
- web/vendor/pyodide/python_stdlib_compiled.zip   Pyodide's standard library (sources only
                               upstream) with the bytecode of each module beside it
- web/vendor/pyodide/pyodide-lock.json   a Pyodide lock listing exactly those files
- web/vendor/manifest.json     path, size and sha256 of every vendored file, for precaching
                               (web/vendor/llama/ included: the CPU engine's WebAssembly,
                               built by scripts/cpu_engine/build.sh)

Stdlib only; it shells out to `npm`, `node` and `python -m pip` (run it with the project's
venv).

One file, over 400 lines: set-up runs it as a script with the standard library alone, before
the project is installed (as the tests' fixtures do), so its steps (npm, wheels, bytecode, the
lock and the manifest, each a section below) stay in it.
"""

from __future__ import annotations

import argparse
import base64
import fnmatch
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LOCK_PATH = ROOT / "scripts" / "vendor-lock.json"
WEB = ROOT / "web"
VENDOR = WEB / "vendor"
WHEEL_DIR = VENDOR / "pyodide"  # next to pyodide-lock.json: lock file names stay bare
CACHE = ROOT / ".artifacts" / "vendor-cache"  # this clone's: its state, the agent_py bundle
STATE_PATH = CACHE / "state.json"
# The machine's build cache (scripts/build_cache.sh), shared by the clones on this machine.
SHARED = (
    Path(
        os.environ.get("AGENT_PY_BUILD_CACHE_DIR")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agent_py"
    )
    / "vendor"
    if os.environ.get("AGENT_PY_BUILD_CACHE", "1") != "0"
    else CACHE
)
MANIFEST_NAME = "manifest.json"
CPU_ENGINE_DIR = "llama"
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed timestamp: same sources, same wheel bytes
BUNDLE_NAME = "agent-py-bundle"
COMPILED_STDLIB = "python_stdlib_compiled.zip"  # web/worker/python-boot.js loads it
# Vendored but never loaded by the page: the stock standard library is the source of
# COMPILED_STDLIB and the baseline of scripts/bench_page.py. The manifest marks it
# "precache": false, so the service worker leaves it out of every user's offline copy.
NOT_PRECACHED = {"vendor/pyodide/python_stdlib.zip"}
COMPILE_BUNDLE = ROOT / "scripts" / "compile_bundle.mjs"
LOCK = json.loads(LOCK_PATH.read_text())  # the pins; --relock rewrites their hashes
PYODIDE_PIN = next(n["integrity"] for n in LOCK["npm"] if n["package"] == "pyodide")


class VendorError(RuntimeError):
    """A step failed in a way the user has to fix (network, registry, lock mismatch)."""


def canonical(name: str) -> str:
    """PEP 503 name, also the key Pyodide uses in its lock."""
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sri_sha512(path: Path) -> str:
    digest = hashlib.sha512(path.read_bytes()).digest()
    return "sha512-" + base64.b64encode(digest).decode()


def write_if_changed(path: Path, data: bytes) -> bool:
    """Atomic write that leaves an identical file alone (keeps mtimes, so HTTP caches hold)."""
    if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return True


class HashCache:
    """sha256 of files, recomputed only when size or mtime changed (as git's index does)."""

    def __init__(self, entries: dict[str, list]) -> None:
        self.entries = entries

    def sha256(self, path: Path) -> str:
        st = path.stat()
        key = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        hit = self.entries.get(key)
        if hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns:
            return hit[2]
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        self.entries[key] = [st.st_size, st.st_mtime_ns, digest.hexdigest()]
        return digest.hexdigest()

    def matches(self, path: Path, sha256: str) -> bool:
        return path.is_file() and self.sha256(path) == sha256


def run(cmd: list[str], cwd: Path | None = None) -> str:
    env = {**os.environ, "npm_config_update_notifier": "false", "npm_config_fund": "false"}
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise VendorError(
            f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr.strip()[-2000:]}"
        )
    return proc.stdout


# ---------------------------------------------------------------- npm packages


def npm_tarball_name(package: str, version: str) -> str:
    # `npm pack` names scoped packages "scope-name-version.tgz" without the "@".
    return f"{package.lstrip('@').replace('/', '-')}-{version}.tgz"


def fetch_npm(specs: list[dict], relock: bool) -> dict[str, Path]:
    """Make sure every pinned tarball is in the cache and matches its integrity."""
    cache = SHARED / "npm"
    cache.mkdir(parents=True, exist_ok=True)
    paths = {s["package"]: cache / npm_tarball_name(s["package"], s["version"]) for s in specs}
    missing = [s for s in specs if relock or not paths[s["package"]].is_file()]
    if missing:
        out = run(
            ["npm", "pack", "--json", "--loglevel=error", "--pack-destination", str(cache)]
            + [f"{s['package']}@{s['version']}" for s in missing]
        )
        for packed in json.loads(out):
            if packed["filename"] != paths[packed["name"]].name:
                raise VendorError(f"npm pack wrote {packed['filename']}, expected another name")
    for spec in specs:
        actual = sri_sha512(paths[spec["package"]])
        if relock:
            spec["integrity"] = actual
        elif actual != spec["integrity"]:
            paths[spec["package"]].unlink()
            raise VendorError(
                f"{spec['package']}@{spec['version']}: tarball integrity {actual} differs from "
                f"the pin in {LOCK_PATH.name}; deleted it. Re-run, or --relock if the pin is wrong."
            )
    return paths


def extract_npm(spec: dict, tarball: Path, state: dict, hashes: HashCache) -> list[Path]:
    """Copy the chosen files of one tarball to web/vendor/<dest>/ unless already there."""
    dest = VENDOR / spec["dest"]
    outputs = {src: dest / out for src, out in spec["files"].items()}
    done = state.setdefault("npm", {}).get(spec["package"], {})
    if done.get("integrity") == spec["integrity"] and all(
        hashes.matches(outputs[src], done.get("files", {}).get(src, "")) for src in outputs
    ):
        return list(outputs.values())

    with tarfile.open(tarball, "r:gz") as tar:
        members = {m.name.removeprefix("package/"): m for m in tar.getmembers() if m.isfile()}
        record = {}
        for src, out in outputs.items():
            if src not in members:
                raise VendorError(f"{spec['package']}@{spec['version']} has no file {src}")
            data = tar.extractfile(members[src]).read()
            write_if_changed(out, data)
            record[src] = sha256_bytes(data)
        if spec["package"] == "pyodide":
            check_pyodide_lock_info(
                json.loads(tar.extractfile(members["pyodide-lock.json"]).read())
            )
    state["npm"][spec["package"]] = {"integrity": spec["integrity"], "files": record}
    return list(outputs.values())


def check_pyodide_lock_info(upstream_lock: dict) -> None:
    """Our lock must carry the ABI of the runtime we ship, or loadPyodide rejects it."""
    pinned = LOCK["pyodide"]["lock_info"]
    for key, value in upstream_lock["info"].items():
        if pinned.get(key) != value:
            raise VendorError(
                f"pyodide's own lock says info.{key}={value!r}, {LOCK_PATH.name} says "
                f"{pinned.get(key)!r}: update pyodide.lock_info there"
            )


# ---------------------------------------------------------------- PyPI wheels


def fetch_wheels(specs: list[dict], relock: bool, hashes: HashCache) -> dict[str, Path]:
    cache = SHARED / "wheels"
    cache.mkdir(parents=True, exist_ok=True)
    target = LOCK["pyodide"]
    missing = [s for s in specs if relock or not (cache / s.get("file", "?")).is_file()]
    if missing:
        pip_download = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
        # Pure wheels match these flags too; compiled ones must be built for Pyodide's ABI.
        target_flags = [
            "--only-binary=:all:",
            f"--platform={target['wheel_platform']}",
            f"--python-version={target['python_version']}",
            "--implementation=cp",
            f"--abi={target['abi']}",
        ]
        pins = [f"{s['name']}=={s['version']}" for s in missing]
        run([*pip_download, *target_flags, f"--dest={cache}", *pins])
        if relock:
            for spec in missing:
                candidates = [
                    p.name
                    for p in cache.glob("*.whl")
                    if canonical(p.name.split("-")[0]) == canonical(spec["name"])
                    and p.name.split("-")[1] == spec["version"]
                ]
                if len(candidates) != 1:
                    raise VendorError(f"cannot tell which wheel is {spec['name']}: {candidates}")
                spec["file"] = candidates[0]
    paths = {}
    for spec in specs:
        path = cache / spec["file"]
        if not path.is_file():
            raise VendorError(f"pip did not download {spec['file']}: check the pin")
        actual = hashes.sha256(path)
        if relock:
            spec["sha256"] = actual
        elif actual != spec["sha256"]:
            path.unlink()
            raise VendorError(
                f"{spec['file']}: sha256 {actual} differs from the pin in {LOCK_PATH.name}; "
                "deleted it. Re-run, or --relock if the pin is wrong."
            )
        paths[spec["name"]] = path
    return paths


# ---------------------------------------------------------------- wheels we build


def build_wheel(
    name: str, version: str, files: dict[str, bytes], requires: list[str]
) -> tuple[str, bytes]:
    """A pure py3-none-any wheel from in-memory files; identical input gives identical bytes."""
    dist = re.sub(r"[-_.]+", "_", name).lower()
    dist_info = f"{dist}-{version}.dist-info"
    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    metadata += [f"Requires-Dist: {r}" for r in requires]
    files = dict(files)
    files[f"{dist_info}/METADATA"] = ("\n".join(metadata) + "\n").encode()
    files[f"{dist_info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: scripts/vendor.py\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n"
    )
    record = []
    for arcname in sorted(files):
        digest = base64.urlsafe_b64encode(hashlib.sha256(files[arcname]).digest()).rstrip(b"=")
        record.append(f"{arcname},sha256={digest.decode()},{len(files[arcname])}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        # dist-info last, as wheel builders do; everything else sorted.
        for arcname in sorted(files, key=lambda a: (a.startswith(dist_info), a)):
            info = zipfile.ZipInfo(arcname, ZIP_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, files[arcname])
    return f"{dist}-{version}-py3-none-any.whl", buffer.getvalue()


def package_files(package_dir: Path, data_globs: list[str]) -> dict[str, bytes]:
    files = {}
    for path in sorted(package_dir.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(package_dir).as_posix()
        if path.suffix == ".py" or any(fnmatch.fnmatch(rel, g) for g in data_globs):
            files[f"{package_dir.name}/{rel}"] = path.read_bytes()
    return files


def requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if not match:
        raise VendorError(f"cannot read the package name in requirement {requirement!r}")
    return canonical(match.group(1))


def build_agent_py() -> tuple[dict, bytes]:
    """agent_py from the working tree, versioned by content so caches never serve old code."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    package_data = pyproject.get("tool", {}).get("setuptools", {}).get("package-data", {})
    data_globs = package_data.get("agent_py", [])
    files = package_files(ROOT / "agent_py", data_globs)
    content = hashlib.sha256()
    for arcname in sorted(files):
        content.update(arcname.encode() + b"\0" + files[arcname] + b"\0")
    version = f"{project['version']}+{content.hexdigest()[:10]}"
    requires = list(project.get("dependencies", []))
    file_name, data = build_wheel(project["name"], version, files, requires)
    entry = {
        "name": project["name"],
        "version": version,
        "file": file_name,
        "imports": ["agent_py"],
        "depends": sorted({requirement_name(r) for r in requires}),
    }
    return entry, data


def build_standin(spec: dict) -> bytes:
    source = ROOT / spec["source"]
    files = {}
    for module in spec["imports"]:
        files.update(package_files(source / module, []))
    file_name, data = build_wheel(spec["name"], spec["version"], files, spec["depends"])
    spec["file"] = file_name
    return data


def keep_only(cached: Path, pattern: str = "*") -> None:
    """Delete the other builds matching ``pattern`` beside ``cached``: it supersedes them."""
    for old in cached.parent.glob(pattern + cached.suffix):
        if old != cached:
            old.unlink()


def is_pure(file_name: str) -> bool:
    return file_name.endswith("-none-any.whl")


def build_bundle(pure: dict[str, bytes], pyodide_integrity: str) -> tuple[str, str, bytes]:
    """One archive of the pure wheels, compiled to bytecode by the vendored Pyodide.

    Cached by the wheels' content and the runtime (the bytecode belongs to its interpreter).
    Returns (version, file name, bytes).
    """
    key = hashlib.sha256(pyodide_integrity.encode() + COMPILE_BUNDLE.read_bytes())
    for name in sorted(pure):
        key.update(f"{name}:{sha256_bytes(pure[name])}\n".encode())
    version = f"1+{key.hexdigest()[:12]}"
    cached = CACHE / "bundle" / f"{key.hexdigest()}.zip"
    if not cached.is_file():
        work = CACHE / "bundle" / "wheels"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        for name, data in pure.items():
            (work / name).write_bytes(data)
        tmp = cached.with_name(cached.name + ".tmp")
        wheels = [str(path) for path in sorted(work.iterdir())]
        run(["node", str(COMPILE_BUNDLE), str(WHEEL_DIR), "bundle", str(tmp), *wheels])
        os.replace(tmp, cached)
        shutil.rmtree(work)
        keep_only(cached)  # one bundle per agent_py edit: keep the newest
    data = cached.read_bytes()
    check_no_pydantic_plugin(data)
    return version, f"{BUNDLE_NAME.replace('-', '_')}-{version}.zip", data


def compiled_wheel(wheel: Path, sha256: str) -> bytes:
    """A compiled wheel with bytecode in place of its Python sources (cached per wheel)."""
    key = hashlib.sha256(sha256.encode() + COMPILE_BUNDLE.read_bytes() + PYODIDE_PIN.encode())
    cached = SHARED / "compiled-wheels" / f"{wheel.stem}-{key.hexdigest()[:16]}.whl"
    data = read_checked(cached)
    if data is None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
        run(["node", str(COMPILE_BUNDLE), str(WHEEL_DIR), "wheel", str(tmp), str(wheel)])
        data = keep_checked(tmp, cached)
    return data


def build_compiled_stdlib(pyodide_integrity: str) -> bytes:
    """The runtime's standard library with bytecode beside each source (cached per runtime)."""
    key = hashlib.sha256(pyodide_integrity.encode() + COMPILE_BUNDLE.read_bytes())
    cached = SHARED / "stdlib" / f"{key.hexdigest()}.zip"
    data = read_checked(cached)
    if data is None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
        run(["node", str(COMPILE_BUNDLE), str(WHEEL_DIR), "stdlib", str(tmp)])
        data = keep_checked(tmp, cached)
    return data


def read_checked(cached: Path) -> bytes | None:
    """A compiled file from the cache when it matches the sha256 kept beside it; None when
    there is none or it does not (then it is deleted)."""
    sidecar = cached.with_name(cached.name + ".sha256")
    try:
        data, want = cached.read_bytes(), sidecar.read_text().strip()
    except OSError:
        return None
    if sha256_bytes(data) == want:
        return data
    cached.unlink(missing_ok=True)
    sidecar.unlink(missing_ok=True)
    return None


def keep_checked(tmp: Path, cached: Path) -> bytes:
    """Move a freshly compiled ``tmp`` into the cache as ``cached``, with its sha256."""
    data = tmp.read_bytes()
    sidecar = cached.with_name(cached.name + ".sha256")
    sidecar_tmp = tmp.with_name(tmp.name + ".sha256")
    sidecar_tmp.write_text(sha256_bytes(data) + "\n")
    os.replace(tmp, cached)
    os.replace(sidecar_tmp, sidecar)
    return data


def check_no_pydantic_plugin(bundle: bytes) -> None:
    """web/worker/python-boot.js turns pydantic's plugin search off (it reads every package's
    metadata at start); that is right only while no package we ship registers a plugin."""
    with zipfile.ZipFile(io.BytesIO(bundle)) as archive:
        for name in archive.namelist():
            if name.endswith(".dist-info/entry_points.txt"):
                groups = re.findall(r"^\[([^\]]+)\]", archive.read(name).decode(), re.M)
                if "pydantic" in groups:
                    raise VendorError(
                        f"{name} registers a pydantic plugin, which the page would not load: "
                        "drop PYDANTIC_DISABLE_PLUGINS in web/worker/python-boot.js"
                    )


# ---------------------------------------------------------------- lock and manifest


def pyodide_lock(entries: list[dict], hashes: HashCache) -> bytes:
    packages = {}
    for entry in entries:
        packages[canonical(entry["name"])] = {
            "name": entry["name"],
            "version": entry["version"],
            "file_name": entry["file"],
            "install_dir": "site",
            "sha256": hashes.sha256(WHEEL_DIR / entry["file"]),
            "package_type": "package",
            "imports": entry["imports"],
            "depends": sorted(canonical(d) for d in entry["depends"]),
            "unvendored_tests": False,
            "shared_library": False,
        }
    for key, package in packages.items():
        unknown = [d for d in package["depends"] if d not in packages]
        if unknown:
            raise VendorError(
                f"{key} depends on {unknown}, which no vendored wheel provides: add them to the "
                f"wheels of {LOCK_PATH.name} (or drop the dependency)"
            )
    lock = {"info": LOCK["pyodide"]["lock_info"], "packages": dict(sorted(packages.items()))}
    return (json.dumps(lock, indent=2, sort_keys=True) + "\n").encode()


def write_manifest(outputs: set[Path], hashes: HashCache) -> tuple[int, int]:
    files: list[dict[str, Any]] = []
    for p in sorted(outputs):
        path = p.relative_to(WEB).as_posix()
        files.append({"path": path, "size": p.stat().st_size, "sha256": hashes.sha256(p)})
        if path in NOT_PRECACHED:
            files[-1]["precache"] = False
    version = hashlib.sha256(
        "".join(f"{f['path']}:{f['sha256']}\n" for f in files).encode()
    ).hexdigest()[:16]
    manifest = {
        "version": version,
        "generator": "scripts/vendor.py",
        "paths_relative_to": "web/",
        "files": files,
    }
    write_if_changed(VENDOR / MANIFEST_NAME, (json.dumps(manifest, indent=1) + "\n").encode())
    return len(files), sum(f["size"] for f in files)


def remove_stale(outputs: set[Path]) -> list[Path]:
    """Delete files no longer produced (old wheel versions, renamed outputs).

    Only the folders this script fills are swept: others under web/vendor (a test model,
    say) are left alone, and stay out of the manifest.
    """
    owned = {VENDOR / spec["dest"] for spec in LOCK["npm"]} | {WHEEL_DIR}
    stale = [
        path
        for folder in owned
        if folder.is_dir()
        for path in folder.rglob("*")
        if path.is_file() and path not in outputs
    ]
    for path in stale:
        path.unlink()
    return stale


# ---------------------------------------------------------------- main


def check_pins() -> None:
    unpinned = [s["package"] for s in LOCK["npm"] if not s.get("integrity")]
    unpinned += [s["name"] for s in LOCK["wheels"] if not (s.get("file") and s.get("sha256"))]
    if unpinned:
        raise VendorError(
            f"no pinned hash yet for {', '.join(unpinned)}: run `python scripts/vendor.py --relock`"
        )


def load_state() -> dict:
    try:
        return json.loads(STATE_PATH.read_text())
    except (OSError, ValueError):
        return {}  # no cache yet, or a damaged one: everything gets checked again


def vendor(relock: bool = False) -> dict:
    started = time.perf_counter()
    if not relock:
        check_pins()
    state = load_state()
    hashes = HashCache(state.setdefault("hashes", {}))
    outputs: set[Path] = set()

    tarballs = fetch_npm(LOCK["npm"], relock)
    for spec in LOCK["npm"]:
        outputs.update(extract_npm(spec, tarballs[spec["package"]], state, hashes))

    downloaded = fetch_wheels(LOCK["wheels"], relock, hashes)
    WHEEL_DIR.mkdir(parents=True, exist_ok=True)
    entries: list[dict] = []
    pure: dict[str, bytes] = {}  # wheel file name -> bytes, for the bundle
    pure_entries: list[dict] = []
    for spec in LOCK["wheels"]:
        if is_pure(spec["file"]):
            pure[spec["file"]] = downloaded[spec["name"]].read_bytes()
            pure_entries.append(spec)
            continue
        out = WHEEL_DIR / spec["file"]
        write_if_changed(out, compiled_wheel(downloaded[spec["name"]], spec["sha256"]))
        outputs.add(out)
        entries.append(dict(spec))  # a copy: its depends change below, the pin must not

    for spec in LOCK["standin_wheels"]:
        pure[spec["file"]] = build_standin(spec)
        pure_entries.append(spec)
    agent_entry, agent_wheel = build_agent_py()
    pure[agent_entry["file"]] = agent_wheel
    pure_entries.append(agent_entry)

    pyodide_pin = next(n for n in LOCK["npm"] if n["package"] == "pyodide")
    version, bundle_file, bundle = build_bundle(pure, pyodide_pin["integrity"])
    write_if_changed(WHEEL_DIR / bundle_file, bundle)
    outputs.add(WHEEL_DIR / bundle_file)
    write_if_changed(WHEEL_DIR / COMPILED_STDLIB, build_compiled_stdlib(pyodide_pin["integrity"]))
    outputs.add(WHEEL_DIR / COMPILED_STDLIB)
    inside = {canonical(e["name"]) for e in pure_entries}
    # The bundle depends on the compiled wheels; their own dependencies on what the bundle
    # holds are dropped, since a cycle hangs Pyodide's loadPackage (314.0.7).
    for entry in entries:
        entry["depends"] = sorted({canonical(d) for d in entry["depends"]} - inside)
    entries.append(
        {
            "name": BUNDLE_NAME,
            "version": version,
            "file": bundle_file,
            "imports": sorted({name for e in pure_entries for name in e["imports"]}),
            "depends": sorted({canonical(d) for e in pure_entries for d in e["depends"]} - inside),
        }
    )

    lock_path = WHEEL_DIR / "pyodide-lock.json"
    write_if_changed(lock_path, pyodide_lock(entries, hashes))
    outputs.add(lock_path)

    stale = remove_stale(outputs)
    # The CPU engine's WebAssembly build (scripts/cpu_engine/build.sh, run before this script)
    # is served from web/vendor too, and precached like the rest.
    built = (VENDOR / CPU_ENGINE_DIR).glob("*")
    outputs |= {path for path in built if path.is_file() and not path.name.startswith(".")}
    count, total = write_manifest(outputs, hashes)

    state["hashes"] = {k: v for k, v in hashes.entries.items() if (ROOT / k).is_file()}
    STATE_PATH.parent.mkdir(parents=True, exist_ok=True)
    STATE_PATH.write_text(json.dumps(state, indent=1, sort_keys=True))
    if relock:
        LOCK_PATH.write_text(json.dumps(LOCK, indent=2) + "\n")
    return {
        "files": count,
        "bytes": total,
        "seconds": time.perf_counter() - started,
        "stale_removed": len(stale),
        "agent_py": agent_entry["file"],
        "bundle": bundle_file,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--relock",
        action="store_true",
        help="download the pinned versions again and record their hashes in vendor-lock.json",
    )
    args = parser.parse_args(argv)
    try:
        summary = vendor(relock=args.relock)
    except VendorError as error:
        print(f"vendor.py: {error}", file=sys.stderr)
        return 1
    print(
        f"web/vendor: {summary['files']} files, {summary['bytes'] / 1e6:.1f} MB, "
        f"{summary['seconds']:.2f} s ({summary['agent_py']} in {summary['bundle']}"
        + (f", {summary['stale_removed']} stale files removed" if summary["stale_removed"] else "")
        + ")"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
