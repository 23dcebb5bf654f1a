// Checks our changes to ggml's Q4_1, Q5_0 and Q8_0 matrix products and to its exp (one file, over
// 400 lines: one job, the cases of one check, built as one program by kernel_check.sh)
// (scripts/cpu_engine/patch_llama.py). Our Q4_1 kernels (one row and one column; two by two; four
// rows times one, two, four or eight columns), Q5_0 kernels (Q8_1 columns; one row; four rows
// times one to eight columns) and Q8_0 kernels (one row; four rows times one, two or four
// columns) must each give exactly the floats of the order patch_llama.py states, written here in
// plain C (each block's exact integer dot product, scaled in float, summed in block order). Both
// for even and odd column and row counts and any thread count; and
// every product must agree with a product of the dequantized weights (so a mistake all the
// kernels share shows too); soft_max and silu, which use exp, must agree with exp in double, and
// flash attention over an F32 cache with attention in double.
// Each case prints a hash of its result's bits, which must be the same
// for the SIMD128 and the relaxed SIMD libraries, and, in the relaxed one, for both forms of its
// dot product (patch_llama.py: the engine picks the faster for the CPU). Built and run under Node by
// scripts/cpu_engine/kernel_check.sh; prints one line per case and exits 1 when a case fails.
// Run for the plain and the relaxed SIMD libraries (their kernels differ).
#include "ggml.h"
#include "ggml-cpu.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <wasm_simd128.h>

// The Q4_1 kernels' dot product form (patch_llama.py): 0 the 32-bit one, 1 the 16-bit one;
// returns "i32", "i16", or "simd128" in a build with one form.
extern "C" const char * agent_q4_1_choose_dot(int form);

static uint32_t rng_state = 12345;
static float next_float() {  // a fixed sequence in [-1, 1): the same numbers on every run
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float) (rng_state >> 8) / (float) (1u << 23) - 1.0f;
}

// A hash (FNV-1a) of a result's bits: the SIMD128 and relaxed SIMD builds must print the same.
static uint32_t bits_hash(const void * data, size_t size, uint32_t hash = 2166136261u) {
    for (size_t i = 0; i < size; ++i) hash = (hash ^ ((const uint8_t *) data)[i]) * 16777619u;
    return hash;
}

// Our Q4_1 kernels' order (patch_llama.py), in plain C, for one Q4_1 row and one Q8_1 column:
// blocks of 32 values, a Q4_1 block being its scale d and minimum m (halves) then 16 bytes of two
// nibbles (values i and i + 16), a Q8_1 block its scale d and d times its sum s then 32 bytes.
static float q4_1_q8_1_in_order(int k, const uint8_t * x, const uint8_t * y) {
    const auto half = [](const uint8_t * p) {
        ggml_fp16_t h;
        memcpy(&h, p, sizeof h);
        return ggml_fp16_to_fp32(h);
    };
    float sum = 0.0f, summs = 0.0f;
    for (int b = 0; b < k / 32; ++b, x += 20, y += 36) {
        int32_t sumi = 0;
        for (int i = 0; i < 16; ++i) {
            sumi += (x[4 + i] & 15) * (int8_t) y[4 + i] + (x[4 + i] >> 4) * (int8_t) y[20 + i];
        }
        sum += (float) sumi * (half(x) * half(y));
        summs += half(x + 2) * half(y + 2);
    }
    return sum + summs;
}

// The same for one Q5_0 row and one Q8_1 column: a Q5_0 block is its scale d (a half), 4 bytes of
// fifth bits (bit i for value i) and 16 bytes of two nibbles (values i and i + 16): q in 0..31
// standing for d * (q - 16), Q4_1's form with the minimum -16 d.
static float q5_0_q8_1_in_order(int k, const uint8_t * x, const uint8_t * y) {
    const auto half = [](const uint8_t * p) {
        ggml_fp16_t h;
        memcpy(&h, p, sizeof h);
        return ggml_fp16_to_fp32(h);
    };
    float sum = 0.0f, summs = 0.0f;
    for (int b = 0; b < k / 32; ++b, x += 22, y += 36) {
        uint32_t qh;
        memcpy(&qh, x + 2, sizeof qh);
        int32_t sumi = 0;
        for (int i = 0; i < 16; ++i) {
            const int lo = (x[6 + i] & 15) | (((qh >> i) & 1) << 4);
            const int hi = (x[6 + i] >> 4) | (((qh >> (i + 16)) & 1) << 4);
            sumi += lo * (int8_t) y[4 + i] + hi * (int8_t) y[20 + i];
        }
        const float dx = half(x);
        sum += (float) sumi * (dx * half(y));
        summs += (-16.0f * dx) * half(y + 2);
    }
    return sum + summs;
}

