"""Our changes to the llama.cpp that the pinned llama-cpp-python sdist vendors, applied by
scripts/cpu_engine/llama_lib.sh to a fresh extraction of the sdist before it builds:

    python3 scripts/cpu_engine/patch_llama.py LLAMA_SRC

Each change names the text it replaces; when that text is not there exactly once (another
llama.cpp), this fails and says so, so a version bump cannot build without it unnoticed.
"""

# The changes quote llama.cpp's lines as they are, some longer than our line limit.
# ruff: noqa: E501

from __future__ import annotations

import sys
from pathlib import Path

# Flash attention reads an F32 KV cache as it is. llama.cpp casts F32 K and V to F16 before
# flash attention (meant for attention without a cache), which the CPU engine's F32 cache would
# pay for every token, over the whole cache. F32 because WebAssembly has no half-precision
# arithmetic: ggml's wasm kernels convert every F16 element on its own, and with an F16 cache
# that took two thirds of decoding at a 1,000-token context (`node --cpu-prof`; scripts/cpu_engine/README.md).
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

# A prompt's tokens take one flash attention path, whatever batch they come in. ggml takes its
# tiled path for batches of 64 tokens or more and a row-by-row one below that; the two add up in
# other orders, so a token's floats (and the KV cache after it) depended on how its prompt was
# cut into batches: the planner's prefix prefilled while the user types, then the task's words
# alone, answered otherwise than the same prompt in one go, and greedy SmolLM2 flipped between
# right and wrong answers on that (the same task passed in one suite run and failed in another).
# The tiled path now takes every batch of two tokens or more: a row's floats there do not depend
# on the other rows (native llama.cpp with this change gives bit-identical logits for an 807-token
# prompt in batches of 512, 400+407, 400+399+8, 400+400+4+3, 128, 100, 64, 17 or 7; before it,
# five different sets). One-token batches (decoding) keep ggml's paths, which read the cache
# without copying it into tiles.
FLASH_ATTENTION_ONE_PROMPT_PATH = (
    "ggml/src/ggml-cpu/ops.cpp",
    "                                neq1 >= Q_TILE_SZ);",
    "                                neq1 >= 2); // agent_py (scripts/cpu_engine/patch_llama.py): every prompt batch",
)

# The tiled path computes whole tiles of 64 queries, padded with zero rows, whatever the batch
# holds: a batch of five tokens (the text a grammar forces, written in one batch by the engine;
# agent_llama.cpp) cost as much attention as 64, and a prompt's last tile of a few tokens as
# much as a full one. The products, the scaling and the softmax now cover the tile's real rows
# only. Exact: a row's sums add the same products in the same order (simd_gemm computes a tail
# row with the same sequence as a row of a 4-row tile), and padded rows were never read.
FLASH_ATTENTION_REAL_ROWS_SCORES = (
    "ggml/src/ggml-cpu/ops.cpp",
    """            memset(KQ, 0, Q_TILE_SZ * KV_TILE_SZ * sizeof(float));
            simd_gemm(KQ, (const float *)Q_q, K_f32, Q_TILE_SZ, DK, KV_TILE_SZ);
            ggml_vec_scale_f32(Q_TILE_SZ * KV_TILE_SZ, KQ, scale);

            if (logit_softcap != 0.0f) {
                ggml_vec_tanh_f32(Q_TILE_SZ * KV_TILE_SZ, KQ, KQ);
                ggml_vec_scale_f32(Q_TILE_SZ * KV_TILE_SZ, KQ, logit_softcap);
            }

            // Set padded KQ entries to -inf so softmax gives them zero weight
            if (kv_tile < KV_TILE_SZ) {
                for (int tq = 0; tq < Q_TILE_SZ; tq++) {""",
    """            // agent_py (scripts/cpu_engine/patch_llama.py): the tile's real rows only
            memset(KQ, 0, tile_rows * KV_TILE_SZ * sizeof(float));
            simd_gemm(KQ, (const float *)Q_q, K_f32, tile_rows, DK, KV_TILE_SZ);
            ggml_vec_scale_f32(tile_rows * KV_TILE_SZ, KQ, scale);

            if (logit_softcap != 0.0f) {
                ggml_vec_tanh_f32(tile_rows * KV_TILE_SZ, KQ, KQ);
                ggml_vec_scale_f32(tile_rows * KV_TILE_SZ, KQ, logit_softcap);
            }

            // Set padded KQ entries to -inf so softmax gives them zero weight
            if (kv_tile < KV_TILE_SZ) {
                for (int tq = 0; tq < tile_rows; tq++) {""",
)
FLASH_ATTENTION_REAL_ROWS_SOFTMAX = (
    "ggml/src/ggml-cpu/ops.cpp",
    """            bool skip[Q_TILE_SZ] = {};

            for (int tq = 0; tq < Q_TILE_SZ; tq++) {""",
    """            bool skip[Q_TILE_SZ] = {};

            for (int tq = 0; tq < tile_rows; tq++) { // agent_py: the real rows only""",
)
FLASH_ATTENTION_REAL_ROWS_VALUES = (
    "ggml/src/ggml-cpu/ops.cpp",
    """            for (int tq = 0; tq < Q_TILE_SZ; tq++) {
                if (skip[tq]) {
                    memset(KQ + tq * KV_TILE_SZ, 0, KV_TILE_SZ * sizeof(float));
                }
            }
            simd_gemm(VKQ32, KQ, V32, Q_TILE_SZ, KV_TILE_SZ, DV);""",
    """            for (int tq = 0; tq < tile_rows; tq++) { // agent_py: the real rows only
                if (skip[tq]) {
                    memset(KQ + tq * KV_TILE_SZ, 0, KV_TILE_SZ * sizeof(float));
                }
            }
            simd_gemm(VKQ32, KQ, V32, tile_rows, KV_TILE_SZ, DV);""",
)

