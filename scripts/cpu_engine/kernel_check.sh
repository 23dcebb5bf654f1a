#!/usr/bin/env bash
# Builds scripts/cpu_engine/kernel_check.cpp against the CPU engine's llama.cpp libraries
# (scripts/wasm_llama_lib.sh, pinned and cached: the same patched ggml the engine links) and runs
# it under Node: our Q4_1 kernel changes give exactly the 1x1 kernel's floats. Exits 1 when a
# case fails. The threads variant: the single-thread one compiles the same kernels.
#
#   bash scripts/cpu_engine/kernel_check.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

source scripts/wasm_llama_lib.sh
wasm_llama_libs threads
out=$WASM_BUILD/kernel-check
mkdir -p "$out"
# -O1 for this program (quicker to build); the kernels come -O3 from the libraries.
# shellcheck disable=SC2086 # the flag lists are word lists
em++ $WASM_CXXFLAGS -O1 -std=c++17 $LLAMA_INCLUDES scripts/cpu_engine/kernel_check.cpp $LLAMA_LIBS \
  -sINITIAL_MEMORY=512MB -sEXIT_RUNTIME=1 -sPTHREAD_POOL_SIZE=2 \
  -o "$out/kernel_check.js"
node --no-experimental-fetch "$out/kernel_check.js"