// The same for one Q8_0 row and one Q8_0 column: a block is its scale d (a half) then 32 signed
// bytes.
static float q8_0_q8_0_in_order(int k, const uint8_t * x, const uint8_t * y) {
    const auto half = [](const uint8_t * p) {
        ggml_fp16_t h;
        memcpy(&h, p, sizeof h);
        return ggml_fp16_to_fp32(h);
    };
    float sum = 0.0f;
    for (int b = 0; b < k / 32; ++b, x += 34, y += 34) {
        int32_t sumi = 0;
        for (int i = 0; i < 32; ++i) sumi += (int8_t) x[2 + i] * (int8_t) y[2 + i];
        sum += (float) sumi * (half(x) * half(y));
    }
    return sum;
}

// Weights [k x rows] of TYPE and activations [k x columns]: the product of all columns in one
// mul_mat and in one mul_mat per column, against the exact order (the plain C above, and our
// one-row kernel) and a float reference. Returns the failures.
static int check_case(ggml_type type, int k, int rows, int columns, int threads) {
    ggml_init_params params = {256u * 1024 * 1024, nullptr, false};
    ggml_context * ctx = ggml_init(params);
    std::vector<float> weights((size_t) k * rows);
    for (float & w : weights) w = next_float();
    ggml_tensor * w = ggml_new_tensor_2d(ctx, type, k, rows);
    ggml_quantize_chunk(type, weights.data(), w->data, 0, rows, k, nullptr);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, columns);
    for (int i = 0; i < k * columns; ++i) ((float *) x->data)[i] = next_float();

    ggml_cgraph * graph = ggml_new_graph(ctx);
    ggml_tensor * all = ggml_mul_mat(ctx, w, x);
    ggml_build_forward_expand(graph, all);
    std::vector<ggml_tensor *> each(columns);
    for (int c = 0; c < columns; ++c) {
        ggml_tensor * column = ggml_view_2d(ctx, x, k, 1, x->nb[1], c * x->nb[1]);
        each[c] = ggml_mul_mat(ctx, w, column);
        ggml_build_forward_expand(graph, each[c]);
    }
    // The kernel for one row and one column, as ggml quantizes a column for it.
    const ggml_type_traits_cpu * traits = ggml_get_type_traits_cpu(type);
    if (type == GGML_TYPE_Q4_1 && (traits->vec_dot_type != GGML_TYPE_Q8_1 || ggml_row_size(type, 32) != 20 || ggml_row_size(GGML_TYPE_Q8_1, 32) != 36)) {
        printf("FAIL  Q4_1 or Q8_1 blocks are not what q4_1_q8_1_in_order reads\n");
        return 1;
    }
    if (type == GGML_TYPE_Q5_0 && (traits->vec_dot_type != GGML_TYPE_Q8_1 || ggml_row_size(type, 32) != 22)) {
        printf("FAIL  Q5_0 or Q8_1 blocks are not what q5_0_q8_1_in_order reads\n");
        return 1;
    }
    if (type == GGML_TYPE_Q8_0 && (traits->vec_dot_type != GGML_TYPE_Q8_0 || ggml_row_size(type, 32) != 34)) {
        printf("FAIL  Q8_0 blocks are not what q8_0_q8_0_in_order reads\n");
        return 1;
    }
    const bool dot_forms = type == GGML_TYPE_Q4_1 || type == GGML_TYPE_Q5_0;
    std::vector<uint8_t> quantized(ggml_row_size(traits->vec_dot_type, k));
    std::vector<float> one_by_one(rows);
    // The reference: dequantized weights times the activations, in double.
    std::vector<float> dequantized((size_t) k * rows);
    ggml_get_type_traits(type)->to_float(w->data, dequantized.data(), (int64_t) k * rows);
    int differ = 0, far = 0;
    double worst = 0;
    // Q4_1 and Q5_0: every form of the dot product the build has, each checked in full, all with
    // the same bits.
    std::string forms;
    uint32_t hash = 0;
    bool forms_differ = false;
    for (int form = 0; form < (dot_forms ? 2 : 1); ++form) {
        const char * form_name = agent_q4_1_choose_dot(form);
        if (form > 0 && strcmp(form_name, "simd128") == 0) break;  // a build with one form
        forms += (forms.empty() ? "" : " ") + std::string(form_name);
        ggml_graph_compute_with_ctx(ctx, graph, threads);
        for (int c = 0; c < columns; ++c) {
            const float * got = (const float *) ((const char *) all->data + c * all->nb[1]);
            const float * alone = (const float *) each[c]->data;
            ggml_get_type_traits_cpu(traits->vec_dot_type)->from_float((const float *) x->data + (size_t) c * k, quantized.data(), k);
            bool out_of_order = false;
            for (int r = 0; r < rows; ++r) {
                traits->vec_dot(k, &one_by_one[r], 0, (const char *) w->data + r * w->nb[1], 0, quantized.data(), 0, 1);
                const uint8_t * row = (const uint8_t *) w->data + r * w->nb[1];
                const float in_order = type == GGML_TYPE_Q4_1 ? q4_1_q8_1_in_order(k, row, quantized.data())
                                     : type == GGML_TYPE_Q5_0 ? q5_0_q8_1_in_order(k, row, quantized.data())
                                                              : q8_0_q8_0_in_order(k, row, quantized.data());
                out_of_order |= memcmp(&in_order, &one_by_one[r], sizeof in_order) != 0;
            }
            const size_t size = rows * sizeof(float);
            if (out_of_order || memcmp(got, one_by_one.data(), size) != 0 || memcmp(alone, one_by_one.data(), size) != 0) ++differ;
            for (int r = 0; r < rows; ++r) {
                double expected = 0, scale = 0;
                for (int i = 0; i < k; ++i) {
                    const double term = (double) dequantized[(size_t) r * k + i] * ((const float *) x->data)[(size_t) c * k + i];
                    expected += term;
                    scale += std::fabs(term);
                }
                // The activations are quantized to 8 bits on the way: about 1% of the terms' size.
                const double error = std::fabs(got[r] - expected) / (scale + 1e-6);
                worst = error > worst ? error : worst;
                if (error > 0.02) ++far;
            }
        }
        const uint32_t form_hash = bits_hash(all->data, (size_t) rows * columns * sizeof(float));
        forms_differ |= form > 0 && form_hash != hash;
        hash = form_hash;
    }
    agent_q4_1_choose_dot(0);
    const bool ok = differ == 0 && far == 0 && !forms_differ;
    printf("%s  %s k=%d rows=%d columns=%d threads=%d: %d column(s) differ from the exact order, %d value(s) off the reference (worst %.4f of the terms' size), dot %s%s, bits %08x\n",
           ok ? "ok  " : "FAIL", ggml_type_name(type), k, rows, columns, threads, differ, far, worst,
           dot_forms ? forms.c_str() : "-", forms_differ ? " (the forms' bits differ)" : "", hash);
    ggml_free(ctx);
    return ok ? 0 : 1;
}