# Q4_1 weights times Q8_1 activations: SmolLM2's matrix products, most of prefill and decode in a
# profile of the wasm build (`node --cpu-prof`). Our kernels replace ggml's wasm one:
# - relaxed SIMD's 8-bit dot product where the build has it (-mrelaxed-simd, the engine's
#   relaxed build). The weights are nibbles, 0..15, which fit the instruction's 7-bit operand,
#   so its result is defined on every engine (no pair sum of 2 * 128 * 15 saturates 16 bits).
#   It comes in two forms, and which is faster depends on the CPU, so the engine picks one when
#   it loads a model (agent_q4_1_choose_dot, from how this engine lowers the instruction):
#   - on x86 without AVX-VNNI the 32-bit form is pmaddubsw + pmaddwd + paddd per 16 products;
#     there the 16-bit form (one pmaddubsw) is summed in 16 bits, two rows' sums added in pairs
#     (at most 15,360) and widened together, so four rows take two widenings: prefill +24% in
#     Chromium (an AMD EPYC; an Intel Xeon with V8's AVX-VNNI turned off alike);
#   - with AVX-VNNI (or ARM's dot product) the 32-bit form is one instruction that accumulates,
#     and the 16-bit form is 13% slower (an Intel Xeon).
#   The integers are the same either way, so are the floats. SIMD128 alone widens both sides to
#   16 bits first: eight extensions and four dot products per 32 values, against two
#   instructions.
# - each block's integer dot product is summed to one exact integer before it is scaled, where
#   ggml's kernel scales and adds up each of four partial sums in float on its own. The float
#   operations are then the same whichever lanes the partial sums were in: the relaxed and SIMD128
#   builds compute the same floats with no shuffle of bytes into one another's lanes (that
#   shuffle cost the relaxed kernel a third of its speed in Chromium), and four rows' sums share
#   one vector (below). Per product, in block order: sum += (float) sumi * (d_x * d_y);
#   summs += m_x * s_y; the result is sum + summs. One rounding per block instead of four, so
#   the floats differ from ggml's (and greedy answers may), but no less exact.
Q4_1_KERNEL_TRAITS = (
    "ggml/src/ggml-cpu/ggml-cpu.c",
    """        .vec_dot                  = ggml_vec_dot_q4_1_q8_1,
        .vec_dot_type             = GGML_TYPE_Q8_1,
#if defined (__ARM_FEATURE_MATMUL_INT8)""",
    """        .vec_dot                  = ggml_vec_dot_q4_1_q8_1,
        .vec_dot_type             = GGML_TYPE_Q8_1,
#if defined (__ARM_FEATURE_MATMUL_INT8) || defined (__wasm_simd128__) // agent_py: 2x2 on wasm""",
)
Q4_1_KERNEL_HELPERS = (
    "ggml/src/ggml-cpu/arch/wasm/quants.c",
    "\nvoid ggml_vec_dot_q4_1_q8_1(int n, float * GGML_RESTRICT s, size_t bs,",
    r"""
#if defined __wasm_simd128__
// agent_py (scripts/cpu_engine/patch_llama.py): a Q4_1 block's 32 weights and a Q8_1 block's
// 32 activations as the dot product below takes them, and that dot product: four i32 lanes whose
// sum is the block's, whichever values each lane holds.
#if defined(__wasm_relaxed_simd__)
#define AGENT_Q_PARTS 2
static inline void agent_q4_1_parts(const uint8_t * qs, v128_t * x) {
    const v128_t raw = wasm_v128_load(qs);
    x[0] = wasm_v128_and(raw, wasm_i8x16_splat(0x0F));
    x[1] = wasm_u8x16_shr(raw, 4);
}
static inline void agent_q8_1_parts(const int8_t * qs, v128_t * y) {
    y[0] = wasm_v128_load(qs);
    y[1] = wasm_v128_load(qs + 16);
}
// The form of the dot product the kernels use (see patch_llama.py): 1 the 16-bit one, 0 the
// 32-bit one. Set by agent_q4_1_choose_dot before any product, read by every thread after.
static int agent_q_dot_i16 = 0;
// A block's 32 products summed into eight i16 lanes (pmaddubsw on x86): each lane at most
// 2 * 2 * 15 * 128 = 7,680 in size, so two lanes still add up within i16.
static inline v128_t agent_q_dot16(const v128_t * x, const v128_t * y) {
    return wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(y[0], x[0]), wasm_i16x8_relaxed_dot_i8x16_i7x16(y[1], x[1]));
}
// A block's 32 products summed into four i32 lanes: one instruction each half with AVX-VNNI.
static inline v128_t agent_q_dot32(const v128_t * x, const v128_t * y) {
    return wasm_i32x4_relaxed_dot_i8x16_i7x16_add(y[1], x[1],
        wasm_i32x4_relaxed_dot_i8x16_i7x16_add(y[0], x[0], wasm_i32x4_splat(0)));
}
static inline __attribute__((always_inline)) v128_t agent_q_dot(const int dot16, const v128_t * x, const v128_t * y) {
    return dot16 ? wasm_i32x4_extadd_pairwise_i16x8(agent_q_dot16(x, y)) : agent_q_dot32(x, y);
}
static inline v128_t agent_i32x4_sums4(v128_t a, v128_t b, v128_t c, v128_t d);
// Four rows' block sums in lanes 0-3. In the 16-bit form two rows' i16 lanes are added in pairs
// before widening, so two widenings serve four rows.
static inline __attribute__((always_inline)) v128_t agent_q_dots4(const int dot16, const v128_t x[4][AGENT_Q_PARTS], const v128_t * y) {
    if (!dot16) {
        return agent_i32x4_sums4(agent_q_dot32(x[0], y), agent_q_dot32(x[1], y), agent_q_dot32(x[2], y), agent_q_dot32(x[3], y));
    }
    const v128_t p0 = agent_q_dot16(x[0], y), p1 = agent_q_dot16(x[1], y);
    const v128_t p2 = agent_q_dot16(x[2], y), p3 = agent_q_dot16(x[3], y);
    // i32 lanes as i16 pairs: rows 0 and 1 interleaved (0, 1, 0, 1), then rows 2 and 3.
    const v128_t s01 = wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_add(
        wasm_i32x4_shuffle(p0, p1, 0, 4, 1, 5), wasm_i32x4_shuffle(p0, p1, 2, 6, 3, 7)));
    const v128_t s23 = wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_add(
        wasm_i32x4_shuffle(p2, p3, 0, 4, 1, 5), wasm_i32x4_shuffle(p2, p3, 2, 6, 3, 7)));
    return wasm_i32x4_add(wasm_i32x4_shuffle(s01, s23, 0, 1, 4, 5), wasm_i32x4_shuffle(s01, s23, 2, 3, 6, 7));
}
#else
#define AGENT_Q_PARTS 4
static inline void agent_q4_1_parts(const uint8_t * qs, v128_t * x) {
    const v128_t raw = wasm_v128_load(qs);
    const v128_t lo = wasm_v128_and(raw, wasm_i8x16_splat(0x0F));
    const v128_t hi = wasm_u8x16_shr(raw, 4);
    x[0] = wasm_u16x8_extend_low_u8x16(lo);
    x[1] = wasm_u16x8_extend_high_u8x16(lo);
    x[2] = wasm_u16x8_extend_low_u8x16(hi);
    x[3] = wasm_u16x8_extend_high_u8x16(hi);
}
static inline void agent_q8_1_parts(const int8_t * qs, v128_t * y) {
    const v128_t lo = wasm_v128_load(qs);
    const v128_t hi = wasm_v128_load(qs + 16);
    y[0] = wasm_i16x8_extend_low_i8x16(lo);
    y[1] = wasm_i16x8_extend_high_i8x16(lo);
    y[2] = wasm_i16x8_extend_low_i8x16(hi);
    y[3] = wasm_i16x8_extend_high_i8x16(hi);
}
static const int agent_q_dot_i16 = 0;  // one form only
static inline __attribute__((always_inline)) v128_t agent_q_dot(const int dot16, const v128_t * x, const v128_t * y) {
    (void) dot16;
    return wasm_i32x4_add(
        wasm_i32x4_add(wasm_i32x4_dot_i16x8(x[0], y[0]), wasm_i32x4_dot_i16x8(x[1], y[1])),
        wasm_i32x4_add(wasm_i32x4_dot_i16x8(x[2], y[2]), wasm_i32x4_dot_i16x8(x[3], y[3])));
}
#endif
// The sums of a's, b's, c's and d's four lanes, in lanes 0, 1, 2 and 3.
static inline v128_t agent_i32x4_sums4(v128_t a, v128_t b, v128_t c, v128_t d) {
    const v128_t ab = wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
    const v128_t cd = wasm_i32x4_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
    return wasm_i32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}
#if !defined(__wasm_relaxed_simd__)
static inline __attribute__((always_inline)) v128_t agent_q_dots4(const int dot16, const v128_t x[4][AGENT_Q_PARTS], const v128_t * y) {
    return agent_i32x4_sums4(agent_q_dot(dot16, x[0], y), agent_q_dot(dot16, x[1], y), agent_q_dot(dot16, x[2], y), agent_q_dot(dot16, x[3], y));
}
#endif

// agent_py: picks the dot product's form (form 1: 16-bit, 0: 32-bit, -1: the faster one for
// this engine) and returns the form in use: "i16", "i32", or "simd128" (a build without relaxed
// SIMD has one form). Call it before any product, not during one. The faster form is told by
// lowering: x86 without AVX-VNNI lowers the 32-bit form through pmaddubsw, whose 16-bit pair sums
// saturate, so 127 times 255 (an operand outside 7 bits, undefined for the kernels' use) gives
// 2 * 32,767 per lane there; AVX-VNNI gives 4 * 127 * 255, and engines that read the operand as
// signed -4 * 127.
const char * agent_q4_1_choose_dot(int form) {
#if defined(__wasm_relaxed_simd__)
    if (form < 0) {
        volatile int8_t a = 127, b = -1;  // volatile: computed by the engine, not the compiler
        const v128_t dot = wasm_i32x4_relaxed_dot_i8x16_i7x16_add(wasm_i8x16_splat(a), wasm_i8x16_splat(b), wasm_i32x4_splat(0));
        form = wasm_i32x4_extract_lane(dot, 0) == 2 * 32767;
    }
    agent_q_dot_i16 = form != 0;
    return agent_q_dot_i16 ? "i16" : "i32";
#else
    (void) form;
    return "simd128";
#endif
}
static inline float agent_f32x4_sum(v128_t v) {
    return wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1) +
           wasm_f32x4_extract_lane(v, 2) + wasm_f32x4_extract_lane(v, 3);
}
// One Q4_1 row times one Q8_1 column, in the order the comment in patch_llama.py gives.
static inline __attribute__((always_inline)) float agent_q4_1_q8_1_one(const int dot16, int nb, const block_q4_1 * GGML_RESTRICT x, const block_q8_1 * GGML_RESTRICT y) {
    float sum = 0.0f, summs = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        v128_t xa[AGENT_Q_PARTS], ya[AGENT_Q_PARTS];
        agent_q4_1_parts(x[ib].qs, xa);
        agent_q8_1_parts(y[ib].qs, ya);
        const v128_t dots = agent_q_dot(dot16, xa, ya);
        const int32_t sumi = wasm_i32x4_extract_lane(dots, 0) + wasm_i32x4_extract_lane(dots, 1) +
                             wasm_i32x4_extract_lane(dots, 2) + wasm_i32x4_extract_lane(dots, 3);
        sum += (float) sumi * (GGML_CPU_FP16_TO_FP32(x[ib].d) * GGML_CPU_FP16_TO_FP32(y[ib].d));
        summs += GGML_CPU_FP16_TO_FP32(x[ib].m) * GGML_CPU_FP16_TO_FP32(y[ib].s);
    }
    return sum + summs;
}
// agent_q4_1_q8_1_one with the form in use.
static float agent_q4_1_q8_1_row(int nb, const block_q4_1 * GGML_RESTRICT x, const block_q8_1 * GGML_RESTRICT y) {
    return agent_q_dot_i16 ? agent_q4_1_q8_1_one(1, nb, x, y) : agent_q4_1_q8_1_one(0, nb, x, y);
}
#endif

void ggml_vec_dot_q4_1_q8_1(int n, float * GGML_RESTRICT s, size_t bs,""",
)
Q4_1_KERNEL = (
    "ggml/src/ggml-cpu/arch/wasm/quants.c",
    """    assert(n % qk == 0);
    assert(nrc == 1);
    UNUSED(nrc);
    UNUSED(bx);
    UNUSED(by);
    UNUSED(bs);

    const block_q4_1 * GGML_RESTRICT x = vx;
    const block_q8_1 * GGML_RESTRICT y = vy;

    float sumf = 0;

#if defined __wasm_simd128__
    v128_t sumv = wasm_f32x4_splat(0.0f);
    float summs = 0.0f;

    for (int ib = 0; ib < nb; ++ib) {
        const block_q4_1 * GGML_RESTRICT x0 = &x[ib];
        const block_q8_1 * GGML_RESTRICT y0 = &y[ib];

        summs += GGML_CPU_FP16_TO_FP32(x0->m) * GGML_CPU_FP16_TO_FP32(y0->s);

        const v128_t raw  = wasm_v128_load(x0->qs);
        const v128_t v0s  = wasm_v128_and(raw, wasm_i8x16_splat(0x0F));
        const v128_t v1s  = wasm_u8x16_shr(raw, 4);

        const v128_t ys_lo = wasm_v128_load(y0->qs);
        const v128_t ys_hi = wasm_v128_load(y0->qs + 16);

        const v128_t v0s_l = wasm_u16x8_extend_low_u8x16(v0s);
        const v128_t v0s_h = wasm_u16x8_extend_high_u8x16(v0s);
        const v128_t ylo_l = wasm_i16x8_extend_low_i8x16(ys_lo);
        const v128_t ylo_h = wasm_i16x8_extend_high_i8x16(ys_lo);
        const v128_t v1s_l = wasm_u16x8_extend_low_u8x16(v1s);
        const v128_t v1s_h = wasm_u16x8_extend_high_u8x16(v1s);
        const v128_t yhi_l = wasm_i16x8_extend_low_i8x16(ys_hi);
        const v128_t yhi_h = wasm_i16x8_extend_high_i8x16(ys_hi);

        const v128_t acc = wasm_i32x4_add(
            wasm_i32x4_add(
                wasm_i32x4_dot_i16x8(v0s_l, ylo_l),
                wasm_i32x4_dot_i16x8(v0s_h, ylo_h)),
            wasm_i32x4_add(
                wasm_i32x4_dot_i16x8(v1s_l, yhi_l),
                wasm_i32x4_dot_i16x8(v1s_h, yhi_h)));

        sumv = wasm_f32x4_add(sumv,
            wasm_f32x4_mul(
                wasm_f32x4_convert_i32x4(acc),
                wasm_f32x4_splat(GGML_CPU_FP16_TO_FP32(x0->d) * GGML_CPU_FP16_TO_FP32(y0->d))));
    }

    sumf = wasm_f32x4_extract_lane(sumv, 0) + wasm_f32x4_extract_lane(sumv, 1) +
           wasm_f32x4_extract_lane(sumv, 2) + wasm_f32x4_extract_lane(sumv, 3) + summs;

    *s = sumf;
""",
    """    assert(n % qk == 0);
    assert(nrc == 1 || nrc == 2);
    UNUSED(nrc);
    UNUSED(bx);
    UNUSED(by);
    UNUSED(bs);

    const block_q4_1 * GGML_RESTRICT x = vx;
    const block_q8_1 * GGML_RESTRICT y = vy;

    float sumf = 0;

#if defined __wasm_simd128__
    // agent_py (scripts/cpu_engine/patch_llama.py): each product as agent_q4_1_q8_1_one computes
    // it; two rows times two columns when asked (nrc == 2): s[0] row 0 column 0, s[1] row 1
    // column 0, s[bs] row 0 column 1, s[bs + 1] row 1 column 1 (ggml's ARM layout). Matrix
    // products take agent_vec_dot_q4_1_q8_1_rows4 below; this serves the rows four leave over.
    if (nrc == 2) {
        const block_q4_1 * GGML_RESTRICT x1 = (const block_q4_1 *) ((const uint8_t *) vx + bx);
        const block_q8_1 * GGML_RESTRICT y1 = (const block_q8_1 *) ((const uint8_t *) vy + by);
        s[0] = agent_q4_1_q8_1_row(nb, x, y);
        s[1] = agent_q4_1_q8_1_row(nb, x1, y);
        s[bs] = agent_q4_1_q8_1_row(nb, x, y1);
        s[bs + 1] = agent_q4_1_q8_1_row(nb, x1, y1);
        return;
    }
    sumf = agent_q4_1_q8_1_row(nb, x, y);

    *s = sumf;
""",
)

