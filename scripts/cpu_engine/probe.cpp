// The speed probe of scripts/cpu_engine/probe.sh: prefill a prompt of N tokens, then decode M
// tokens one at a time (greedy), R times with the KV cache cleared in between; prints tokens/s
// per run. usage: llama_probe MODEL.gguf THREADS [PROMPT_TOKENS=1000] [DECODE=64] [REPEAT=3]
#include "llama.h"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

static double now_s() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

static void quiet_log(enum ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

int main(int argc, char ** argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s model threads [n_prompt] [n_decode] [repeat]\n", argv[0]); return 2; }
    const char * path = argv[1];
    const int threads  = atoi(argv[2]);
    const int n_prompt = argc > 3 ? atoi(argv[3]) : 1000;
    const int n_decode = argc > 4 ? atoi(argv[4]) : 64;
    const int repeat   = argc > 5 ? atoi(argv[5]) : 3;

    llama_log_set(quiet_log, nullptr);
    llama_backend_init();
    printf("system: %s\n", llama_print_system_info());

    double t0 = now_s();
    llama_model_params mp = llama_model_default_params();
    mp.load_mode = LLAMA_LOAD_MODE_NONE;
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(path, mp);
    if (!model) { fprintf(stderr, "load failed\n"); return 1; }
    printf("model loaded in %.2f s\n", now_s() - t0);

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 2048;
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.no_perf = false;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "context failed\n"); return 1; }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    // A prompt of ordinary English text, repeated until it has n_prompt tokens.
    std::string text;
    const char * para = "The harbour town wakes before dawn: fishing boats leave the quay, the bakery lights its ovens, "
        "and the ferry to the islands sounds its horn twice. Market stalls fill the square by seven. ";
    std::vector<llama_token> prompt;
    for (int part = 0; (int) prompt.size() < n_prompt; ++part) {
        text += "Part " + std::to_string(part) + ". " + para;
        prompt.resize(text.size() + 16);
        int n = llama_tokenize(vocab, text.c_str(), (int) text.size(), prompt.data(), (int) prompt.size(), true, false);
        prompt.resize(std::max(n, 0));
    }
    prompt.resize(n_prompt);

    auto run = [&](int r) {
        llama_memory_clear(llama_get_memory(ctx), true);
        double a = now_s();
        for (int i = 0; i < n_prompt; i += 512) {
            int n = std::min(512, n_prompt - i);
            if (llama_decode(ctx, llama_batch_get_one(prompt.data() + i, n)) != 0) { fprintf(stderr, "decode failed\n"); exit(1); }
        }
        double b = now_s();
        llama_token tok = 0;
        std::string out;
        for (int i = 0; i < n_decode; ++i) {
            const float * logits = llama_get_logits_ith(ctx, -1);
            tok = (llama_token) (std::max_element(logits, logits + n_vocab) - logits);
            char piece[64];
            int len = llama_token_to_piece(vocab, tok, piece, sizeof piece, 0, true);
            if (len > 0) out.append(piece, len);
            if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) { fprintf(stderr, "decode failed\n"); exit(1); }
        }
        double c = now_s();
        if (r == repeat - 1) printf("TEXT: %s\n", out.c_str());
        printf("RUN %d threads=%d prefill %d tok %.2f s = %.1f tok/s | decode %d tok %.2f s = %.1f tok/s\n",
               r, threads, n_prompt, b - a, n_prompt / (b - a), n_decode, c - b, n_decode / (c - b));
        fflush(stdout);
    };
    // warm-up (allocations, first-touch), not counted
    {
        llama_token t = prompt[0];
        llama_decode(ctx, llama_batch_get_one(&t, 1));
    }
    for (int r = 0; r < repeat; ++r) run(r);
    llama_perf_context_print(ctx);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
