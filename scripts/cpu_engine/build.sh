#!/usr/bin/env bash
# Builds the CPU engine's WebAssembly: llama.cpp (scripts/cpu_engine/llama_lib.sh, pinned and cached)
# linked with its C API for the page, scripts/cpu_engine/agent_llama.cpp, into web/vendor/llama/,
# three times; all factories are createAgentLlama(Module) (MODULARIZE), and cpu-worker.js loads
# one:
#   agent-llama-rs.js, .wasm, .worker.js   the pthread build with relaxed SIMD, for cross-origin
#                     isolated pages in browsers that have it (Chrome and Edge 114+)
#   agent-llama.js, agent-llama.wasm, agent-llama.worker.js   emscripten's pthread build, for
#                     cross-origin isolated pages (SharedArrayBuffer) in other browsers
#   agent-llama-st.js, agent-llama-st.wasm   the build without threads, for pages served
#                     without COOP/COEP headers
#   build.json        build_id_relaxed_simd, build_id and build_id_single_thread (a hash of each
#                     build's .wasm and .js: saved KV states are only valid for the build that
#                     wrote them), the llama.cpp and emscripten versions, each build's flags
#
#   bash scripts/cpu_engine/build.sh      # builds when its inputs changed; otherwise a no-op
#
# A build is kept in the machine's build cache (scripts/build_cache.sh) under a key of its
# inputs and compilers, so a fresh clone on the same machine copies it (seconds) instead of
# building it (about 20 minutes on two cores, llama.cpp's libraries included).
#
# Needs emscripten and, for the relaxed build, clang 19 (as root, Debian's packages are installed
# the first time). Check the result
# with `node --no-experimental-fetch scripts/cpu_engine/check.mjs`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

DEST=web/vendor/llama
SOURCE=scripts/cpu_engine/agent_llama.cpp
OUTPUTS=(agent-llama-rs.js agent-llama-rs.wasm agent-llama-rs.worker.js agent-llama.js agent-llama.wasm
  agent-llama.worker.js agent-llama-st.js agent-llama-st.wasm build.json)
FUNCTIONS=(al_load al_model_info al_format_chat al_tokenize al_tokens al_begin al_prefill al_next al_end
  al_state_save al_state_load al_buffer al_cached al_free al_result al_last_error al_dot_form)

stamp_of_inputs() {
  cat "$SOURCE" scripts/cpu_engine/build.sh scripts/cpu_engine/llama_lib.sh \
    scripts/cpu_engine/llama_exceptions.cmake scripts/cpu_engine/patch_llama.py scripts/build_cache.sh \
    | sha256sum | cut -c1-64
}
up_to_date() {
  [ -f "$DEST/.inputs" ] && [ "$(cat "$DEST/.inputs")" = "$(stamp_of_inputs)" ] || return 1
  local name
  for name in "${OUTPUTS[@]}"; do [ -f "$DEST/$name" ] || return 1; done
}
up_to_date && exit 0

# A build of the same inputs by the same compilers, from the machine's build cache.
source scripts/build_cache.sh
toolchain() {
  local tool
  for tool in emcc clang-19; do
    if command -v "$tool" >/dev/null; then "$tool" --version | sed -n 1p; fi
  done
}
cache_entry=cpu-engine-$(build_cache_key "$(stamp_of_inputs)" "$(toolchain)")
mkdir -p "$DEST"
if build_cache_get "$cache_entry" "$DEST"; then
  stamp_of_inputs >"$DEST/.inputs"
  echo "web/vendor/llama: from the build cache ($cache_entry)"
  exit 0
fi

source scripts/cpu_engine/llama_lib.sh

exports=_malloc,_free
for name in "${FUNCTIONS[@]}"; do exports+=",_$name"; done
# ALLOW_MEMORY_GROWTH: a model's weights are read into the heap, so a 1 GB model grows it past
# INITIAL_MEMORY.
common_link_flags=(-sMODULARIZE=1 -sEXPORT_NAME=createAgentLlama -sENVIRONMENT=web,worker,node
  -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB -sINITIAL_MEMORY=256MB -sTOTAL_STACK=8MB
  -lworkerfs.js -sFORCE_FILESYSTEM=1
  "-sEXPORTED_RUNTIME_METHODS=[ccall,cwrap,UTF8ToString,stringToUTF8,lengthBytesUTF8,FS,WORKERFS,HEAPU8,HEAP32]"
  "-sEXPORTED_FUNCTIONS=[$exports]")