# ggml's wasm quantize_row_q8_1 (every prompt's activations, before each matrix product) stores
# its 32 bytes one lane extract at a time; two narrowing steps store them in two instructions.
# The same bytes: the values are truncated to -127..127 first, so narrowing saturates nothing.
Q8_1_QUANTIZE = (
    "ggml/src/ggml-cpu/arch/wasm/quants.c",
    """        for (int j = 0; j < 8; j++) {
            const v128_t v  = wasm_f32x4_mul(srcv[j], wasm_f32x4_splat(id));
            const v128_t vi = wasm_i32x4_trunc_sat_f32x4(v);

            y[i].qs[4*j + 0] = wasm_i32x4_extract_lane(vi, 0);
            y[i].qs[4*j + 1] = wasm_i32x4_extract_lane(vi, 1);
            y[i].qs[4*j + 2] = wasm_i32x4_extract_lane(vi, 2);
            y[i].qs[4*j + 3] = wasm_i32x4_extract_lane(vi, 3);

            accv = wasm_i32x4_add(accv, vi);
        }
""",
    """        // agent_py (scripts/cpu_engine/patch_llama.py): the bytes stored 16 at a time.
        v128_t vi[8];
        for (int j = 0; j < 8; j++) {
            vi[j] = wasm_i32x4_trunc_sat_f32x4(wasm_f32x4_mul(srcv[j], wasm_f32x4_splat(id)));
            accv = wasm_i32x4_add(accv, vi[j]);
        }
        for (int h = 0; h < 2; h++) {
            wasm_v128_store(y[i].qs + 16*h, wasm_i8x16_narrow_i16x8(
                wasm_i16x8_narrow_i32x4(vi[4*h + 0], vi[4*h + 1]),
                wasm_i16x8_narrow_i32x4(vi[4*h + 2], vi[4*h + 3])));
        }
""",
)

