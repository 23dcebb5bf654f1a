"""scripts/bench_cpu_engine.py refuses a model id it does not know, before doing any work."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from bench_cpu_engine import TEMPLATES, main


def test_an_unknown_model_id_is_an_error_that_names_the_known_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--models", "smollm2", "--no-native"]) == 2
    err = capsys.readouterr().err
    assert "unknown model id smollm2" in err
    assert all(model in err for model in TEMPLATES)


def test_native_without_amx_is_a_copy_without_the_amx_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bench_cpu_engine

    bins = tmp_path / "node_modules" / "@node-llama-cpp" / "linux-x64" / "bins" / "linux-x64"
    bins.mkdir(parents=True)
    for build in ("sapphirerapids", "icelake", "haswell"):
        (bins / f"libggml-cpu-{build}.so").write_text(build)
    monkeypatch.setattr(bench_cpu_engine, "NATIVE_NO_AMX_DIR", tmp_path / "no-amx")

    copy = bench_cpu_engine.without_amx(tmp_path / "node_modules")

    copied = copy / "@node-llama-cpp" / "linux-x64" / "bins" / "linux-x64"
    assert sorted(p.name for p in copied.iterdir()) == [
        "libggml-cpu-haswell.so",
        "libggml-cpu-icelake.so",
    ]
    assert (bins / "libggml-cpu-sapphirerapids.so").is_file()  # the original is untouched
    # Made once: a second call keeps the copy as it is.
    (copied / "marker").write_text("")
    assert bench_cpu_engine.without_amx(tmp_path / "node_modules") == copy
    assert (copied / "marker").is_file()


def test_native_without_amx_names_what_to_update_when_no_amx_build_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bench_cpu_engine

    bins = tmp_path / "node_modules" / "bins"
    bins.mkdir(parents=True)
    (bins / "libggml-cpu-haswell.so").write_text("")
    monkeypatch.setattr(bench_cpu_engine, "NATIVE_NO_AMX_DIR", tmp_path / "no-amx")

    with pytest.raises(SystemExit, match="update NATIVE_AMX_BUILDS"):
        bench_cpu_engine.without_amx(tmp_path / "node_modules")
