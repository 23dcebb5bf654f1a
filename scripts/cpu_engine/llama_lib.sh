# llama.cpp's libraries built for WebAssembly, shared by scripts/cpu_engine/build.sh (the CPU
# engine) and scripts/cpu_engine/probe.sh (the speed probe). Source it from the repository root,
# then call `wasm_llama_libs [threads|single|relaxed]` (threads by default): it leaves LLAMA_SRC,
# LLAMA_INCLUDES (compiler flags), LLAMA_LIBS (archives, in link order), LLAMA_SCHEMA_LIB,
# WASM_CXXFLAGS (the flags to compile and link code that uses them with), WASM_LINK_FLAGS (for
# the final link, after those) and WASM_EMENV (the environment to run emcc in) set for it.
#   threads   -pthread (shared memory, SharedArrayBuffer): for cross-origin isolated pages;
#             cached in .artifacts/wasm-build/lib
#   single    no threads, for pages served without COOP/COEP; cached in .artifacts/wasm-build/lib-st
#   relaxed   threads and relaxed SIMD (its 8-bit dot product, in ggml's Q4_1 kernel: Chrome 114+),
#             for cross-origin isolated pages whose browser has it; cached in
#             .artifacts/wasm-build/lib-rs. Emscripten 3.1.6's clang 14 predates the instruction,
#             so this variant compiles with Debian's clang 19 (installed as root when missing),
#             and links without binaryen, whose version 108 misreads it (WASM_EMENV,
#             WASM_LINK_FLAGS).
# Objects of the two cannot be mixed: wasm-ld refuses atomics in a build without shared memory.
#
# The llama.cpp is the one PyPI's llama-cpp-python 0.3.36 sdist vendors (sha256-pinned), built
# with our changes (scripts/cpu_engine/patch_llama.py) by Debian's emscripten (3.1.6), and cached
# in .artifacts/wasm-build and in the machine's build cache (scripts/build_cache.sh), which a
# fresh clone copies from: a rebuild happens only when the flags below, the changes,
# scripts/cpu_engine/llama_exceptions.cmake or the compilers change.

source scripts/build_cache.sh

WASM_BUILD=.artifacts/wasm-build
LLAMA_SDIST=llama_cpp_python-0.3.36.tar.gz
LLAMA_SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
LLAMA_SRC=$WASM_BUILD/src/vendor/llama.cpp
LLAMA_INCLUDES="-I$LLAMA_SRC/include -I$LLAMA_SRC/ggml/include"
# json_schema_to_grammar and what it needs from llama.cpp's common/ (common.cpp for three string
# helpers: the linker keeps only what is used), without the rest of it (downloads, HTTP,
# subprocesses), which the `common` target would build.
LLAMA_SCHEMA_SOURCES="json-schema-to-grammar json-schema json trie unicode common"

export NODE_PATH=/usr/share/nodejs # emcc's JS optimizer needs Debian's acorn

# phase WHAT --about TIME [--objects DIR --of N] [--log FILE] -- COMMAND...: runs COMMAND saying
# what it does, at least every 30 s (scripts/setup_phase.py).
phase() { python3 scripts/setup_phase.py "$@"; }

# wasm_llama_debian "COMMANDS" "PACKAGES" "WHAT": installs Debian's PACKAGES (as root) when one
# of COMMANDS is missing; otherwise says what to run.
wasm_llama_debian() {
  local command missing=""
  for command in $1; do command -v "$command" >/dev/null || missing=$command; done
  [ -z "$missing" ] && return
  if [ "$(id -u)" -ne 0 ]; then
    echo "$missing is missing: run 'sudo apt-get install -y $2' ($3) once, then try again." >&2
    exit 1
  fi
  phase "installing $3 (apt: $2)" --about "30 s" -- sh -c \
    "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $2 >/dev/null"
}
wasm_llama_emcc() { wasm_llama_debian emcc emscripten "Debian's emscripten 3.1.6"; }
# clang and wasm-ld 19 for the relaxed variant (emscripten finds them by LLVM_ADD_VERSION).
wasm_llama_clang19() { wasm_llama_debian "clang-19 wasm-ld-19" "clang-19 lld-19" "Debian 12's clang 19"; }