# Flash attention over a prompt (ggml's tiled path: 64 queries times 64 keys a tile) multiplies
# F32 tiles with simd_gemm, whose register tile for SIMD other than x86's and ARM's is 2 x 2
# vectors: 16 products per two loads and two splats. At the planner's 1,050 tokens flash
# attention takes about 30% of prefill (`node --cpu-prof`). 4 x 4 vectors, as NEON and AVX-512
# use, keep 16 accumulators (x86-64 has 16 registers for V8 to give them) and do 64 products per
# four loads and four splats: 1.6 times as fast on 64 x 64 x 64 in Chromium (a scratch
# benchmark). Exact: each sum still adds its products in the same order, one at a time.
SIMD_GEMM_TILE = (
    "ggml/src/ggml-cpu/simd-gemm.h",
    """#else
    static constexpr int GEMM_RM = 2;
    static constexpr int GEMM_RN = 2;
#endif""",
    """#elif defined(__wasm_simd128__) // agent_py (scripts/cpu_engine/patch_llama.py)
    static constexpr int GEMM_RM = 4;
    static constexpr int GEMM_RN = 4;
#else
    static constexpr int GEMM_RM = 2;
    static constexpr int GEMM_RN = 2;
#endif""",
)

# ggml computes exp four or more lanes at a time on x86, ARM and RISC-V (ggml_v_expf, a
# polynomial after a split into 2^n times exp(b), within a couple of ulps of expf), and on
# WebAssembly one value at a time with libc's expf: in soft_max (flash attention's scores: 8% of
# prefill at the planner's 1,050 tokens, `node --cpu-prof`) and in silu (the feed-forward's
# gate). The same algorithm in SIMD128, with SSE2's operations (a multiply, then an add, as
# x86 without FMA computes it), so both of our builds compute the same floats.
WASM_EXPF = (
    "ggml/src/ggml-cpu/vec.h",
    """    return _mm_div_ps(x, one_plus_exp_neg_x);
}

#elif defined(__riscv_v_intrinsic)""",
    """    return _mm_div_ps(x, one_plus_exp_neg_x);
}

#elif defined(__wasm_simd128__)
// agent_py (scripts/cpu_engine/patch_llama.py): exp and silu four lanes at a time, as the SSE2
// versions above compute them.
inline static v128_t ggml_v_expf(v128_t x) {
    const v128_t r = wasm_f32x4_splat(0x1.8p23f);
    const v128_t z = wasm_f32x4_add(wasm_f32x4_mul(x, wasm_f32x4_splat(0x1.715476p+0f)), r);
    const v128_t n = wasm_f32x4_sub(z, r);
    const v128_t b = wasm_f32x4_sub(wasm_f32x4_sub(x, wasm_f32x4_mul(n, wasm_f32x4_splat(0x1.62e4p-1f))),
                                    wasm_f32x4_mul(n, wasm_f32x4_splat(0x1.7f7d1cp-20f)));
    const v128_t e = wasm_i32x4_shl(z, 23);
    const v128_t k = wasm_i32x4_add(e, wasm_f32x4_splat(1.0f));
    const v128_t c = wasm_f32x4_gt(wasm_f32x4_abs(n), wasm_f32x4_splat(126.0f));
    const v128_t u = wasm_f32x4_mul(b, b);
    const v128_t j = wasm_f32x4_add(
        wasm_f32x4_mul(
            wasm_f32x4_add(wasm_f32x4_mul(wasm_f32x4_add(wasm_f32x4_mul(wasm_f32x4_splat(0x1.0e4020p-7f), b), wasm_f32x4_splat(0x1.573e2ep-5f)), u),
                           wasm_f32x4_add(wasm_f32x4_mul(wasm_f32x4_splat(0x1.555e66p-3f), b), wasm_f32x4_splat(0x1.fffdb6p-2f))),
            u),
        wasm_f32x4_mul(wasm_f32x4_splat(0x1.ffffecp-1f), b));
    if (!wasm_v128_any_true(c)) {
        return wasm_f32x4_add(wasm_f32x4_mul(j, k), k);
    }
    const v128_t g = wasm_v128_and(wasm_f32x4_le(n, wasm_f32x4_splat(0.0f)), wasm_i32x4_splat((int32_t) 0x82000000u));
    const v128_t s1 = wasm_i32x4_add(g, wasm_i32x4_splat(0x7f000000));
    const v128_t s2 = wasm_i32x4_sub(e, g);
    const v128_t d = wasm_f32x4_gt(wasm_f32x4_abs(n), wasm_f32x4_splat(192.0f));
    return wasm_v128_or(
        wasm_v128_and(d, wasm_f32x4_mul(s1, s1)),
        wasm_v128_andnot(wasm_v128_or(wasm_v128_and(c, wasm_f32x4_mul(wasm_f32x4_add(wasm_f32x4_mul(s2, j), s2), s1)),
                                      wasm_v128_andnot(wasm_f32x4_add(wasm_f32x4_mul(k, j), k), c)),
                         d));
}

inline static v128_t ggml_v_silu(v128_t x) {
    const v128_t exp_neg_x = ggml_v_expf(wasm_f32x4_sub(wasm_f32x4_splat(0.0f), x));
    return wasm_f32x4_div(x, wasm_f32x4_add(wasm_f32x4_splat(1.0f), exp_neg_x));
}

#elif defined(__riscv_v_intrinsic)""",
)
WASM_SILU = (
    "ggml/src/ggml-cpu/vec.cpp",
    """#elif defined(__ARM_NEON) && defined(__aarch64__)
    for (; i + 3 < n; i += 4) {
        vst1q_f32(y + i, ggml_v_silu(vld1q_f32(x + i)));
    }
""",
    """#elif defined(__ARM_NEON) && defined(__aarch64__)
    for (; i + 3 < n; i += 4) {
        vst1q_f32(y + i, ggml_v_silu(vld1q_f32(x + i)));
    }
#elif defined(__wasm_simd128__) // agent_py (scripts/cpu_engine/patch_llama.py)
    for (; i + 3 < n; i += 4) {
        wasm_v128_store(y + i, ggml_v_silu(wasm_v128_load(x + i)));
    }
""",
)
WASM_SWIGLU = (
    "ggml/src/ggml-cpu/vec.cpp",
    """        vst1q_f32(y + i, vmulq_f32(ggml_v_silu(vld1q_f32(x + i)), vld1q_f32(g + i)));
    }
""",
    """        vst1q_f32(y + i, vmulq_f32(ggml_v_silu(vld1q_f32(x + i)), vld1q_f32(g + i)));
    }
#elif defined(__wasm_simd128__) // agent_py (scripts/cpu_engine/patch_llama.py)
    for (; i + 3 < n; i += 4) {
        wasm_v128_store(y + i, wasm_f32x4_mul(ggml_v_silu(wasm_v128_load(x + i)), wasm_v128_load(g + i)));
    }
""",
)
WASM_SOFT_MAX = (
    "ggml/src/ggml-cpu/vec.cpp",
    """        float32x4_t val = ggml_v_expf(vsubq_f32(vld1q_f32(x + i),
                                                vdupq_n_f32(max)));
        vst1q_f32(y + i, val);
        sum += (ggml_float)vaddvq_f32(val);
    }
""",
    """        float32x4_t val = ggml_v_expf(vsubq_f32(vld1q_f32(x + i),
                                                vdupq_n_f32(max)));
        vst1q_f32(y + i, val);
        sum += (ggml_float)vaddvq_f32(val);
    }
#elif defined(__wasm_simd128__) // agent_py (scripts/cpu_engine/patch_llama.py)
    for (; i + 3 < n; i += 4) {
        const v128_t val = ggml_v_expf(wasm_f32x4_sub(wasm_v128_load(x + i), wasm_f32x4_splat(max)));
        wasm_v128_store(y + i, val);
        sum += (ggml_float) ((wasm_f32x4_extract_lane(val, 0) + wasm_f32x4_extract_lane(val, 2)) +
                             (wasm_f32x4_extract_lane(val, 1) + wasm_f32x4_extract_lane(val, 3)));
    }
""",
)

