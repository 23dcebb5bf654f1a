#!/usr/bin/env bash
# Builds scripts/cpu_engine/kernel_check.cpp against the CPU engine's llama.cpp libraries
# (scripts/cpu_engine/llama_lib.sh, pinned and cached: the same patched ggml the engine links) and runs
# it under Node: our Q4_1 kernel changes give exactly the 1x1 kernel's floats. Exits 1 when a
# case fails. VARIANT is threads (SIMD128; the single-thread libraries compile the same kernels)
# or relaxed (relaxed SIMD's dot product). Node 20 runs relaxed SIMD behind a flag, and its
# baseline compiler (Liftoff) gets the dot product wrong (the engine's worker checks for that,
# web/worker/engines/cpu-worker.js), so that variant runs optimized code only (--no-liftoff).
#
#   bash scripts/cpu_engine/kernel_check.sh [VARIANT=threads] [bench]
#
# With `bench` it checks nothing and prints how fast about 80 MB of Q4_1 weights are multiplied
# by one column (a token's decode), one row a call and through mul_mat, against a plain read of
# the same bytes, and how fast 130 columns (a prompt) are, on one thread and two. Under Node 20;
# its relaxed SIMD is slower than Chromium's, so compare builds in Chromium
# (scripts/bench_cpu_engine.py --build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

source scripts/cpu_engine/llama_lib.sh
variant=${1:-threads}
case "${2:-}" in
  "" | bench) ;;
  *) echo "kernel_check.sh: the second argument is bench or nothing, not '$2'" >&2; exit 2 ;;
esac
wasm_llama_libs "$variant"
out=$WASM_BUILD/kernel-check-$variant${2:+-$2}
mkdir -p "$out"
bench_flags=()
[ "${2:-}" = bench ] && bench_flags=(-DKERNEL_BENCH=1)
# -O1 for this program (quicker to build); the kernels come -O3 from the libraries.
# shellcheck disable=SC2086 # the flag lists are word lists
"${WASM_EMENV[@]}" em++ $WASM_CXXFLAGS -O1 $WASM_LINK_FLAGS -std=c++17 $LLAMA_INCLUDES \
  "${bench_flags[@]}" scripts/cpu_engine/kernel_check.cpp $LLAMA_LIBS -sINITIAL_MEMORY=512MB -sEXIT_RUNTIME=1 \
  -sPTHREAD_POOL_SIZE=2 -o "$out/kernel_check.js"
node_flags=()
[ "$variant" = relaxed ] && node_flags=(--experimental-wasm-relaxed-simd --no-liftoff)
node --no-experimental-fetch "${node_flags[@]}" "$out/kernel_check.js"
