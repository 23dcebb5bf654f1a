#!/usr/bin/env bash
# Measures llama.cpp's own speed in WebAssembly, under Node and outside the CPU engine (same
# libraries: wasm32, SIMD128, threads, -O3), so the engine's overhead can be told apart.
# Builds libllama/libggml from the llama.cpp that PyPI's llama-cpp-python sdist vendors, with
# Debian's emscripten, links scripts/cpu_engine/probe.cpp (load a GGUF, prefill a prompt,
# decode greedily, print tokens/s) and runs it under Node with the bundled SmolLM2.
#
#   bash scripts/cpu_engine/probe.sh [THREADS=2] [PROMPT_TOKENS=1000] [DECODE=64] [REPEAT=3]
#
# Numbers only; compare with scripts/bench_cpu_engine.py (the engine, in Chromium) on the same
# machine. The libraries come from scripts/cpu_engine/llama_lib.sh (shared with the CPU engine's
# build), cached in .artifacts/wasm-build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

MODEL=${MODEL:-web/models/smollm2-135m-instruct-q4_1.gguf}  # a GGUF path

source scripts/cpu_engine/llama_lib.sh
wasm_llama_libs
probe=$WASM_BUILD/llama_probe.js
if [ ! -f "$probe" ] || [ scripts/cpu_engine/probe.cpp -nt "$probe" ] || [ "$WASM_BUILD/lib/.built" -nt "$probe" ]; then
  # shellcheck disable=SC2086 # the flag lists are word lists
  em++ $WASM_CXXFLAGS -std=c++17 $LLAMA_INCLUDES scripts/cpu_engine/probe.cpp $LLAMA_LIBS \
    -sPTHREAD_POOL_SIZE=4 -sINITIAL_MEMORY=1024MB -sTOTAL_STACK=8MB -sNODERAWFS=1 -sEXIT_RUNTIME=1 \
    -o "$probe"
fi
# Node 20's fetch would try to fetch the .wasm by path: emscripten 3.1.6 then reads the file.
node --no-experimental-fetch "$probe" "$MODEL" "${1:-2}" "${2:-1000}" "${3:-64}" "${4:-3}" \
  | grep -E "^(system|model loaded|RUN)"