# A fresh extraction of the sdist with our changes (scripts/cpu_engine/patch_llama.py) applied;
# extracted again when the changes change.
wasm_llama_sources() {
  local patched
  patched=$(sha256sum <scripts/cpu_engine/patch_llama.py | cut -c1-16)
  [ -f "$WASM_BUILD/src/.patched" ] && [ "$(cat "$WASM_BUILD/src/.patched")" = "$patched" ] && return
  mkdir -p "$WASM_BUILD"
  if [ ! -f "$WASM_BUILD/$LLAMA_SDIST" ]; then
    phase "downloading llama.cpp's sources (the $LLAMA_SDIST sdist, pip)" --about "1 min" -- \
      .venv/bin/python -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==0.3.36" -d "$WASM_BUILD"
  fi
  echo "$LLAMA_SDIST_SHA256  $WASM_BUILD/$LLAMA_SDIST" | sha256sum -c --quiet
  rm -rf "$WASM_BUILD/src" "$WASM_BUILD/src.tmp"
  mkdir -p "$WASM_BUILD/src.tmp"
  tar xzf "$WASM_BUILD/$LLAMA_SDIST" -C "$WASM_BUILD/src.tmp" --strip-components=1
  python3 scripts/cpu_engine/patch_llama.py "$WASM_BUILD/src.tmp/vendor/llama.cpp"
  echo "$patched" >"$WASM_BUILD/src.tmp/.patched"
  mv "$WASM_BUILD/src.tmp" "$WASM_BUILD/src"
}