# One activation column (a token's decode) is a matrix-vector product, and ggml computes it one
# weight row per call. On this machine that is bound by memory, not arithmetic: a single stream
# of 20-byte blocks with about 30 instructions each keeps too few loads in flight, and the kernel
# reads 80 MB of weights at 2.0 GB/s where a plain SIMD read of them runs at 10-14 (one thread,
# `scripts/cpu_engine/kernel_check.sh relaxed bench`). Four rows per call read four streams at
# once and unpack the column's block once for all four: 4.5 GB/s (3.5-3.8 with SIMD128 alone).
# The same for Q8_0, the output head of models with tied embeddings (SmolLM2's: 30 MB a token)
# and 257 of the 431 MB Qwen2.5-Coder-0.5B reads a token (its head, ffn_down, some attn_v),
# whose weights need all 8 bits and so keep SIMD128's dot product (relaxed SIMD's 7-bit operand
# would take two dot products per 16 weights, no fewer than SIMD128's). Its products take Q4_1's
# order: per block, in block order, sum += (float) sumi * (d_x * d_y), sumi the block's exact
# integer dot product, four rows' sums in one vector. ggml's order (four partial sums a block,
# each scaled) cost four float operations a row per block: with ours the engine prefills the
# 0.5B model at 75 tok/s instead of 71 (scripts/bench_cpu_engine.py, 2026-11-29); decoding,
# bound by the Q5_0 and Q8_0 integer work, is unchanged. Prompts take four Q4_1 rows times four columns a call (two or one where
# fewer are left): each column's block then serves four rows, each row's four columns, and each
# float operation four products (17.5 G products/s on one thread under Node, where the 2x2 kernel
# reached 10.5). Each kernel gives the floats of the order stated above
# (scripts/cpu_engine/kernel_check.cpp compares them bit for bit). The kernels take
# ggml_vec_dot_t's arguments: s[r + c * bs] is row r times column c, rows bx bytes apart,
# columns by bytes apart, nrc columns.
# Q5_0 weights times Q8_1 activations: most of the matrices of Qwen2.5-Coder-0.5B's Q4_K_M file
# (its rows of 896 values do not hold Q4_K's blocks of 256, so llama.cpp wrote them in Q5_0).
# Our kernels replace ggml's wasm one, as the Q4_1 kernels do (above), and take Q8_1
# activations (ggml's take Q8_0):
# - a weight is a nibble and a fifth bit (qh), q in 0..31, standing for d * (q - 16): Q4_1's
#   form with five bits and the minimum m = -16 d. q fits the relaxed dot product's 7-bit operand,
#   and Q8_1's block sum s = d_y * sum(y) gives the minimum's share, so no column sum is computed
#   per row (an earlier form that took 16 times each column block's sum off the integer, exact,
#   ran a third slower). The SIMD128 build widens q to 16 bits;
# - per product, in block order: sum += (float) sumi * (d_x * d_y); summs += (-16 * d_x) * s_y;
#   the result is sum + summs, with sumi the block's exact integer dot product of q and y. Both
#   builds, and every kernel below (one row; four rows times one to eight columns), compute the
#   same floats; ggml's differ (it scales four partial sums of (q - 16) * y per block).
# - in the 16-bit form of the dot product a lane holds at most 2 * 2 * 31 * 127 = 15,748, and two
#   rows' lanes added in pairs (agent_q_dots4) at most 31,496: within i16.
Q5_0_KERNEL_TRAITS = (
    "ggml/src/ggml-cpu/ggml-cpu.c",
    """        .vec_dot                  = ggml_vec_dot_q5_0_q8_0,
        .vec_dot_type             = GGML_TYPE_Q8_0,""",
    """        .vec_dot                  = ggml_vec_dot_q5_0_q8_0,
#if defined(__wasm_simd128__) // agent_py (scripts/cpu_engine/patch_llama.py): Q8_1, with its sums
        .vec_dot_type             = GGML_TYPE_Q8_1,
#else
        .vec_dot_type             = GGML_TYPE_Q8_0,
#endif""",
)
Q5_0_KERNEL_HELPERS = (
    "ggml/src/ggml-cpu/arch/wasm/quants.c",
    "\nvoid ggml_vec_dot_q5_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs,",
    r"""
#if defined __wasm_simd128__
// agent_py (scripts/cpu_engine/patch_llama.py): a Q5_0 block's fifth bits as 0x10 in each byte
// of a value that has it, values 0-15 in h[0] (qh's bits 0-15) and 16-31 in h[1].
static inline void agent_q5_0_high(const uint8_t * qh, v128_t * h) {
    uint32_t bits;
    memcpy(&bits, qh, sizeof bits);
    const v128_t all = wasm_i32x4_splat((int32_t) bits);
    const v128_t mask = wasm_i8x16_const(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    const v128_t low = wasm_i8x16_shuffle(all, all, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const v128_t high = wasm_i8x16_shuffle(all, all, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    h[0] = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(low, mask), mask), wasm_i8x16_splat(0x10));
    h[1] = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(high, mask), mask), wasm_i8x16_splat(0x10));
}
// A Q5_0 block's 32 weights q (0..31) as the dot product takes them (agent_q4_1_parts' layout).
static inline void agent_q5_0_parts(const block_q5_0 * GGML_RESTRICT b, v128_t * x) {
    v128_t h[2];
    agent_q5_0_high(b->qh, h);
    const v128_t raw = wasm_v128_load(b->qs);
    const v128_t lo = wasm_v128_or(wasm_v128_and(raw, wasm_i8x16_splat(0x0F)), h[0]);
    const v128_t hi = wasm_v128_or(wasm_u8x16_shr(raw, 4), h[1]);
#if defined(__wasm_relaxed_simd__)
    x[0] = lo;
    x[1] = hi;
#else
    x[0] = wasm_u16x8_extend_low_u8x16(lo);
    x[1] = wasm_u16x8_extend_high_u8x16(lo);
    x[2] = wasm_u16x8_extend_low_u8x16(hi);
    x[3] = wasm_u16x8_extend_high_u8x16(hi);
#endif
}
// One Q5_0 row times one Q8_1 column, in the order the comment in patch_llama.py gives.
static inline __attribute__((always_inline)) float agent_q5_0_q8_1_one(const int dot16, int nb, const block_q5_0 * GGML_RESTRICT x, const block_q8_1 * GGML_RESTRICT y) {
    float sum = 0.0f, summs = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        v128_t xa[AGENT_Q_PARTS], ya[AGENT_Q_PARTS];
        agent_q5_0_parts(&x[ib], xa);
        agent_q8_1_parts(y[ib].qs, ya);
        const v128_t dots = agent_q_dot(dot16, xa, ya);
        const int32_t sumi = wasm_i32x4_extract_lane(dots, 0) + wasm_i32x4_extract_lane(dots, 1) +
                             wasm_i32x4_extract_lane(dots, 2) + wasm_i32x4_extract_lane(dots, 3);
        const float dx = GGML_CPU_FP16_TO_FP32(x[ib].d);
        sum += (float) sumi * (dx * GGML_CPU_FP16_TO_FP32(y[ib].d));
        summs += (-16.0f * dx) * GGML_CPU_FP16_TO_FP32(y[ib].s);
    }
    return sum + summs;
}
#endif

void ggml_vec_dot_q5_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs,""",
)
Q5_0_KERNEL = (
    "ggml/src/ggml-cpu/arch/wasm/quants.c",
    """    const block_q5_0 * GGML_RESTRICT x = vx;
    const block_q8_0 * GGML_RESTRICT y = vy;

#if defined __wasm_simd128__
    v128_t sumv = wasm_f32x4_splat(0.0f);
""",
    """    const block_q5_0 * GGML_RESTRICT x = vx;
    const block_q8_0 * GGML_RESTRICT y = vy;

#if defined __wasm_simd128__
    // agent_py (scripts/cpu_engine/patch_llama.py): the column is Q8_1 here (the type traits
    // say so), each product as agent_q5_0_q8_1_one computes it; ggml's kernel below no longer
    // runs. Matrix products take agent_vec_dot_q5_0_q8_1_rows4; this serves the rows four
    // leave over.
    const block_q8_1 * GGML_RESTRICT y1 = vy;
    if (agent_q_dot_i16) {
        *s = agent_q5_0_q8_1_one(1, nb, x, y1);
    } else {
        *s = agent_q5_0_q8_1_one(0, nb, x, y1);
    }
    return;
    v128_t sumv = wasm_f32x4_splat(0.0f);
""",
)