// ggml's exp on WebAssembly (patch_llama.py's WASM_EXPF: four lanes at a time where libc's expf
// took one) through the ops that use it, soft_max and silu, over n values in [-40, 40) and a few
// at the ends of exp's range, against exp in double: at most 2e-6 off relatively (the algorithm
// is within a couple of ulps; a wrong coefficient or mask is far more). Prints a hash of the bits,
// which must be the same for both builds. Returns the failures.
static int check_exp(int n) {
    ggml_init_params params = {16u * 1024 * 1024, nullptr, false};
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    float * xs = (float *) x->data;
    for (int i = 0; i < n; ++i) xs[i] = 40.0f * next_float();
    const float ends[] = {-150.0f, -104.5f, -87.5f, -0.0f, 88.0f, 1e-8f};
    for (int i = 0; i < 6 && i < n; ++i) xs[i * 7] = ends[i];
    ggml_tensor * soft_max = ggml_soft_max(ctx, x);
    ggml_tensor * silu = ggml_silu(ctx, x);
    ggml_cgraph * graph = ggml_new_graph(ctx);
    ggml_build_forward_expand(graph, soft_max);
    ggml_build_forward_expand(graph, silu);
    ggml_graph_compute_with_ctx(ctx, graph, 1);
    // soft_max takes exp of x - max as a float, rounded before exp sees it: so does the reference.
    float max = xs[0];
    for (int i = 0; i < n; ++i) max = xs[i] > max ? xs[i] : max;
    const auto shifted = [&](int i) { return (double) (xs[i] - max); };
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += std::exp(shifted(i));
    int far = 0;
    double worst = 0;
    const auto compare = [&](double got, double expected) {
        const double error = std::fabs(got - expected) / (std::fabs(expected) + 1e-37);
        worst = error > worst ? error : worst;
        if (error > 2e-6) ++far;
    };
    for (int i = 0; i < n; ++i) {
        compare(((const float *) soft_max->data)[i], std::exp(shifted(i)) / sum);
        compare(((const float *) silu->data)[i], xs[i] / (1.0 + std::exp(-(double) xs[i])));
    }
    const uint32_t hash = bits_hash(silu->data, ggml_nbytes(silu), bits_hash(soft_max->data, ggml_nbytes(soft_max)));
    printf("%s  exp n=%d: soft_max and silu, %d value(s) off exp in double (worst %.2e), bits %08x\n",
           far == 0 ? "ok  " : "FAIL", n, far, worst, hash);
    ggml_free(ctx);
    return far == 0 ? 0 : 1;
}