# PTHREAD_POOL_SIZE: ggml's n_threads - 1 helper threads must come from this pool, made at
# startup, since the engine's thread blocks while they run and could not wait for a new Worker;
# al_load caps n_threads to fit it.
thread_link_flags=('-sPTHREAD_POOL_SIZE=Math.min(16,(typeof navigator!=="undefined"&&navigator.hardwareConcurrency)||4)'
  -sPTHREAD_POOL_SIZE_STRICT=2 -Wno-pthreads-mem-growth)

mkdir -p "$DEST"
tmp=$(mktemp -d "$DEST/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# link VARIANT NAME ABOUT [FLAGS...]: llama.cpp's libraries of that variant (wasm_llama_libs) and
# agent_llama.cpp into $tmp/NAME.js and NAME.wasm, which takes about ABOUT on two cores (binaryen's
# -O3 is most of it); leaves LINKED_ID (a hash of the two) and LINKED_FLAGS set.
link() {
  local variant=$1 name=$2 about=$3
  shift 3
  wasm_llama_libs "$variant"
  local link_flags=("${common_link_flags[@]}" "$@")
  # shellcheck disable=SC2086 # the flag lists are word lists
  # src/: llama-grammar.h, the grammar's stacks (the text a grammar forces, agent_llama.cpp)
  "${WASM_EMENV[@]}" em++ $WASM_CXXFLAGS -std=c++17 $LLAMA_INCLUDES -I"$LLAMA_SRC/common" -I"$LLAMA_SRC/src" \
    -I"$LLAMA_SRC/vendor" -c "$SOURCE" -o "$tmp/$name.o"
  # shellcheck disable=SC2086
  phase "linking $name.wasm, the $variant build" --about "$about" -- \
    "${WASM_EMENV[@]}" em++ $WASM_CXXFLAGS $WASM_LINK_FLAGS "$tmp/$name.o" $LLAMA_SCHEMA_LIB $LLAMA_LIBS \
    "${link_flags[@]}" -o "$tmp/$name.js"
  LINKED_ID=$(cat "$tmp/$name.wasm" "$tmp/$name.js" | sha256sum | cut -c1-16)
  LINKED_FLAGS="$WASM_CXXFLAGS${WASM_LINK_FLAGS:+ $WASM_LINK_FLAGS} ${link_flags[*]}"
}

link threads agent-llama "3 min" "${thread_link_flags[@]}"
export BUILD_ID=$LINKED_ID FLAGS=$LINKED_FLAGS
link single agent-llama-st "3 min"
export BUILD_ID_SINGLE_THREAD=$LINKED_ID FLAGS_SINGLE_THREAD=$LINKED_FLAGS
link relaxed agent-llama-rs "15 s" "${thread_link_flags[@]}"
export BUILD_ID_RELAXED_SIMD=$LINKED_ID FLAGS_RELAXED_SIMD=$LINKED_FLAGS
EMCC_VERSION=$(emcc --version | head -1) CLANG_RELAXED_SIMD=$(clang-19 --version | head -1) python3 -c '
import json, os
e = os.environ
print(json.dumps({
    "build_id": e["BUILD_ID"], "build_id_single_thread": e["BUILD_ID_SINGLE_THREAD"],
    "build_id_relaxed_simd": e["BUILD_ID_RELAXED_SIMD"],
    "llama_cpp": "llama-cpp-python 0.3.36 sdist", "emscripten": e["EMCC_VERSION"],
    "clang_relaxed_simd": e["CLANG_RELAXED_SIMD"], "flags": e["FLAGS"],
    "flags_single_thread": e["FLAGS_SINGLE_THREAD"], "flags_relaxed_simd": e["FLAGS_RELAXED_SIMD"]}, indent=1))
' >"$tmp/build.json"
for name in "${OUTPUTS[@]}"; do mv "$tmp/$name" "$DEST/"; done
stamp_of_inputs >"$DEST/.inputs"
# The compilers may have been installed on the way: the key names those that built it.
cache_entry=cpu-engine-$(build_cache_key "$(stamp_of_inputs)" "$(toolchain)")
build_cache_put "$cache_entry" "$DEST" "${OUTPUTS[@]}"
echo "web/vendor/llama: build $BUILD_ID_RELAXED_SIMD (threads, relaxed SIMD), $BUILD_ID (threads), $BUILD_ID_SINGLE_THREAD (single thread)"
