"""Our changes to ggml's Q4_1 matrix product (scripts/cpu_engine/patch_llama.py), built with the
CPU engine's own libraries and run under Node (scripts/cpu_engine/kernel_check.sh): the 2x2
kernel gives exactly the 1x1 kernel's floats, for even and odd column counts, on one thread and
two, and both agree with the dequantized weights' product."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_the_2x2_q4_1_kernel_gives_the_1x1_kernels_floats() -> None:
    done = subprocess.run(
        ["bash", "scripts/cpu_engine/kernel_check.sh"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    cases = [line for line in done.stdout.splitlines() if line.startswith(("ok", "FAIL"))]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # Every case ran (a build that printed nothing must not pass) and the odd ones are there.
    assert len(cases) == 13 and all(line.startswith("ok") for line in cases), done.stdout
    assert any("columns=33 threads=2" in line for line in cases)
    assert done.stdout.rstrip().endswith("all cases passed")
