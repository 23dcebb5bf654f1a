#!/usr/bin/env bash
# Builds scripts/cpu_engine/kernel_check.cpp against the CPU engine's llama.cpp libraries
# (scripts/wasm_llama_lib.sh, pinned and cached: the same patched ggml the engine links) and runs
# it under Node: our Q4_1 kernel changes give exactly the 1x1 kernel's floats. Exits 1 when a
# case fails. VARIANT is threads (SIMD128; the single-thread libraries compile the same kernels)
# or relaxed (relaxed SIMD's dot product). Node 20 runs relaxed SIMD behind a flag, and its
# baseline compiler (Liftoff) gets the dot product wrong (the engine's worker checks for that,
# web/worker/engines/cpu-worker.js), so that variant runs optimized code only (--no-liftoff).
#
#   bash scripts/cpu_engine/kernel_check.sh [VARIANT=threads]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

source scripts/wasm_llama_lib.sh
variant=${1:-threads}
wasm_llama_libs "$variant"
out=$WASM_BUILD/kernel-check-$variant
mkdir -p "$out"
# -O1 for this program (quicker to build); the kernels come -O3 from the libraries.
# shellcheck disable=SC2086 # the flag lists are word lists
"${WASM_EMENV[@]}" em++ $WASM_CXXFLAGS -O1 $WASM_LINK_FLAGS -std=c++17 $LLAMA_INCLUDES \
  scripts/cpu_engine/kernel_check.cpp $LLAMA_LIBS -sINITIAL_MEMORY=512MB -sEXIT_RUNTIME=1 \
  -sPTHREAD_POOL_SIZE=2 -o "$out/kernel_check.js"
node_flags=()
[ "$variant" = relaxed ] && node_flags=(--experimental-wasm-relaxed-simd --no-liftoff)
node --no-experimental-fetch "${node_flags[@]}" "$out/kernel_check.js"