// Flash attention over an F32 cache (patch_llama.py keeps llama.cpp from casting it to F16):
// ggml's row-by-row path for fewer than 64 query rows, its tiles (our 4x4 register tile) for
// more, with SmolLM2's heads (9 query heads over 3 KV heads of 64), the queries the last n_q of
// n_kv positions under a causal mask, against attention in double: at most 2e-5 off (the values
// are about 1). Prints a hash of the bits, the same for both builds.
static int check_attention(int n_q, int n_kv, int threads) {
    const int D = 64, heads = 9, kv_heads = 3;
    ggml_init_params params = {64u * 1024 * 1024, nullptr, false};
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, D, n_q, heads);
    ggml_tensor * k = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, D, n_kv, kv_heads);
    ggml_tensor * v = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, D, n_kv, kv_heads);
    ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, n_kv, n_q);
    for (ggml_tensor * x : {q, k, v}) {
        for (int64_t i = 0; i < ggml_nelements(x); ++i) ((float *) x->data)[i] = 2.0f * next_float();
    }
    const auto visible = [&](int i, int j) { return j <= n_kv - n_q + i; };
    for (int i = 0; i < n_q; ++i) {
        for (int j = 0; j < n_kv; ++j) {
            ((ggml_fp16_t *) mask->data)[i * n_kv + j] = ggml_fp32_to_fp16(visible(i, j) ? 0.0f : -INFINITY);
        }
    }
    const float scale = 0.125f;
    ggml_tensor * out = ggml_flash_attn_ext(ctx, q, k, v, mask, scale, 0.0f, 0.0f);
    ggml_cgraph * graph = ggml_new_graph(ctx);
    ggml_build_forward_expand(graph, out);
    ggml_graph_compute_with_ctx(ctx, graph, threads);
    const auto at = [](ggml_tensor * x, int d, int row, int head) {
        return (double) ((const float *) x->data)[((size_t) head * x->ne[1] + row) * x->ne[0] + d];
    };
    int far = 0;
    double worst = 0;
    std::vector<double> weight(n_kv);
    for (int h = 0; h < heads; ++h) {
        const int kv = h / (heads / kv_heads);
        for (int i = 0; i < n_q; ++i) {
            double max = -INFINITY, sum = 0;
            for (int j = 0; j < n_kv; ++j) {
                double s = 0;
                for (int d = 0; d < D; ++d) s += at(q, d, i, h) * at(k, d, j, kv);
                weight[j] = visible(i, j) ? s * scale : -INFINITY;
                max = weight[j] > max ? weight[j] : max;
            }
            for (int j = 0; j < n_kv; ++j) sum += weight[j] = std::exp(weight[j] - max);
            for (int d = 0; d < D; ++d) {
                double expected = 0;
                for (int j = 0; j < n_kv; ++j) expected += weight[j] * at(v, d, j, kv);
                expected /= sum;
                // The result is [D, heads, n_q]: head h of query i.
                const double got = ((const float *) out->data)[((size_t) i * heads + h) * D + d];
                const double error = std::fabs(got - expected);
                worst = error > worst ? error : worst;
                if (error > 2e-5) ++far;
            }
        }
    }
    const uint32_t hash = bits_hash(out->data, ggml_nbytes(out));
    printf("%s  attention n_q=%d n_kv=%d threads=%d: %d value(s) off attention in double (worst %.2e), bits %08x\n",
           far == 0 ? "ok  " : "FAIL", n_q, n_kv, threads, far, worst, hash);
    ggml_free(ctx);
    return far == 0 ? 0 : 1;
}

