#!/usr/bin/env bash
# Measures the lever the CPU engine has not taken yet: llama.cpp built for WebAssembly by us
# (wasm32, SIMD128, threads, -O3) instead of wllama's prebuilt wasm (memory64 + JSPI).
# Builds libllama/libggml from the llama.cpp that PyPI's llama-cpp-python sdist vendors, with
# Debian's emscripten, links scripts/wasm_probe/llama_probe.cpp (load a GGUF, prefill a prompt,
# decode greedily, print tokens/s) and runs it under Node with the bundled SmolLM2.
#
#   bash scripts/bench_wasm_build.sh [THREADS=2] [PROMPT_TOKENS=1000] [DECODE=64] [REPEAT=3]
#
# Numbers only; compare with scripts/bench_cpu_engine.py (wllama, in Chromium) on the same
# machine. Needs root for `apt-get install emscripten` the first time; the build is cached in
# .artifacts/wasm-build (about 2 minutes on two idle cores the first time).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SDIST=llama_cpp_python-0.3.36.tar.gz
SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
OUT=.artifacts/wasm-build
MODEL=web/models/smollm2-135m-instruct-q4_1.gguf

if ! command -v emcc >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq emscripten >/dev/null
fi
mkdir -p "$OUT"
if [ ! -d "$OUT/src" ]; then
  .venv/bin/python -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==0.3.36" -d "$OUT"
  echo "$SDIST_SHA256  $OUT/$SDIST" | sha256sum -c --quiet
  mkdir -p "$OUT/src" && tar xzf "$OUT/$SDIST" -C "$OUT/src" --strip-components=1
fi
SRC="$OUT/src/vendor/llama.cpp"
export NODE_PATH=/usr/share/nodejs # emcc's optimizer needs Debian's acorn
if [ ! -f "$OUT/lib/src/libllama.a" ]; then
  # EMSCRIPTEN_SYSTEM_PROCESSOR=wasm32: emscripten 3.1.6 says x86 otherwise, and ggml then
  # builds its generic C kernels instead of the wasm SIMD ones.
  emcmake cmake -S "$SRC" -B "$OUT/lib" -DEMSCRIPTEN_SYSTEM_PROCESSOR=wasm32 \
    -DCMAKE_BUILD_TYPE=Release -DLLAMA_WASM_MEM64=OFF -DGGML_OPENMP=OFF -DGGML_NATIVE=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_HTML=OFF -DBUILD_SHARED_LIBS=OFF \
    -DCMAKE_C_FLAGS="-pthread -msimd128" -DCMAKE_CXX_FLAGS="-pthread -msimd128" >/dev/null
  cmake --build "$OUT/lib" -j2 --target llama ggml >/dev/null
fi
if [ ! -f "$OUT/llama_probe.js" ] || [ scripts/wasm_probe/llama_probe.cpp -nt "$OUT/llama_probe.js" ]; then
  em++ -O3 -msimd128 -pthread -std=c++17 -I"$SRC/include" -I"$SRC/ggml/include" \
    scripts/wasm_probe/llama_probe.cpp "$OUT/lib/src/libllama.a" "$OUT/lib/ggml/src/libggml.a" \
    "$OUT/lib/ggml/src/libggml-cpu.a" "$OUT/lib/ggml/src/libggml-base.a" \
    -sPTHREAD_POOL_SIZE=4 -sINITIAL_MEMORY=1024MB -sTOTAL_STACK=8MB -sNODERAWFS=1 -sEXIT_RUNTIME=1 \
    -o "$OUT/llama_probe.js"
fi
# Node 20's fetch would try to fetch the .wasm by path: emscripten 3.1.6 then reads the file.
node --no-experimental-fetch "$OUT/llama_probe.js" "$MODEL" "${1:-2}" "${2:-1000}" "${3:-64}" "${4:-3}" \
  | grep -E "^(system|model loaded|RUN)"
