"""Our changes to ggml's Q4_1, Q5_0 and Q8_0 matrix products, exp and flash attention
(scripts/cpu_engine/patch_llama.py), built with the CPU engine's own libraries and run under Node
(scripts/cpu_engine/kernel_check.sh): every Q4_1 kernel (one row; two by two; four rows times one,
two, four or eight columns) and the four-row Q5_0 kernel give exactly the floats of the order
patch_llama.py states, written out in plain C, and the four-row Q8_0 kernel those of ggml's own
one-row kernel, for even and odd column and row counts, on one thread and two; all agree with
the dequantized weights' product; soft_max and silu, through our four-lane exp, agree with exp
in double, and flash attention over an F32 cache with attention in double; and the relaxed SIMD
libraries give the SIMD128 libraries' floats bit for bit with either form of their dot product
(the engine picks the faster for the CPU), so both builds answer alike on every CPU."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def kernel_check(variant: str) -> dict[str, tuple[str, str]]:
    """The check's cases for one variant's libraries: case -> (the dot product forms it ran,
    the bits' hash)."""
    done = subprocess.run(
        ["bash", "scripts/cpu_engine/kernel_check.sh", variant],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    line = (
        r"^(ok  |FAIL)  (\w+ k=\S+ rows=\S+ columns=\S+ threads=\d+|exp n=\d+"
        r"|attention n_q=\d+ n_kv=\d+ threads=\d+):.*?(?:dot ([\w ]+|-), )?bits (\w+)$"
    )
    cases = re.findall(line, done.stdout, re.M)
    # Every case ran (a build that printed nothing must not pass), the odd ones included.
    assert len(cases) == 53 and all(status == "ok  " for status, *_ in cases), done.stdout
    assert done.stdout.rstrip().endswith("all cases passed")
    return {case: (forms, bits) for _, case, forms, bits in cases}


def bits_of(cases: dict[str, tuple[str, str]]) -> dict[str, str]:
    return {case: bits for case, (_, bits) in cases.items()}


def test_our_kernels_give_the_stated_floats_in_both_builds() -> None:
    plain = kernel_check("threads")
    assert "q4_1 k=576 rows=64 columns=33 threads=2" in plain  # four columns a call, an odd tail
    assert "q4_1 k=576 rows=30 columns=1 threads=2" in plain  # four rows, two left over
    assert "q4_1 k=576 rows=30 columns=6 threads=2" in plain  # four columns, two rows left over
    assert "q8_0 k=576 rows=70 columns=1 threads=2" in plain
    assert "q8_0 k=576 rows=70 columns=17 threads=2" in plain  # four columns a call, a tail
    assert "q5_0 k=896 rows=64 columns=33 threads=2" in plain  # Qwen2.5-Coder-0.5B's width
    assert "q5_0 k=896 rows=30 columns=9 threads=2" in plain  # two rows left over
    assert "exp n=1027" in plain  # soft_max and silu through our exp
    assert "attention n_q=1 n_kv=1100 threads=2" in plain  # a decode at the planner's context
    relaxed = kernel_check("relaxed")
    # The relaxed build checked each Q4_1 and Q5_0 case with both forms of its dot product.
    q4_1 = [case for case in relaxed if case.startswith("q4_1 ")]
    q5_0 = [case for case in relaxed if case.startswith("q5_0 ")]
    assert len(q4_1) == 23 and len(q5_0) == 14, relaxed
    assert all(relaxed[case][0] == "i32 i16" for case in q4_1 + q5_0), relaxed
    assert all(plain[case][0] == "simd128" for case in q4_1 + q5_0), plain
    assert bits_of(relaxed) == bits_of(plain)