static double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// KERNEL_BENCH (kernel_check.sh VARIANT bench): one activation column times about 80 MB of Q4_1
// weights in SmolLM2's feed-forward shape (a token's decode reads that much), on one thread
// through ggml's one-row kernel row by row and through mul_mat (the four-row kernel), and
// through mul_mat on two, against a plain SIMD read of the same bytes: how close each comes to
// what memory can deliver. Numbers only, never asserted.
// The benches' work: MATRICES Q4_1 matrices [k x rows] (the same weights) times one F32
// activation matrix [k x columns], as one graph in a context of CONTEXT_MB.
struct BenchProducts {
    ggml_context * ctx;
    ggml_tensor * x;
    ggml_cgraph * graph;
    std::vector<ggml_tensor *> w;
};
static BenchProducts bench_products(size_t context_mb, int k, int rows, int matrices, int columns) {
    ggml_init_params params = {context_mb * 1024 * 1024, nullptr, false};
    BenchProducts b = {ggml_init(params), nullptr, nullptr, std::vector<ggml_tensor *>(matrices)};
    std::vector<float> weights((size_t) k * rows);
    for (float & w : weights) w = next_float();
    b.x = ggml_new_tensor_2d(b.ctx, GGML_TYPE_F32, k, columns);
    for (int i = 0; i < k * columns; ++i) ((float *) b.x->data)[i] = next_float();
    b.graph = ggml_new_graph(b.ctx);
    for (ggml_tensor *& m : b.w) {
        m = ggml_new_tensor_2d(b.ctx, GGML_TYPE_Q4_1, k, rows);
        ggml_quantize_chunk(GGML_TYPE_Q4_1, weights.data(), m->data, 0, rows, k, nullptr);
        ggml_build_forward_expand(b.graph, ggml_mul_mat(b.ctx, m, b.x));
    }
    return b;
}

static void bench() {
    const int k = 576, rows = 1536, matrices = 145;  // 145 x 553 KB = 80 MB
    BenchProducts b = bench_products(160, k, rows, matrices, 1);
    ggml_context * ctx = b.ctx;
    ggml_tensor * x = b.x;
    ggml_cgraph * graph = b.graph;
    const std::vector<ggml_tensor *> & w = b.w;
    const double bytes = (double) matrices * ggml_nbytes(w[0]);
    const ggml_type_traits_cpu * traits = ggml_get_type_traits_cpu(GGML_TYPE_Q4_1);
    std::vector<uint8_t> column(ggml_row_size(traits->vec_dot_type, k));
    traits->from_float((const float *) x->data, column.data(), k);
    std::vector<float> out(rows);
    for (int round = 0; round < 3; ++round) {
        auto start = std::chrono::steady_clock::now();
        v128_t sum = wasm_i32x4_splat(0), sum2 = sum;
        for (ggml_tensor * m : w) {
            const v128_t * p = (const v128_t *) m->data;
            const v128_t * end = p + ggml_nbytes(m) / 64 * 4;
            for (; p < end; p += 4) {
                sum = wasm_v128_xor(sum, wasm_v128_xor(wasm_v128_load(p), wasm_v128_load(p + 1)));
                sum2 = wasm_v128_xor(sum2, wasm_v128_xor(wasm_v128_load(p + 2), wasm_v128_load(p + 3)));
            }
        }
        sum = wasm_v128_xor(sum, sum2);
        const double read = seconds_since(start);
        start = std::chrono::steady_clock::now();
        for (ggml_tensor * m : w) {
            for (int r = 0; r < rows; ++r) traits->vec_dot(k, &out[r], 0, (const char *) m->data + r * m->nb[1], 0, column.data(), 0, 1);
        }
        const double one_row = seconds_since(start);
        start = std::chrono::steady_clock::now();
        ggml_graph_compute_with_ctx(ctx, graph, 1);
        const double mul_mat = seconds_since(start);
        start = std::chrono::steady_clock::now();
        ggml_graph_compute_with_ctx(ctx, graph, 2);
        const double mul_mat_2 = seconds_since(start);
        printf("bench %.0f MB of Q4_1, one column, one thread: plain read %.1f GB/s (%d); one row a call %.1f GB/s; mul_mat %.1f GB/s (two threads: %.1f GB/s)\n",
               bytes / 1e6, bytes / read / 1e9, wasm_i32x4_extract_lane(sum, 0) & 1, bytes / one_row / 1e9, bytes / mul_mat / 1e9, bytes / mul_mat_2 / 1e9);
    }
    ggml_free(ctx);
}

