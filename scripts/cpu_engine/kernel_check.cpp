// Checks our changes to ggml's Q4_1 matrix product (scripts/cpu_engine/patch_llama.py): the
// 2x2 kernel, which ggml runs for several activation columns at once, must give exactly the
// floats the 1x1 kernel gives for one column at a time, for even and odd column counts and any
// thread count; and both must agree with a product of the dequantized weights (so a mistake the
// two kernels share shows too). Each case prints a hash of the product's bits, which must be the
// same for the SIMD128 and the relaxed SIMD libraries. Built and run under Node by scripts/cpu_engine/kernel_check.sh;
// prints one line per case and exits 1 when a case fails. Run for the plain and the relaxed SIMD
// libraries (their kernels differ).
#include "ggml.h"
#include "ggml-cpu.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

static uint32_t rng_state = 12345;
static float next_float() {  // a fixed sequence in [-1, 1): the same numbers on every run
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float) (rng_state >> 8) / (float) (1u << 23) - 1.0f;
}

// Weights [k x rows] in Q4_1 and activations [k x columns]: the product of all columns in one
// mul_mat, against one mul_mat per column and a float reference. Returns the failures.
static int check_case(int k, int rows, int columns, int threads) {
    ggml_init_params params = {256u * 1024 * 1024, nullptr, false};
    ggml_context * ctx = ggml_init(params);
    std::vector<float> weights((size_t) k * rows);
    for (float & w : weights) w = next_float();
    ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_1, k, rows);
    ggml_quantize_chunk(GGML_TYPE_Q4_1, weights.data(), w->data, 0, rows, k, nullptr);
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
    ggml_graph_compute_with_ctx(ctx, graph, threads);

    // The reference: dequantized weights times the activations, in double.
    std::vector<float> dequantized((size_t) k * rows);
    ggml_get_type_traits(GGML_TYPE_Q4_1)->to_float(w->data, dequantized.data(), (int64_t) k * rows);
    int differ = 0, far = 0;
    double worst = 0;
    for (int c = 0; c < columns; ++c) {
        const float * got = (const float *) ((const char *) all->data + c * all->nb[1]);
        const float * alone = (const float *) each[c]->data;
        if (memcmp(got, alone, rows * sizeof(float)) != 0) ++differ;
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
    // A hash of the product's bits: the SIMD128 and relaxed SIMD builds must print the same.
    uint32_t hash = 2166136261u;
    for (size_t i = 0; i < (size_t) rows * columns * sizeof(float); ++i) {
        hash = (hash ^ ((const uint8_t *) all->data)[i]) * 16777619u;
    }
    const bool ok = differ == 0 && far == 0;
    printf("%s  k=%d rows=%d columns=%d threads=%d: %d column(s) differ from the 1x1 kernel's, %d value(s) off the reference (worst %.4f of the terms' size), bits %08x\n",
           ok ? "ok  " : "FAIL", k, rows, columns, threads, differ, far, worst, hash);
    ggml_free(ctx);
    return ok ? 0 : 1;
}

// The program's entry under its C name: clang 19 (the relaxed build's) would otherwise name
// main for a libc newer than emscripten 3.1.6's.
static int run();
extern "C" int kernel_check_main() __asm__("main");
extern "C" int kernel_check_main() { return run(); }

static int run() {
    int failures = 0;
    const int columns[] = {1, 2, 3, 7, 16, 33};
    for (int threads : {1, 2}) {
        for (int n : columns) failures += check_case(576, 64, n, threads);
    }
    failures += check_case(1536, 576, 17, 2);  // SmolLM2's feed-forward shape, an odd prompt
    printf(failures ? "%d case(s) failed\n" : "all cases passed\n", failures);
    return failures ? 1 : 0;
}