ROWS_KERNELS = (
    "ggml/src/ggml-cpu/arch/wasm/quants.c",
    "\nvoid ggml_vec_dot_q8_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs,",
    r"""
#if defined __wasm_simd128__
// agent_py (scripts/cpu_engine/patch_llama.py): a Q8_0 block's 32 values widened to 16 bits.
static inline void agent_q8_0_wide(const int8_t * qs, v128_t * w) {
    const v128_t lo = wasm_v128_load(qs), hi = wasm_v128_load(qs + 16);
    w[0] = wasm_i16x8_extend_low_i8x16(lo);
    w[1] = wasm_i16x8_extend_high_i8x16(lo);
    w[2] = wasm_i16x8_extend_low_i8x16(hi);
    w[3] = wasm_i16x8_extend_high_i8x16(hi);
}
// Two widened Q8_0 blocks' 32 products summed into four i32 lanes.
static inline v128_t agent_q8_0_dot(const v128_t * x, const v128_t * y) {
    return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(x[0], y[0]), wasm_i32x4_dot_i16x8(x[1], y[1])),
                          wasm_i32x4_add(wasm_i32x4_dot_i16x8(x[2], y[2]), wasm_i32x4_dot_i16x8(x[3], y[3])));
}
// One Q8_0 row times one Q8_0 column, in the order the comment in patch_llama.py gives.
static inline float agent_q8_0_q8_0_one(int nb, const block_q8_0 * GGML_RESTRICT x, const block_q8_0 * GGML_RESTRICT y) {
    float sum = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        v128_t xw[4], yw[4];
        agent_q8_0_wide(x[ib].qs, xw);
        agent_q8_0_wide(y[ib].qs, yw);
        const v128_t dots = agent_q8_0_dot(xw, yw);
        const int32_t sumi = wasm_i32x4_extract_lane(dots, 0) + wasm_i32x4_extract_lane(dots, 1) +
                             wasm_i32x4_extract_lane(dots, 2) + wasm_i32x4_extract_lane(dots, 3);
        sum += (float) sumi * (GGML_CPU_FP16_TO_FP32(x[ib].d) * GGML_CPU_FP16_TO_FP32(y[ib].d));
    }
    return sum;
}

// agent_py: four Q4_1 weight rows times nc Q8_1 activation
// columns, each product as agent_q4_1_q8_1_one computes it. A block's four integer sums, one per
// row, share a vector (agent_i32x4_sums4), so each float operation serves four products.
static inline __attribute__((always_inline)) void agent_q4_1_q8_1_rows4_cols(const int dot16, const int nc, int nb, float * GGML_RESTRICT s, size_t bs, const block_q4_1 * GGML_RESTRICT const * x, const block_q8_1 * GGML_RESTRICT const * y) {
    v128_t sum[8], summs[8];
    for (int c = 0; c < nc; ++c) sum[c] = summs[c] = wasm_f32x4_splat(0.0f);
    for (int ib = 0; ib < nb; ++ib) {
        v128_t xa[4][AGENT_Q_PARTS];
        for (int r = 0; r < 4; ++r) agent_q4_1_parts(x[r][ib].qs, xa[r]);
        const v128_t dx = wasm_f32x4_make(GGML_CPU_FP16_TO_FP32(x[0][ib].d), GGML_CPU_FP16_TO_FP32(x[1][ib].d),
                                          GGML_CPU_FP16_TO_FP32(x[2][ib].d), GGML_CPU_FP16_TO_FP32(x[3][ib].d));
        const v128_t mx = wasm_f32x4_make(GGML_CPU_FP16_TO_FP32(x[0][ib].m), GGML_CPU_FP16_TO_FP32(x[1][ib].m),
                                          GGML_CPU_FP16_TO_FP32(x[2][ib].m), GGML_CPU_FP16_TO_FP32(x[3][ib].m));
        for (int c = 0; c < nc; ++c) {
            v128_t ya[AGENT_Q_PARTS];
            agent_q8_1_parts(y[c][ib].qs, ya);
            const v128_t sumi = agent_q_dots4(dot16, xa, ya);
            const v128_t d = wasm_f32x4_mul(dx, wasm_f32x4_splat(GGML_CPU_FP16_TO_FP32(y[c][ib].d)));
            sum[c] = wasm_f32x4_add(sum[c], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(sumi), d));
            summs[c] = wasm_f32x4_add(summs[c], wasm_f32x4_mul(mx, wasm_f32x4_splat(GGML_CPU_FP16_TO_FP32(y[c][ib].s))));
        }
    }
    for (int c = 0; c < nc; ++c) wasm_v128_store(s + c * bs, wasm_f32x4_add(sum[c], summs[c]));
}

// One copy of the kernel per column count, each with its constants folded in (and, called with a
// constant dot16, per form).
static inline __attribute__((always_inline)) void agent_q4_1_q8_1_rows4_ncols(const int dot16, int nrc, int nb, float * GGML_RESTRICT s, size_t bs, const block_q4_1 * GGML_RESTRICT const * x, const block_q8_1 * GGML_RESTRICT const * y) {
    if (nrc == 8) {
        agent_q4_1_q8_1_rows4_cols(dot16, 8, nb, s, bs, x, y);
    } else if (nrc == 4) {
        agent_q4_1_q8_1_rows4_cols(dot16, 4, nb, s, bs, x, y);
    } else if (nrc == 2) {
        agent_q4_1_q8_1_rows4_cols(dot16, 2, nb, s, bs, x, y);
    } else {
        agent_q4_1_q8_1_rows4_cols(dot16, 1, nb, s, bs, x, y);
    }
}

// agent_py: four Q4_1 weight rows times one, two, four or eight Q8_1 columns (nrc): one column
// is a token's decode, more a prompt's.
void agent_vec_dot_q4_1_q8_1_rows4(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc) {
    assert(nrc == 1 || nrc == 2 || nrc == 4 || nrc == 8);
    const int nb = n / QK8_1;
    const block_q4_1 * GGML_RESTRICT x[4];
    const block_q8_1 * GGML_RESTRICT y[8];
    for (int r = 0; r < 4; ++r) x[r] = (const block_q4_1 *) ((const uint8_t *) vx + r * bx);
    for (int c = 0; c < nrc; ++c) y[c] = (const block_q8_1 *) ((const uint8_t *) vy + c * by);
    if (agent_q_dot_i16) {
        agent_q4_1_q8_1_rows4_ncols(1, nrc, nb, s, bs, x, y);
    } else {
        agent_q4_1_q8_1_rows4_ncols(0, nrc, nb, s, bs, x, y);
    }
}

// agent_py: four Q5_0 weight rows times nc Q8_1 activation columns, each product as
// agent_q5_0_q8_1_one computes it; a block's four rows share a vector, as for Q4_1.
static inline __attribute__((always_inline)) void agent_q5_0_q8_1_rows4_cols(const int dot16, const int nc, int nb, float * GGML_RESTRICT s, size_t bs, const block_q5_0 * GGML_RESTRICT const * x, const block_q8_1 * GGML_RESTRICT const * y) {
    v128_t sum[8], summs[8];
    for (int c = 0; c < nc; ++c) sum[c] = summs[c] = wasm_f32x4_splat(0.0f);
    for (int ib = 0; ib < nb; ++ib) {
        v128_t xa[4][AGENT_Q_PARTS];
        for (int r = 0; r < 4; ++r) agent_q5_0_parts(&x[r][ib], xa[r]);
        const v128_t dx = wasm_f32x4_make(GGML_CPU_FP16_TO_FP32(x[0][ib].d), GGML_CPU_FP16_TO_FP32(x[1][ib].d),
                                          GGML_CPU_FP16_TO_FP32(x[2][ib].d), GGML_CPU_FP16_TO_FP32(x[3][ib].d));
        const v128_t mx = wasm_f32x4_mul(wasm_f32x4_splat(-16.0f), dx);
        for (int c = 0; c < nc; ++c) {
            v128_t ya[AGENT_Q_PARTS];
            agent_q8_1_parts(y[c][ib].qs, ya);
            const v128_t sumi = agent_q_dots4(dot16, xa, ya);
            const v128_t d = wasm_f32x4_mul(dx, wasm_f32x4_splat(GGML_CPU_FP16_TO_FP32(y[c][ib].d)));
            sum[c] = wasm_f32x4_add(sum[c], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(sumi), d));
            summs[c] = wasm_f32x4_add(summs[c], wasm_f32x4_mul(mx, wasm_f32x4_splat(GGML_CPU_FP16_TO_FP32(y[c][ib].s))));
        }
    }
    for (int c = 0; c < nc; ++c) wasm_v128_store(s + c * bs, wasm_f32x4_add(sum[c], summs[c]));
}

static inline __attribute__((always_inline)) void agent_q5_0_q8_1_rows4_ncols(const int dot16, int nrc, int nb, float * GGML_RESTRICT s, size_t bs, const block_q5_0 * GGML_RESTRICT const * x, const block_q8_1 * GGML_RESTRICT const * y) {
    if (nrc == 8) {
        agent_q5_0_q8_1_rows4_cols(dot16, 8, nb, s, bs, x, y);
    } else if (nrc == 4) {
        agent_q5_0_q8_1_rows4_cols(dot16, 4, nb, s, bs, x, y);
    } else if (nrc == 2) {
        agent_q5_0_q8_1_rows4_cols(dot16, 2, nb, s, bs, x, y);
    } else {
        agent_q5_0_q8_1_rows4_cols(dot16, 1, nb, s, bs, x, y);
    }
}

// agent_py: four Q5_0 weight rows times one, two, four or eight Q8_1 columns (nrc).
void agent_vec_dot_q5_0_q8_1_rows4(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc) {
    assert(nrc == 1 || nrc == 2 || nrc == 4 || nrc == 8);
    const int nb = n / QK8_1;
    const block_q5_0 * GGML_RESTRICT x[4];
    const block_q8_1 * GGML_RESTRICT y[8];
    for (int r = 0; r < 4; ++r) x[r] = (const block_q5_0 *) ((const uint8_t *) vx + r * bx);
    for (int c = 0; c < nrc; ++c) y[c] = (const block_q8_1 *) ((const uint8_t *) vy + c * by);
    if (agent_q_dot_i16) {
        agent_q5_0_q8_1_rows4_ncols(1, nrc, nb, s, bs, x, y);
    } else {
        agent_q5_0_q8_1_rows4_ncols(0, nrc, nb, s, bs, x, y);
    }
}

// agent_py: four Q8_0 weight rows times nc Q8_0 columns, each product as agent_q8_0_q8_0_one
// computes it; a block's four rows share a vector, as for Q4_1. A row block is widened once for
// all columns, and a column block once for all four rows.
static inline __attribute__((always_inline)) void agent_q8_0_q8_0_rows4_cols(const int nc, int nb, float * GGML_RESTRICT s, size_t bs, const block_q8_0 * GGML_RESTRICT const * x, const block_q8_0 * GGML_RESTRICT const * y) {
    v128_t sum[4];
    for (int c = 0; c < nc; ++c) sum[c] = wasm_f32x4_splat(0.0f);
    for (int ib = 0; ib < nb; ++ib) {
        v128_t xw[4][4];
        for (int r = 0; r < 4; ++r) agent_q8_0_wide(x[r][ib].qs, xw[r]);
        const v128_t dx = wasm_f32x4_make(GGML_CPU_FP16_TO_FP32(x[0][ib].d), GGML_CPU_FP16_TO_FP32(x[1][ib].d),
                                          GGML_CPU_FP16_TO_FP32(x[2][ib].d), GGML_CPU_FP16_TO_FP32(x[3][ib].d));
        for (int c = 0; c < nc; ++c) {
            v128_t yw[4];
            agent_q8_0_wide(y[c][ib].qs, yw);
            const v128_t sumi = agent_i32x4_sums4(agent_q8_0_dot(xw[0], yw), agent_q8_0_dot(xw[1], yw),
                                                  agent_q8_0_dot(xw[2], yw), agent_q8_0_dot(xw[3], yw));
            const v128_t d = wasm_f32x4_mul(dx, wasm_f32x4_splat(GGML_CPU_FP16_TO_FP32(y[c][ib].d)));
            sum[c] = wasm_f32x4_add(sum[c], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(sumi), d));
        }
    }
    for (int c = 0; c < nc; ++c) wasm_v128_store(s + c * bs, sum[c]);
}

// agent_py: four Q8_0 weight rows times one, two or four Q8_0 columns (nrc).
void agent_vec_dot_q8_0_q8_0_rows4(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc) {
    assert(nrc == 1 || nrc == 2 || nrc == 4);
    const int nb = n / QK8_0;
    const block_q8_0 * GGML_RESTRICT x[4];
    const block_q8_0 * GGML_RESTRICT y[4];
    for (int r = 0; r < 4; ++r) x[r] = (const block_q8_0 *) ((const uint8_t *) vx + r * bx);
    for (int c = 0; c < nrc; ++c) y[c] = (const block_q8_0 *) ((const uint8_t *) vy + c * by);
    if (nrc == 4) {
        agent_q8_0_q8_0_rows4_cols(4, nb, s, bs, x, y);
    } else if (nrc == 2) {
        agent_q8_0_q8_0_rows4_cols(2, nb, s, bs, x, y);
    } else {
        agent_q8_0_q8_0_rows4_cols(1, nb, s, bs, x, y);
    }
}
#endif

void ggml_vec_dot_q8_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs,""",
)
Q8_0_KERNEL = (
    "ggml/src/ggml-cpu/arch/wasm/quants.c",
    """    const block_q8_0 * GGML_RESTRICT x = vx;
    const block_q8_0 * GGML_RESTRICT y = vy;

    int ib = 0;
    float sumf = 0;

#if defined __wasm_simd128__
    v128_t sumv = wasm_f32x4_splat(0.0f);
""",
    """    const block_q8_0 * GGML_RESTRICT x = vx;
    const block_q8_0 * GGML_RESTRICT y = vy;

    int ib = 0;
    float sumf = 0;

#if defined __wasm_simd128__
    // agent_py (scripts/cpu_engine/patch_llama.py): each product as agent_q8_0_q8_0_one computes
    // it; ggml's kernel below no longer runs. Matrix products take agent_vec_dot_q8_0_q8_0_rows4;
    // this serves the rows four leave over.
    *s = agent_q8_0_q8_0_one(nb, x, y);
    return;
    v128_t sumv = wasm_f32x4_splat(0.0f);
""",
)
ROWS_KERNELS_DECLARED = (
    "ggml/src/ggml-cpu/ggml-cpu.c",
    "\nstatic void ggml_compute_forward_mul_mat_one_chunk(",
    """
#if defined(__wasm_simd128__)
// agent_py (scripts/cpu_engine/patch_llama.py): four weight rows a call, in arch/wasm/quants.c.
void agent_vec_dot_q4_1_q8_1_rows4(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc);
void agent_vec_dot_q5_0_q8_1_rows4(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc);
void agent_vec_dot_q8_0_q8_0_rows4(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc);
#endif

static void ggml_compute_forward_mul_mat_one_chunk(""",
)