// KERNEL_BENCH, prompts: 130 activation columns (the speed bench's prompt) times 16 Q4_1 matrices
// of SmolLM2's feed-forward shape, on one thread and two: the four-row kernel's speed on prompts.
static void bench_prompt() {
    const int k = 576, rows = 1536, matrices = 16, columns = 130;
    BenchProducts b = bench_products(64, k, rows, matrices, columns);
    ggml_context * ctx = b.ctx;
    ggml_cgraph * graph = b.graph;
    const double products = (double) matrices * rows * k * columns;
    for (int round = 0; round < 3; ++round) {
        for (int form = 0; form < 2; ++form) {
            const char * form_name = agent_q4_1_choose_dot(form);
            if (form > 0 && strcmp(form_name, "simd128") == 0) break;  // a build with one form
            double rate[2];
            for (int threads : {1, 2}) {
                const auto start = std::chrono::steady_clock::now();
                ggml_graph_compute_with_ctx(ctx, graph, threads);
                rate[threads - 1] = products / seconds_since(start) / 1e9;
            }
            printf("bench %d columns times %d Q4_1 matrices %dx%d, dot %s: %.1f G products/s on one thread, %.1f on two\n",
                   columns, matrices, rows, k, form_name, rate[0], rate[1]);
        }
    }
    agent_q4_1_choose_dot(0);
    ggml_free(ctx);
}

// The program's entry under its C name: clang 19 (the relaxed build's) would otherwise name
// main for a libc newer than emscripten 3.1.6's.
static int run();
extern "C" int kernel_check_main() __asm__("main");
extern "C" int kernel_check_main() { return run(); }

static int run() {
#ifdef KERNEL_BENCH
    bench();
    bench_prompt();
    return 0;
#endif
    int failures = 0;
    const int columns[] = {1, 2, 3, 7, 16, 33};
    for (int threads : {1, 2}) {
        for (int n : columns) failures += check_case(GGML_TYPE_Q4_1, 576, 64, n, threads);
    }
    failures += check_case(GGML_TYPE_Q4_1, 1536, 576, 17, 2);  // SmolLM2's feed-forward shape, an odd prompt
    // Row counts that four-row groups do not divide (the rest goes through the one-row kernel, or
    // two by two), and the Q8_0 output head's kernel.
    for (int threads : {1, 2}) {
        for (int n : {1, 3, 6, 9}) failures += check_case(GGML_TYPE_Q4_1, 576, 30, n, threads);
        for (int n : {1, 2, 3}) failures += check_case(GGML_TYPE_Q8_0, 576, 70, n, threads);
    }
    failures += check_case(GGML_TYPE_Q4_1, 576, 13, 1, 2);
    failures += check_case(GGML_TYPE_Q4_1, 576, 13, 5, 2);
    // Q5_0 (Qwen2.5-Coder-0.5B's matrices) and Q8_0 times prompts: four rows times one, two,
    // four or eight columns, odd counts, rows four do not divide.
    for (int threads : {1, 2}) {
        for (int n : {1, 2, 3, 7, 16, 33}) failures += check_case(GGML_TYPE_Q5_0, 896, 64, n, threads);
        for (int n : {4, 9, 17}) failures += check_case(GGML_TYPE_Q8_0, 576, 70, n, threads);
    }
    failures += check_case(GGML_TYPE_Q5_0, 896, 30, 9, 2);
    failures += check_case(GGML_TYPE_Q5_0, 4864, 96, 17, 2);  // Qwen's feed-forward width
    failures += check_exp(1027);
    failures += check_attention(1, 1100, 2);  // a token's decode at the planner's context
    failures += check_attention(17, 300, 1);  // a task's own words after a prefilled prompt
    failures += check_attention(70, 150, 2);  // ggml's tiles (64 query rows or more)
    printf(failures ? "%d case(s) failed\n" : "all cases passed\n", failures);
    return failures ? 1 : 0;
}
