#!/usr/bin/env bash
# The tests' OpenAI-compatible model server: llama.cpp's own llama-server, built natively from
# the llama.cpp that PyPI's llama-cpp-python sdist vendors (the same sha256-pinned sdist as the
# CPU engine's WebAssembly build, scripts/cpu_engine/llama_lib.sh), unchanged. It lands in
# .artifacts/model-server/llama-server; only the tests and the suite's model-server row (docs/benchmarks.md) use it.
#
# The build takes about 5 minutes on two cores, so the binary is kept in the machine's build
# cache (scripts/build_cache.sh; keyed by the sdist and the flags) and a fresh clone on the same
# machine copies it in a moment. Idempotent: quick when already done. Needs cmake, ninja and g++
# (installed with apt-get when missing and run as root).
#
# The flags: AVX2 without -march=native, which keeps the cached binary valid on any x86-64
# machine with AVX2. A -march=native build turns on this llama.cpp's AMX kernels, which stop with
# an illegal instruction (at a `tileloadd`, in the first product) on our Xeon although AMX runs
# there; a build with AVX-512, its VNNI, VBMI and BF16 named one by one (no AMX) ran SmolLM2 no
# faster than this one (130-token prompt, two threads, in turns: 241-293 against 233-301 tok/s
# prefill, 94-106 against 89-121 decode). No OpenSSL, no web UI (nothing downloaded at build
# time), no tests or examples.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/cpu_engine/llama_lib.sh # LLAMA_SDIST, LLAMA_SDIST_SHA256, WASM_BUILD

target=.artifacts/model-server
flags=(
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
  -DGGML_OPENMP=OFF
)
key=$(echo "$LLAMA_SDIST_SHA256 ${flags[*]}" | sha256sum | cut -c1-16)
[ -x "$target/llama-server" ] && [ "$(cat "$target/.key" 2>/dev/null)" = "$key" ] && exit 0

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
command -v g++ >/dev/null || missing+=(g++)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "the model server's build needs ${missing[*]}: run 'sudo apt-get install -y ${missing[*]}' once, then try again." >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

rm -rf "$target"
mkdir -p "$target"
if ! build_cache_get "llama-server-$key" "$target"; then
  if [ ! -f "$WASM_BUILD/$LLAMA_SDIST" ]; then
    mkdir -p "$WASM_BUILD"
    .venv/bin/python -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==0.3.36" -d "$WASM_BUILD"
  fi
  echo "$LLAMA_SDIST_SHA256  $WASM_BUILD/$LLAMA_SDIST" | sha256sum -c --quiet
  echo "building llama.cpp's llama-server (native; about 5 minutes on two cores)" >&2
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  tar xzf "$WASM_BUILD/$LLAMA_SDIST" -C "$work" --strip-components=1
  log=$PWD/.artifacts/model-server-build.log
  mkdir -p .artifacts
  if ! (cd "$work/vendor/llama.cpp" && cmake -S . -B build -G Ninja "${flags[@]}" && cmake --build build --target llama-server -j "$(nproc)") >"$log" 2>&1; then
    tail -30 "$log" >&2
    echo "building the model server failed: the whole log is in $log" >&2
    exit 1
  fi
  cp "$work/vendor/llama.cpp/build/bin/llama-server" "$target/llama-server"
  build_cache_put "llama-server-$key" "$target" llama-server
fi
echo "$key" >"$target/.key"
