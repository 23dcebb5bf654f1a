"""Our changes to the llama.cpp that the pinned llama-cpp-python sdist vendors, applied by
scripts/wasm_llama_lib.sh to a fresh extraction of the sdist before it builds:

    python3 scripts/cpu_engine/patch_llama.py LLAMA_SRC

Each change names the text it replaces; when that text is not there exactly once (another
llama.cpp), this fails and says so, so a version bump cannot build without it unnoticed.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Flash attention reads an F32 KV cache as it is. llama.cpp casts F32 K and V to F16 before
# flash attention (meant for attention without a cache), which the CPU engine's F32 cache would
# pay for every token, over the whole cache. F32 because WebAssembly has no half-precision
# arithmetic: ggml's wasm kernels convert every F16 element on its own, and with an F16 cache
# that took two thirds of decoding at a 1,000-token context (the README's speed table).
F32_CACHE_IN_FLASH_ATTENTION = (
    "src/llama-graph.cpp",
    "        // this can happen when KV cache is not used"
    """ (e.g. an embedding model with non-causal attn)
        if (k->type == GGML_TYPE_F32) {
            k = ggml_cast(ctx0, k, GGML_TYPE_F16);
        }

        if (v->type == GGML_TYPE_F32) {
            v = ggml_cast(ctx0, v, GGML_TYPE_F16);
        }
""",
    """        // agent_py (scripts/cpu_engine/patch_llama.py): flash attention takes F32 K and V
        // as they are; no cast to F16.
""",
)

CHANGES = [F32_CACHE_IN_FLASH_ATTENTION]


def patch(src: Path) -> None:
    for relative, old, new in CHANGES:
        path = src / relative
        text = path.read_text()
        if text.count(old) != 1:
            raise SystemExit(
                f"patch_llama.py: {relative} does not hold the code a change replaces "
                "(another llama.cpp?): update scripts/cpu_engine/patch_llama.py"
            )
        path.write_text(text.replace(old, new))


if __name__ == "__main__":
    patch(Path(sys.argv[1]))