# ggml runs a 2x2 kernel only when the activation columns pair up evenly (an even number of
# tokens, and even chunks). A prompt's last batch is as often odd, and SmolLM2's prompts are odd
# half the time: for one matrix (no batch of matrices, whose pairs could straddle two of them)
# the last column of an odd range goes through the 1x1 kernel instead, so the rest keeps the 2x2
# (and Q4_1 four columns a call, below).
MUL_MAT_ODD_COLUMNS = (
    "ggml/src/ggml-cpu/ggml-cpu.c",
    "        if ((nr0 % 2 != 0) || (ne11 % 2 != 0) || ((ir0_end - ir0_start) % 2 != 0) || ((ir1_end - ir1_start) % 2 != 0)) {",
    "        // agent_py (scripts/cpu_engine/patch_llama.py): an odd column range of one matrix keeps\n"
    "        // the 2x2 kernel; its last column goes through the 1x1 one (mul_mat_one_chunk).\n"
    "        const bool one_matrix = ne12 == 1 && ne13 == 1;\n"
    "        if ((nr0 % 2 != 0) || ((ir0_end - ir0_start) % 2 != 0) ||\n"
    "            (!one_matrix && ((ne11 % 2 != 0) || ((ir1_end - ir1_start) % 2 != 0)))) {",
)
# mul_mat_one_chunk takes as many columns a call as each call computes (nrc, below): room in tmp
# for eight of 16 rows.
MUL_MAT_COLUMNS_A_CALL = (
    "ggml/src/ggml-cpu/ggml-cpu.c",
    """    float tmp[32];

    for (int64_t iir1 = ir1_start; iir1 < ir1_end; iir1 += blck_1) {
        for (int64_t iir0 = ir0_start; iir0 < ir0_end; iir0 += blck_0) {
            for (int64_t ir1 = iir1; ir1 < iir1 + blck_1 && ir1 < ir1_end; ir1 += num_rows_per_vec_dot) {""",
    """    float tmp[128]; // agent_py (scripts/cpu_engine/patch_llama.py): up to eight columns a call

    for (int64_t iir1 = ir1_start; iir1 < ir1_end; iir1 += blck_1) {
        for (int64_t iir0 = ir0_start; iir0 < ir0_end; iir0 += blck_0) {
            for (int64_t ir1 = iir1, nrc = 1; ir1 < iir1 + blck_1 && ir1 < ir1_end; ir1 += nrc) {""",
)
MUL_MAT_ODD_COLUMNS_CHUNK = (
    "ggml/src/ggml-cpu/ggml-cpu.c",
    """                for (int64_t ir0 = iir0; ir0 < iir0 + blck_0 && ir0 < ir0_end; ir0 += num_rows_per_vec_dot) {
                    vec_dot(ne00, &tmp[ir0 - iir0], (num_rows_per_vec_dot > 1 ? 16 : 0), src0_row + ir0 * nb01, (num_rows_per_vec_dot > 1 ? nb01 : 0), src1_col, (num_rows_per_vec_dot > 1 ? src1_col_stride : 0), num_rows_per_vec_dot);
                }

                for (int cn = 0; cn < num_rows_per_vec_dot; ++cn) {""",
    """                // agent_py (scripts/cpu_engine/patch_llama.py): the last column of an odd range
                // alone (see ggml_compute_forward_mul_mat).
                nrc = ir1 + num_rows_per_vec_dot <= ir1_end ? num_rows_per_vec_dot : 1;
                int64_t ir0 = iir0;
#if defined(__wasm_simd128__)
                // agent_py: four weight rows a call where a kernel takes them (arch/wasm/quants.c),
                // times eight (Q4_1, Q5_0) or four columns where this block of one matrix has them.
                const int64_t columns_left = MIN(iir1 + blck_1, ir1_end) - ir1;
                const bool eight = type == GGML_TYPE_Q4_1 || type == GGML_TYPE_Q5_0;
                if ((eight || type == GGML_TYPE_Q8_0) && ne12 == 1 && ne13 == 1 && columns_left >= 4) {
                    nrc = eight && columns_left >= 8 ? 8 : 4;
                }
                ggml_vec_dot_t const rows4 = type == GGML_TYPE_Q4_1 ? agent_vec_dot_q4_1_q8_1_rows4 :
                    type == GGML_TYPE_Q5_0 ? agent_vec_dot_q5_0_q8_1_rows4 :
                    type == GGML_TYPE_Q8_0 ? agent_vec_dot_q8_0_q8_0_rows4 : NULL;
                for (; rows4 && ir0 + 4 <= iir0 + blck_0 && ir0 + 4 <= ir0_end; ir0 += 4) {
                    rows4(ne00, &tmp[ir0 - iir0], 16, src0_row + ir0 * nb01, nb01, src1_col, src1_col_stride, nrc);
                }
#endif
                // Rows that four leave over: ggml's kernel, one or two columns a call.
                for (; ir0 < iir0 + blck_0 && ir0 < ir0_end; ir0 += (nrc > 2 ? 1 : nrc)) {
                    if (nrc > 2) {
                        for (int64_t cn = 0; cn < nrc; ++cn) {
                            vec_dot(ne00, &tmp[ir0 - iir0 + cn * 16], 0, src0_row + ir0 * nb01, 0, src1_col + cn * src1_col_stride, 0, 1);
                        }
                        continue;
                    }
                    vec_dot(ne00, &tmp[ir0 - iir0], (nrc > 1 ? 16 : 0), src0_row + ir0 * nb01, (nrc > 1 ? nb01 : 0), src1_col, (nrc > 1 ? src1_col_stride : 0), nrc);
                }

                for (int cn = 0; cn < nrc; ++cn) {""",
)

CHANGES = [
    F32_CACHE_IN_FLASH_ATTENTION,
    FLASH_ATTENTION_ONE_PROMPT_PATH,
    FLASH_ATTENTION_REAL_ROWS_SCORES,
    FLASH_ATTENTION_REAL_ROWS_SOFTMAX,
    FLASH_ATTENTION_REAL_ROWS_VALUES,
    Q4_1_KERNEL_TRAITS,
    Q4_1_KERNEL_HELPERS,
    Q4_1_KERNEL,
    Q5_0_KERNEL_TRAITS,
    Q5_0_KERNEL_HELPERS,
    Q5_0_KERNEL,
    ROWS_KERNELS,
    Q8_0_KERNEL,
    Q8_1_QUANTIZE,
    SIMD_GEMM_TILE,
    WASM_EXPF,
    WASM_SILU,
    WASM_SWIGLU,
    WASM_SOFT_MAX,
    ROWS_KERNELS_DECLARED,
    MUL_MAT_ODD_COLUMNS,
    MUL_MAT_COLUMNS_A_CALL,
    MUL_MAT_ODD_COLUMNS_CHUNK,
]


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