wasm_llama_libs() {
  local variant=${1:-threads} lib threads simd="-msimd128"
  # WASM_EMENV: the environment emcc runs in (a command prefix); WASM_LINK_FLAGS: flags for
  # the final link, after WASM_CXXFLAGS.
  WASM_EMENV=(env)
  WASM_LINK_FLAGS=""
  case $variant in
    threads) lib=$WASM_BUILD/lib threads="-pthread" ;;
    single) lib=$WASM_BUILD/lib-st threads="" ;;
    relaxed)
      lib=$WASM_BUILD/lib-rs threads="-pthread" simd="-msimd128 -mrelaxed-simd"
      wasm_llama_clang19
      # Python reads the linked module's metadata instead of binaryen's finalize step, and an
      # -O1 link with BigInt at the JS boundary leaves binaryen nothing to do (its wasm-opt
      # passes run from -O2): the module is wasm-ld's, from code that clang compiled at -O3.
      WASM_EMENV=(env EM_LLVM_ADD_VERSION=19 EM_CLANG_ADD_VERSION=19 EMCC_READ_METADATA=python)
      WASM_LINK_FLAGS="-O1 -sWASM_BIGINT"
      ;;
    *) echo "wasm_llama_libs: unknown variant '$variant' (threads, single or relaxed)" >&2; exit 1 ;;
  esac
  # -fexceptions: llama.cpp reports a bad model file, grammar or saved state by throwing, and
  # emscripten's default turns every throw into an abort. (-fwasm-exceptions would cost less, but
  # with -pthread emscripten 3.1.6's prebuilt libc++abi then catches nothing by type.) The
  # libraries get it from scripts/cpu_engine/llama_exceptions.cmake, which leaves ggml-cpu's kernels
  # without it.
  WASM_CXXFLAGS="-O3${threads:+ $threads} $simd -fexceptions"
  LLAMA_LIBS="$lib/src/libllama.a $lib/ggml/src/libggml.a $lib/ggml/src/libggml-cpu.a $lib/ggml/src/libggml-base.a"
  LLAMA_SCHEMA_LIB=$lib/schema/libllama-schema.a
  wasm_llama_emcc
  wasm_llama_sources
  # EMSCRIPTEN_SYSTEM_PROCESSOR=wasm32: emscripten 3.1.6 says x86 otherwise, and ggml then
  # builds its generic C kernels instead of the wasm SIMD ones.
  local cmake_args=(-DEMSCRIPTEN_SYSTEM_PROCESSOR=wasm32
    -DCMAKE_BUILD_TYPE=Release -DLLAMA_WASM_MEM64=OFF -DGGML_OPENMP=OFF -DGGML_NATIVE=OFF
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
    -DLLAMA_BUILD_HTML=OFF -DBUILD_SHARED_LIBS=OFF
    "-DCMAKE_C_FLAGS=${threads:+$threads }$simd" "-DCMAKE_CXX_FLAGS=${threads:+$threads }$simd"
    -DCMAKE_PROJECT_INCLUDE="$PWD/scripts/cpu_engine/llama_exceptions.cmake")
  local stamp key
  # What the libraries are built from, the clone's path left out: the machine's build cache
  # (scripts/build_cache.sh) keeps them under a key of it.
  stamp="${cmake_args[*]//$PWD\//} $(cat scripts/cpu_engine/llama_exceptions.cmake scripts/cpu_engine/patch_llama.py | sha256sum)"
  key=$(build_cache_key "$stamp" "$WASM_CXXFLAGS | $LLAMA_SCHEMA_SOURCES" "$LLAMA_SDIST_SHA256" \
    "$(emcc --version | sed -n 1p)" "$([ "$variant" = relaxed ] && clang-19 --version | sed -n 1p)")
  local archives=(src/libllama.a ggml/src/libggml.a ggml/src/libggml-cpu.a ggml/src/libggml-base.a
    schema/libllama-schema.a)
  if { [ ! -f "$lib/.built" ] || [ "$(cat "$lib/.built")" != "$stamp" ]; } \
    && rm -rf "$lib" && build_cache_get "wasm-llama-$variant-$key" "$lib"; then
    echo "$stamp" >"$lib/.built"
    mkdir -p "$lib/schema"
    echo "$WASM_CXXFLAGS | $LLAMA_SCHEMA_SOURCES" >"$lib/schema/.built"
  fi
  if [ ! -f "$lib/.built" ] || [ "$(cat "$lib/.built")" != "$stamp" ]; then
    rm -rf "$lib"
    local log=$lib-build.log
    # The objects `make llama` compiles (llama's targets include ggml's), for the heartbeat's
    # "N of M files compiled"; counted after cmake wrote the makefiles.
    if ! { "${WASM_EMENV[@]}" emcmake cmake -S "$LLAMA_SRC" -B "$lib" "${cmake_args[@]}" >"$log" 2>&1 \
      && phase "compiling llama.cpp for WebAssembly, the $variant build" --about "4 min" --log "$log" \
        --objects "$lib" --of "$(make -C "$lib" -n llama 2>/dev/null | grep -c '\.o -c ' || true)" -- \
        "${WASM_EMENV[@]}" cmake --build "$lib" -j"$(nproc)" --target llama ggml; }; then
      tail -n 30 "$log" >&2
      echo "building llama.cpp for WebAssembly ($variant) failed: the whole log is in $log" >&2
      exit 1
    fi
    echo "$stamp" >"$lib/.built"
  fi
  local schema_stamp="$WASM_CXXFLAGS | $LLAMA_SCHEMA_SOURCES"
  if [ ! -f "$lib/schema/.built" ] || [ "$(cat "$lib/schema/.built")" != "$schema_stamp" ]; then
    rm -rf "$lib/schema"
    mkdir -p "$lib/schema"
    local objects=() name
    for name in $LLAMA_SCHEMA_SOURCES; do objects+=("$lib/schema/$name.o"); done
    # One source after another, as xargs reads their names.
    # shellcheck disable=SC2086 # the flag lists are word lists
    printf '%s\n' $LLAMA_SCHEMA_SOURCES \
      | phase "compiling llama.cpp's JSON-schema code, the $variant build" --about "30 s" \
        --objects "$lib/schema" --of "${#objects[@]}" -- \
        xargs -I{} "${WASM_EMENV[@]}" em++ $WASM_CXXFLAGS -std=c++17 $LLAMA_INCLUDES \
        -I"$LLAMA_SRC/common" -I"$LLAMA_SRC/vendor" -c "$LLAMA_SRC/common/{}.cpp" -o "$lib/schema/{}.o"
    "${WASM_EMENV[@]}" emar rcs "$LLAMA_SCHEMA_LIB" "${objects[@]}"
    echo "$schema_stamp" >"$lib/schema/.built"
  fi
  build_cache_put "wasm-llama-$variant-$key" "$lib" "${archives[@]}"
}
