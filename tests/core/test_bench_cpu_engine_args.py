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
