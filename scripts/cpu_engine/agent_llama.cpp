// The CPU engine's llama.cpp, as a C API for JavaScript (web/worker/engines/cpu-worker.js): one model and
// one context per module instance, generation driven one step at a time so the caller can yield
// between steps, and the KV state of sequence 0 saved and restored with the tokens it holds.
//
// Contract: functions returning int return >= 0 on success and < 0 on error, with the reason in
// al_last_error(). Text results are in al_result(), valid until the next call. No C++ exception
// leaves this file. Built by scripts/cpu_engine/build.sh; checked by scripts/cpu_engine/check.mjs.
#include "llama.h"
#include "json-schema-to-grammar.h"
#include "llama-grammar.h"  // llama.cpp's internal grammar API: the stacks tell what text is forced
#include "../src/unicode.h"  // llama.cpp's own (common/ has another unicode.h, first on the path)

#include <emscripten/emscripten.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

using json = nlohmann::ordered_json;

namespace {

// A failure with a message for the caller; every exported function turns it into a return code.
struct engine_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The fewest prompt tokens computed in one batch. Batches of two tokens or more all take flash
// attention's tiled path (patch_llama.py), so a token's floats do not depend on how a prompt is
// cut; a batch of one would take the row-by-row path. Generated tokens still come one at a time.
constexpr size_t MIN_PROMPT_BATCH = 2;

struct generation {
    llama_sampler * chain = nullptr;
    llama_grammar * grammar = nullptr;
    std::vector<llama_token> pending;  // the prompt past its cached prefix, decoded by al_prefill
    size_t n_prefilled = 0;
    int max_tokens = -1;               // < 0: until end of generation or a full context
    int n_generated = 0;
    int n_forced = 0;                  // of n_generated, tokens the grammar forced (not sampled)
    bool write_forced = true;          // the "forced_text" parameter: write forced text unsampled
    bool started = false;              // the text the grammar forces before any choice is out
    bool finished = false;
    std::string partial_utf8;          // bytes of a character whose rest is in the next token
    std::vector<llama_token_data> candidates;
};

struct engine {
    llama_model * model = nullptr;
    llama_context * ctx = nullptr;
    const llama_vocab * vocab = nullptr;
    llama_batch batch{};
    int n_batch = 0;
    int n_threads = 0;
    ggml_type kv_type = GGML_TYPE_F16;  // of the KV cache (kv_cache_type)
    const char * dot_form = "";       // the Q4_1 kernels' dot product (agent_q4_1_choose_dot)
    std::vector<llama_token> cached;   // tokens whose KV is in sequence 0, in order
    generation gen;
    bool generating = false;

    std::string result;
    std::string error;
    std::vector<int32_t> tokens;
    std::vector<uint8_t> buffer;
};

engine E;
bool backend_ready = false;
std::mutex log_mutex;
std::string last_log_error;  // llama.cpp's own words for the last failure, for our messages

void quiet_log(enum ggml_log_level level, const char * text, void *) {
    if (level < GGML_LOG_LEVEL_WARN) return;
    fputs(text, stderr);
    if (level == GGML_LOG_LEVEL_ERROR) {
        std::lock_guard<std::mutex> lock(log_mutex);
        last_log_error = text;
        while (!last_log_error.empty() && (last_log_error.back() == '\n' || last_log_error.back() == ' ')) {
            last_log_error.pop_back();
        }
    }
}

std::string take_log_error() {
    std::lock_guard<std::mutex> lock(log_mutex);
    std::string text;
    text.swap(last_log_error);
    return text;
}

std::string with_log(std::string message) {
    std::string log = take_log_error();
    if (!log.empty()) message += " (llama.cpp: " + log + ")";
    return message;
}

// Runs one exported call: an engine_error or any other exception becomes -1 and a message.
template <typename F>
int guarded(F && body) {
    try {
        return body();
    } catch (const engine_error & e) {
        E.error = e.what();
    } catch (const std::bad_alloc &) {
        E.error = "out of memory";
    } catch (const std::exception & e) {
        E.error = std::string("internal error: ") + e.what();
    } catch (...) {
        E.error = "internal error";
    }
    return -1;
}

void require_model() {
    if (!E.ctx) throw engine_error("no model is loaded (call al_load first)");
}

std::string dump(const json & value) {
    // replace: metadata from a GGUF file is not guaranteed to be valid UTF-8
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string meta_string(const char * key, bool * found) {
    std::vector<char> buf(256);
    int32_t n = llama_model_meta_val_str(E.model, key, buf.data(), buf.size());
    if (n >= (int32_t) buf.size()) {
        buf.resize(n + 1);
        n = llama_model_meta_val_str(E.model, key, buf.data(), buf.size());
    }
    *found = n >= 0;
    return n >= 0 ? std::string(buf.data(), n) : std::string();
}

// The KV cache is F32 where it fits: WebAssembly has no half-precision arithmetic, and ggml's
// wasm kernels convert each F16 element of a cache on its own. With F32 (and flash attention
// reading it as it is, scripts/cpu_engine/patch_llama.py) SmolLM2 decoded twice as fast at a
// 1,000-token context. A cache that would take more than KV_F32_MAX_BYTES in F32 stays F16.
const double KV_F32_MAX_BYTES = 1024.0 * 1024 * 1024;

int meta_int(const std::string & key, int fallback) {
    bool found = false;
    const std::string value = meta_string(key.c_str(), &found);
    return found && !value.empty() ? std::atoi(value.c_str()) : fallback;
}

ggml_type kv_cache_type(int n_ctx) {
    bool found = false;
    const std::string arch = meta_string("general.architecture", &found);
    const int head_dim = llama_model_n_embd(E.model) / std::max(1, llama_model_n_head(E.model));
    const int key_length = meta_int(arch + ".attention.key_length", head_dim);
    const int value_length = meta_int(arch + ".attention.value_length", head_dim);
    const double cells = n_ctx > 0 ? n_ctx : llama_model_n_ctx_train(E.model);
    const double f32_bytes = cells * llama_model_n_layer(E.model) * llama_model_n_head_kv(E.model) *
                             (key_length + value_length) * sizeof(float);
    return f32_bytes <= KV_F32_MAX_BYTES ? GGML_TYPE_F32 : GGML_TYPE_F16;
}

void tokenize_into(std::vector<int32_t> & out, const std::string & text, bool add_special, bool parse_special) {
    out.resize(text.size() + 8);
    int32_t n = llama_tokenize(E.vocab, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(),
                               add_special, parse_special);
    if (n < 0) {
        out.resize(-n);
        n = llama_tokenize(E.vocab, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(),
                           add_special, parse_special);
    }
    if (n < 0) throw engine_error("the text could not be tokenized");
    out.resize(n);
}

void free_generation() {
    if (E.gen.chain) llama_sampler_free(E.gen.chain);
    if (E.gen.grammar) llama_grammar_free_impl(E.gen.grammar);
    E.gen = generation();
    E.generating = false;
}

void free_all() {
    free_generation();
    if (E.batch.token) llama_batch_free(E.batch);
    E.batch = llama_batch{};
    if (E.ctx) llama_free(E.ctx);
    if (E.model) llama_model_free(E.model);
    E.ctx = nullptr;
    E.model = nullptr;
    E.vocab = nullptr;
    E.cached.clear();
    E.tokens.clear();
    E.buffer.clear();
    E.buffer.shrink_to_fit();
}

void clear_memory() {
    llama_memory_clear(llama_get_memory(E.ctx), true);
    E.cached.clear();
}

// Decodes tokens at the end of sequence 0, keeping `cached` in step with the KV cache.
void decode(const llama_token * tokens, int n) {
    const int start = (int) E.cached.size();
    if (start + n > (int) llama_n_ctx(E.ctx)) throw engine_error("the context window is full");
    E.batch.n_tokens = n;
    for (int i = 0; i < n; ++i) {
        E.batch.token[i] = tokens[i];
        E.batch.pos[i] = start + i;
        E.batch.n_seq_id[i] = 1;
        E.batch.seq_id[i][0] = 0;
        E.batch.logits[i] = i == n - 1;
    }
    const int rc = llama_decode(E.ctx, E.batch);
    if (rc != 0) {
        // A failed decode may leave part of the batch in the cache: drop it so `cached` stays true.
        if (!llama_memory_seq_rm(llama_get_memory(E.ctx), 0, start, -1)) clear_memory();
        throw engine_error(with_log("llama_decode failed with code " + std::to_string(rc)));
    }
    E.cached.insert(E.cached.end(), tokens, tokens + n);
}

// --- sampling parameters (llama-server's names and defaults) ---

double number_param(const json & params, const char * key, double fallback) {
    auto it = params.find(key);
    if (it == params.end() || it->is_null()) return fallback;
    if (!it->is_number()) throw engine_error(std::string("the parameter \"") + key + "\" must be a number");
    const double value = it->get<double>();
    if (!std::isfinite(value)) throw engine_error(std::string("the parameter \"") + key + "\" must be finite");
    return value;
}

int int_param(const json & params, const char * key, int fallback, int min_value) {
    const double value = number_param(params, key, fallback);
    if (value != std::floor(value) || value < min_value || value > INT32_MAX) {
        throw engine_error(std::string("the parameter \"") + key + "\" must be an integer >= " + std::to_string(min_value));
    }
    return (int) value;
}

bool bool_param(const json & params, const char * key, bool fallback) {
    auto it = params.find(key);
    if (it == params.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) throw engine_error(std::string("the parameter \"") + key + "\" must be true or false");
    return it->get<bool>();
}

llama_grammar * make_grammar(const json & params) {
    std::string gbnf;
    auto g = params.find("grammar");
    auto s = params.find("schema");
    if (g != params.end() && !g->is_null()) {
        if (!g->is_string()) throw engine_error("the parameter \"grammar\" must be a GBNF string");
        gbnf = g->get<std::string>();
    } else if (s != params.end() && !s->is_null()) {
        if (!s->is_object() && !s->is_boolean()) throw engine_error("the parameter \"schema\" must be a JSON Schema object");
        try {
            gbnf = json_schema_to_grammar(common_json::parse(s->dump()));
        } catch (const std::exception & e) {
            throw engine_error(std::string("the JSON schema could not be turned into a grammar: ") + e.what());
        }
    }
    if (gbnf.empty()) return nullptr;
    take_log_error();
    llama_grammar * grammar = llama_grammar_init_impl(E.vocab, gbnf.c_str(), "root", false, nullptr, 0, nullptr, 0);
    if (!grammar) throw engine_error(with_log("the grammar is not valid GBNF with a rule \"root\""));
    return grammar;
}

llama_sampler * make_chain(const json & params) {
    const int n_ctx = (int) llama_n_ctx(E.ctx);
    const double temperature = number_param(params, "temperature", 0.8);
    const int top_k = int_param(params, "top_k", 40, 0);
    const double top_p = number_param(params, "top_p", 0.95);
    const double min_p = number_param(params, "min_p", 0.05);
    const double repeat_penalty = number_param(params, "repeat_penalty", 1.0);
    int repeat_last_n = int_param(params, "repeat_last_n", 64, -1);
    const double frequency_penalty = number_param(params, "frequency_penalty", 0.0);
    const double presence_penalty = number_param(params, "presence_penalty", 0.0);
    const double dry_multiplier = number_param(params, "dry_multiplier", 0.0);
    double dry_base = number_param(params, "dry_base", 1.75);
    const int dry_allowed_length = int_param(params, "dry_allowed_length", 2, 0);
    int dry_penalty_last_n = int_param(params, "dry_penalty_last_n", -1, -1);
    uint32_t seed = LLAMA_DEFAULT_SEED;
    auto it = params.find("seed");
    if (it != params.end() && !it->is_null()) {
        if (!it->is_number_integer()) throw engine_error("the parameter \"seed\" must be an integer");
        seed = (uint32_t) it->get<int64_t>();  // -1, as llama-server takes it, is the random seed
    }
    // -1 means the whole context, as in llama-server
    if (repeat_last_n == -1) repeat_last_n = n_ctx;
    if (dry_penalty_last_n == -1) dry_penalty_last_n = n_ctx;
    if (dry_base < 1.0) dry_base = 1.75;
    if (repeat_penalty <= 0) throw engine_error("the parameter \"repeat_penalty\" must be > 0");

    llama_sampler_chain_params cp = llama_sampler_chain_default_params();
    cp.no_perf = true;
    llama_sampler * chain = llama_sampler_chain_init(cp);
    const int n_vocab = llama_vocab_n_tokens(E.vocab);
    int32_t n_suppress = 0;
    const llama_token * suppress = llama_vocab_get_suppress_tokens(E.vocab, &n_suppress);
    if (n_suppress > 0) {
        // tokens the model says never to produce, as llama-server's sampler does
        std::vector<llama_logit_bias> bias;
        for (int32_t i = 0; i < n_suppress; ++i) bias.push_back({suppress[i], -INFINITY});
        llama_sampler_chain_add(chain, llama_sampler_init_logit_bias(n_vocab, (int32_t) bias.size(), bias.data()));
    }
    llama_sampler_chain_add(chain, llama_sampler_init_penalties(n_vocab, repeat_last_n, (float) repeat_penalty,
                                                                (float) frequency_penalty, (float) presence_penalty));
    if (dry_multiplier > 0) {
        static const char * breakers[] = {"\n", ":", "\"", "*"};
        llama_sampler_chain_add(chain, llama_sampler_init_dry(E.vocab, (float) dry_multiplier, (float) dry_base,
                                                              dry_allowed_length, dry_penalty_last_n, breakers, 4));
    }
    llama_sampler_chain_add(chain, llama_sampler_init_top_k(top_k));
    llama_sampler_chain_add(chain, llama_sampler_init_top_p((float) top_p, 1));
    llama_sampler_chain_add(chain, llama_sampler_init_min_p((float) min_p, 1));
    if (temperature <= 0) {
        llama_sampler_chain_add(chain, llama_sampler_init_greedy());
    } else {
        llama_sampler_chain_add(chain, llama_sampler_init_temp((float) temperature));
        llama_sampler_chain_add(chain, llama_sampler_init_dist(seed));
    }
    return chain;
}

void fill_candidates(llama_token_data_array & cur) {
    const float * logits = llama_get_logits_ith(E.ctx, -1);
    if (!logits) throw engine_error("no logits to sample from (the prompt was not decoded)");
    const int n_vocab = llama_vocab_n_tokens(E.vocab);
    auto & c = E.gen.candidates;
    c.resize(n_vocab);
    for (int i = 0; i < n_vocab; ++i) c[i] = llama_token_data{i, logits[i], 0.0f};
    cur = {c.data(), c.size(), -1, false};
}

// common_sampler's order: the chain alone first, and the grammar (slow over the whole
// vocabulary) on every candidate only when the chain's choice breaks it.
llama_token sample() {
    llama_token_data_array cur;
    fill_candidates(cur);
    llama_sampler_apply(E.gen.chain, &cur);
    if (cur.selected < 0) throw engine_error("the sampler chose no token");
    llama_token id = cur.data[cur.selected].id;
    if (!E.gen.grammar) return id;

    llama_token_data single = {id, 1.0f, 0.0f};
    llama_token_data_array one = {&single, 1, -1, false};
    llama_grammar_apply_impl(*E.gen.grammar, &one);
    if (one.data[0].logit != -INFINITY) return id;

    fill_candidates(cur);
    llama_grammar_apply_impl(*E.gen.grammar, &cur);
    llama_sampler_apply(E.gen.chain, &cur);
    if (cur.selected < 0 || cur.data[cur.selected].logit == -INFINITY) {
        throw engine_error("the grammar allows no token here");
    }
    return cur.data[cur.selected].id;
}

// Length of the longest prefix of `text` that does not end inside a UTF-8 character.
size_t complete_utf8_prefix(const std::string & text) {
    const size_t n = text.size();
    for (size_t back = 1; back <= 4 && back <= n; ++back) {
        const unsigned char c = (unsigned char) text[n - back];
        if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
        size_t need = 1;
        if ((c & 0xE0) == 0xC0) need = 2;
        else if ((c & 0xF0) == 0xE0) need = 3;
        else if ((c & 0xF8) == 0xF0) need = 4;
        return need > back ? n - back : n;
    }
    return n;  // not UTF-8 at the end: pass it on as it is
}

std::string token_piece(llama_token id) {
    char small[128];
    int32_t n = llama_token_to_piece(E.vocab, id, small, sizeof small, 0, false);
    if (n >= 0) return std::string(small, n);
    std::string big(-n, '\0');
    n = llama_token_to_piece(E.vocab, id, big.data(), (int32_t) big.size(), 0, false);
    return n >= 0 ? big.substr(0, n) : std::string();
}

// --- text the grammar forces: appended without sampling, decoded in one batch ---
//
// Where a grammar allows one character only (a JSON key after its value, the rest of an enum
// name, a closing fence), sampling chooses nothing: each such token would cost a whole
// decode step. The engine writes that text itself and decodes it with the token before it,
// in one batch, which costs about what one token does (decode reads every weight once,
// whatever the batch). The text is tokenized as the prompt's own examples are, the sampled
// token's piece and the forced text together, so the model sees its usual tokens.

constexpr size_t MAX_FORCED_CHARS = 256;

// The one character every parse of the grammar allows next; false when there is a choice
// (or the grammar may end here, or a character is half read).
bool forced_char(const llama_grammar & grammar, uint32_t & chr) {
    if (grammar.partial_utf8.n_remain != 0 || grammar.stacks.empty()) return false;
    bool first = true;
    for (const auto & stack : grammar.stacks) {
        if (stack.empty()) return false;  // the grammar may end here
        const llama_grammar_element * e = stack.back();
        if (e->type != LLAMA_GRETYPE_CHAR) return false;
        if (e[1].type == LLAMA_GRETYPE_CHAR_ALT || e[1].type == LLAMA_GRETYPE_CHAR_RNG_UPPER) return false;
        if (!first && e->value != chr) return false;
        chr = e->value;
        first = false;
    }
    return true;
}

// Advances the grammar over the text it forces from here and returns that text ("" if none).
// The caller restores `grammar.stacks` if it does not use the text.
std::string take_forced_text(llama_grammar & grammar) {
    std::string text;
    uint32_t chr = 0;
    while (text.size() < MAX_FORCED_CHARS && forced_char(grammar, chr)) {
        text += unicode_cpt_to_utf8(chr);
        llama_grammar_accept(&grammar, chr);
    }
    return text;
}

// True when the grammar is complete and allows nothing more: the reply can only end here.
bool grammar_done(const llama_grammar & grammar) {
    if (grammar.partial_utf8.n_remain != 0) return false;
    for (const auto & stack : grammar.stacks) {
        if (!stack.empty()) return false;
    }
    return true;
}

// `text` as tokens whose pieces spell it exactly; empty when the tokenizer changes the text
// (a tokenizer that adds a leading space, for one): such text is then sampled as before.
std::vector<llama_token> exact_tokens(const std::string & text) {
    std::vector<llama_token> tokens;
    tokenize_into(tokens, text, false, false);
    std::string spelled;
    for (const llama_token t : tokens) spelled += token_piece(t);
    if (spelled != text) tokens.clear();
    return tokens;
}

// --- state format: "ALST", version, n_tokens, payload size, checksum, tokens, llama.cpp's bytes ---

constexpr char STATE_MAGIC[4] = {'A', 'L', 'S', 'T'};
constexpr uint32_t STATE_VERSION = 1;
constexpr size_t STATE_HEADER = 4 + 4 * 4;

uint32_t read_u32(const uint8_t * p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

void write_u32(uint8_t * p, uint32_t v) { memcpy(p, &v, 4); }

// FNV-1a over 32-bit words: cheap, and enough to refuse bytes damaged in storage before
// llama.cpp reads them (some of its checks on a state abort instead of failing).
uint32_t checksum(const uint8_t * data, size_t size) {
    uint32_t h = 2166136261u;
    size_t i = 0;
    for (; i + 4 <= size; i += 4) h = (h ^ read_u32(data + i)) * 16777619u;
    for (; i < size; ++i) h = (h ^ data[i]) * 16777619u;
    return h;
}

}  // namespace

extern "C" {

EMSCRIPTEN_KEEPALIVE const char * al_last_error() { return E.error.c_str(); }

EMSCRIPTEN_KEEPALIVE const char * al_result() { return E.result.c_str(); }

EMSCRIPTEN_KEEPALIVE int32_t * al_tokens() { return E.tokens.data(); }

EMSCRIPTEN_KEEPALIVE uint8_t * al_buffer() { return E.buffer.data(); }

EMSCRIPTEN_KEEPALIVE int al_cached() { return (int) E.cached.size(); }

EMSCRIPTEN_KEEPALIVE void al_free() {
    try {
        free_all();
    } catch (...) {
    }
}

// The form of the Q4_1 kernels' dot product (scripts/cpu_engine/patch_llama.py, in ggml-cpu):
// -1 the faster one for this engine, 0 the 32-bit one, 1 the 16-bit one. The floats are the same.
extern "C" const char * agent_q4_1_choose_dot(int form);
static int requested_dot_form = -1;

// The dot product's form for the next al_load (-1, 0 or 1, as above): benches compare them.
EMSCRIPTEN_KEEPALIVE int al_dot_form(int form) {
    if (form < -1 || form > 1) return -1;
    requested_dot_form = form;
    return 0;
}

EMSCRIPTEN_KEEPALIVE int al_load(const char * path, int n_ctx, int n_threads, int n_batch) {
    return guarded([&] {
        free_all();
        if (!backend_ready) {
            llama_log_set(quiet_log, nullptr);
            llama_backend_init();
            backend_ready = true;
        }
        if (n_ctx < 0) throw engine_error("n_ctx must be >= 0 (0: the model's training context)");
#ifdef __EMSCRIPTEN_PTHREADS__
        // ggml starts n_threads - 1 pthreads per computation, and a pthread has to come from the
        // pool made at startup: the calling thread cannot wait for a new Worker to start.
        const int pool = EM_ASM_INT({ return PThread.unusedWorkers.length; });
#else
        const int pool = 0;  // the build without threads (pages that are not cross-origin isolated)
#endif
        n_threads = std::max(1, std::min(n_threads, pool + 1));
        E.dot_form = agent_q4_1_choose_dot(requested_dot_form);  // before any product
        if (n_batch <= 0) n_batch = 512;
        take_log_error();

        llama_model_params mp = llama_model_default_params();
        mp.load_mode = LLAMA_LOAD_MODE_NONE;  // plain reads: the file may be a Blob behind WORKERFS
        mp.n_gpu_layers = 0;
        // AUTO's 4 GiB threshold wraps to 0 in a 32-bit size_t, which would mark every tensor lazy
        mp.lazy_mode = LLAMA_LAZY_MODE_OFF;
        E.model = llama_model_load_from_file(path, mp);
        if (!E.model) throw engine_error(with_log(std::string("could not load the model ") + path));
        E.vocab = llama_model_get_vocab(E.model);

        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = n_ctx;
        cp.n_batch = n_batch;
        cp.n_ubatch = n_batch;
        cp.n_threads = n_threads;
        cp.n_threads_batch = n_threads;
        cp.no_perf = true;
        cp.swa_full = true;  // a sliding-window model can then keep a prefix across prompts
        cp.type_k = cp.type_v = kv_cache_type(n_ctx);
        E.kv_type = cp.type_k;
        E.ctx = llama_init_from_model(E.model, cp);
        if (!E.ctx) {
            free_all();
            throw engine_error(with_log("could not create a context for the model (n_ctx " + std::to_string(n_ctx) + ")"));
        }
        E.n_batch = (int) llama_n_batch(E.ctx);
        E.n_threads = n_threads;
        E.batch = llama_batch_init(E.n_batch, 0, 1);
        return 0;
    });
}

EMSCRIPTEN_KEEPALIVE int al_model_info() {
    return guarded([&] {
        require_model();
        bool found = false;
        json info = json::object();
        const std::string arch = meta_string("general.architecture", &found);
        info["architecture"] = found ? json(arch) : json(nullptr);
        const std::string name = meta_string("general.name", &found);
        info["name"] = found ? json(name) : json(nullptr);
        const char * tmpl = llama_model_chat_template(E.model, nullptr);
        info["chat_template"] = tmpl ? json(tmpl) : json(nullptr);
        info["n_ctx_train"] = llama_model_n_ctx_train(E.model);
        info["n_ctx"] = llama_n_ctx(E.ctx);
        info["n_vocab"] = llama_vocab_n_tokens(E.vocab);
        info["n_threads"] = E.n_threads;
        info["kv_type"] = ggml_type_name(E.kv_type);
        info["dot_form"] = E.dot_form;
        E.result = dump(info);
        return 0;
    });
}

EMSCRIPTEN_KEEPALIVE int al_format_chat(const char * messages_json, const char * template_name) {
    return guarded([&] {
        require_model();
        json messages = json::parse(messages_json ? messages_json : "", nullptr, false);
        if (messages.is_discarded() || !messages.is_array()) {
            throw engine_error("the messages must be a JSON array of {\"role\", \"content\"}");
        }
        std::vector<std::string> texts;
        texts.reserve(messages.size() * 2);
        size_t total = 0;
        for (const auto & m : messages) {
            if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
                !m["content"].is_string()) {
                throw engine_error("each message must be {\"role\": string, \"content\": string}");
            }
            texts.push_back(m["role"].get<std::string>());
            texts.push_back(m["content"].get<std::string>());
            total += texts.back().size();
        }
        std::vector<llama_chat_message> chat;
        for (size_t i = 0; i < texts.size(); i += 2) chat.push_back({texts[i].c_str(), texts[i + 1].c_str()});

        std::string tmpl;
        if (template_name && *template_name) {
            tmpl = template_name;
        } else if (const char * own = llama_model_chat_template(E.model, nullptr)) {
            tmpl = own;
        } else {
            tmpl = "chatml";
        }
        std::vector<char> buf(total * 2 + 256);
        int32_t n = llama_chat_apply_template(tmpl.c_str(), chat.data(), chat.size(), true, buf.data(), (int32_t) buf.size());
        if (n > (int32_t) buf.size()) {
            buf.resize(n);
            n = llama_chat_apply_template(tmpl.c_str(), chat.data(), chat.size(), true, buf.data(), (int32_t) buf.size());
        }
        if (n < 0) {
            const bool named = template_name && *template_name;
            throw engine_error(named ? "the chat template \"" + tmpl + "\" is not one llama.cpp knows"
                                     : std::string("the model's chat template is not one llama.cpp recognises: pass a template name such as \"chatml\""));
        }
        E.result.assign(buf.data(), n);
        return n;
    });
}

EMSCRIPTEN_KEEPALIVE int al_tokenize(const char * text, int add_special, int parse_special) {
    return guarded([&] {
        require_model();
        tokenize_into(E.tokens, text ? text : "", add_special != 0, parse_special != 0);
        return (int) E.tokens.size();
    });
}

EMSCRIPTEN_KEEPALIVE int al_begin(const char * prompt, const char * params_json) {
    return guarded([&] {
        require_model();
        free_generation();
        json params = json::object();
        if (params_json && *params_json) {
            params = json::parse(params_json, nullptr, false);
            if (params.is_discarded()) throw engine_error("the sampling parameters are not valid JSON");
            if (params.is_null()) params = json::object();
            if (!params.is_object()) throw engine_error("the sampling parameters must be a JSON object");
        }
        std::vector<int32_t> tokens;
        tokenize_into(tokens, prompt ? prompt : "", llama_vocab_get_add_bos(E.vocab), true);
        const int n_prompt = (int) tokens.size();
        const int n_ctx = (int) llama_n_ctx(E.ctx);
        if (n_prompt == 0) throw engine_error("the prompt is empty");
        if (n_prompt > n_ctx) {
            throw engine_error("the prompt has " + std::to_string(n_prompt) + " tokens, more than the context window of " +
                               std::to_string(n_ctx));
        }
        const int max_tokens = int_param(params, "max_tokens", -1, -1);

        // Samplers first: a bad grammar or parameter must leave the cache as it was.
        generation gen;
        gen.max_tokens = max_tokens;
        gen.write_forced = bool_param(params, "forced_text", true);
        try {
            gen.grammar = make_grammar(params);
            gen.chain = make_chain(params);
        } catch (...) {
            if (gen.grammar) llama_grammar_free_impl(gen.grammar);
            throw;
        }
        E.gen = std::move(gen);
        E.generating = true;
        // The penalties look back over the prompt too, as in llama-server; DRY looks at the
        // reply alone. It is there to stop a reply that repeats itself, and over the prompt
        // it cut answers that copy what they must (a URL, a name, a number of five digits
        // tokens: the answer "… at http://127.0.0.1:40835/tuning/" ended there).
        for (int i = 0; i < llama_sampler_chain_n(E.gen.chain); ++i) {
            llama_sampler * sampler = llama_sampler_chain_get(E.gen.chain, i);
            if (std::strcmp(llama_sampler_name(sampler), "dry") == 0) continue;
            for (const llama_token t : tokens) llama_sampler_accept(sampler, t);
        }

        size_t n_common = 0;
        while (n_common < E.cached.size() && n_common < tokens.size() && E.cached[n_common] == tokens[n_common]) ++n_common;
        // The last prompt token gives the logits, so at least one is computed; two, so that a
        // prompt met again is not computed in a batch of one (MIN_PROMPT_BATCH).
        while (n_common > 0 && tokens.size() - n_common < MIN_PROMPT_BATCH) --n_common;
        if (!llama_memory_seq_rm(llama_get_memory(E.ctx), 0, (llama_pos) n_common, -1)) {
            // a recurrent or sliding-window cache may refuse to cut inside what it holds
            clear_memory();
            n_common = 0;
        }
        E.cached.resize(n_common);
        E.gen.pending.assign(tokens.begin() + n_common, tokens.end());

        json out = {{"n_prompt", n_prompt}, {"n_cached", (int) n_common}};
        E.result = dump(out);
        return n_prompt;
    });
}

EMSCRIPTEN_KEEPALIVE int al_prefill(int max_batch) {
    return guarded([&] {
        require_model();
        if (!E.generating) throw engine_error("no generation has begun (call al_begin first)");
        auto & g = E.gen;
        const int left = (int) (g.pending.size() - g.n_prefilled);
        int n = std::min({left, max_batch > 0 ? max_batch : E.n_batch, E.n_batch});
        // Never leave a last batch of one token (see al_begin): cut this one a token shorter.
        const int min_batch = (int) MIN_PROMPT_BATCH;
        if (left - n > 0 && left - n < min_batch && n > min_batch) n -= min_batch - (left - n);
        if (n > 0) {
            decode(g.pending.data() + g.n_prefilled, n);
            g.n_prefilled += n;
        }
        return (int) (g.pending.size() - g.n_prefilled);
    });
}

EMSCRIPTEN_KEEPALIVE int al_next() {
    return guarded([&] {
        require_model();
        if (!E.generating) throw engine_error("no generation has begun (call al_begin first)");
        auto & g = E.gen;
        if (g.n_prefilled < g.pending.size()) throw engine_error("the prompt is not prefilled yet (call al_prefill until it returns 0)");
        E.result.clear();
        auto finish = [&] {
            g.finished = true;
            if (g.partial_utf8.empty()) return 0;
            E.result.swap(g.partial_utf8);  // the last bytes as they are, in a step of their own
            return 1;
        };
        if (g.finished) return 0;
        if (g.max_tokens >= 0 && g.n_generated >= g.max_tokens) return finish();
        if ((int) E.cached.size() >= (int) llama_n_ctx(E.ctx)) return finish();

        // The tokens to decode next: a sampled one and the text the grammar forces after it,
        // or, before the first choice, the text the grammar forces from its start.
        std::vector<llama_token> step;
        std::string text;
        auto add_forced = [&] {
            if (!g.grammar || !g.write_forced) return;
            const llama_grammar_stacks before = g.grammar->stacks;
            const std::string forced = take_forced_text(*g.grammar);
            const std::vector<llama_token> joined = forced.empty() ? std::vector<llama_token>() : exact_tokens(text + forced);
            const size_t room_budget = g.max_tokens < 0 ? SIZE_MAX : (size_t) (g.max_tokens - g.n_generated);
            const size_t room_ctx = llama_n_ctx(E.ctx) - E.cached.size();
            if (joined.empty() || joined.size() > std::min(room_budget, room_ctx)) {
                g.grammar->stacks = before;
                return;
            }
            g.n_forced += (int) (joined.size() - step.size());
            step = joined;
            text += forced;
        };
        if (!g.started) {
            g.started = true;
            add_forced();
        }
        if (step.empty()) {
            const llama_token id = sample();
            if (llama_vocab_is_eog(E.vocab, id)) {
                llama_sampler_accept(g.chain, id);
                return finish();
            }
            if (g.grammar) llama_grammar_accept_impl(*g.grammar, id);
            step.push_back(id);
            text = token_piece(id);
            add_forced();
        }
        for (const llama_token t : step) llama_sampler_accept(g.chain, t);
        g.n_generated += (int) step.size();

        g.partial_utf8 += text;
        const size_t n = complete_utf8_prefix(g.partial_utf8);
        E.result = g.partial_utf8.substr(0, n);
        g.partial_utf8.erase(0, n);
        // A complete grammar allows only the end: no need to compute what follows.
        if (g.grammar && grammar_done(*g.grammar) && g.partial_utf8.empty()) {
            g.finished = true;
            return 1;
        }
        decode(step.data(), (int) step.size());
        return 1;
    });
}

EMSCRIPTEN_KEEPALIVE int al_end() {
    return guarded([&] {
        const int n = E.gen.n_generated;
        E.result = dump(json{{"n_generated", n}, {"n_forced", E.gen.n_forced}});
        free_generation();
        return n;
    });
}

EMSCRIPTEN_KEEPALIVE int al_state_save() {
    return guarded([&] {
        require_model();
        const size_t n_tokens = E.cached.size();
        const size_t n_state = llama_state_seq_get_size(E.ctx, 0);
        const size_t head = STATE_HEADER + n_tokens * 4;
        if (head + n_state > (size_t) INT32_MAX) throw engine_error("the state is too large to save (over 2 GB)");
        E.buffer.assign(head + n_state, 0);
        uint8_t * p = E.buffer.data();
        const size_t written = llama_state_seq_get_data(E.ctx, p + head, n_state, 0);
        if (written == 0 && n_state != 0) throw engine_error(with_log("llama.cpp could not write the state"));
        E.buffer.resize(head + written);
        memcpy(p, STATE_MAGIC, 4);
        write_u32(p + 4, STATE_VERSION);
        write_u32(p + 8, (uint32_t) n_tokens);
        write_u32(p + 12, (uint32_t) written);
        if (n_tokens) memcpy(p + STATE_HEADER, E.cached.data(), n_tokens * 4);
        write_u32(p + 16, checksum(p + STATE_HEADER, n_tokens * 4 + written));
        return (int) E.buffer.size();
    });
}

EMSCRIPTEN_KEEPALIVE int al_state_load(const uint8_t * data, int size) {
    return guarded([&] {
        require_model();
        if (E.generating) free_generation();
        if (!data || size < (int) STATE_HEADER || memcmp(data, STATE_MAGIC, 4) != 0) {
            throw engine_error("these bytes are not a saved state of this engine");
        }
        if (read_u32(data + 4) != STATE_VERSION) {
            throw engine_error("the saved state has format version " + std::to_string(read_u32(data + 4)) + ", this engine reads " +
                               std::to_string(STATE_VERSION));
        }
        const uint64_t n_tokens = read_u32(data + 8);
        const uint64_t n_state = read_u32(data + 12);
        if (n_tokens > llama_n_ctx(E.ctx)) {
            throw engine_error("the saved state holds " + std::to_string(n_tokens) + " tokens, more than the context window of " +
                               std::to_string(llama_n_ctx(E.ctx)));
        }
        if (STATE_HEADER + n_tokens * 4 + n_state != (uint64_t) size) throw engine_error("the saved state is truncated or damaged (sizes do not match)");
        if (checksum(data + STATE_HEADER, n_tokens * 4 + n_state) != read_u32(data + 16)) {
            throw engine_error("the saved state is damaged (checksum mismatch)");
        }
        std::vector<llama_token> tokens(n_tokens);
        if (n_tokens) memcpy(tokens.data(), data + STATE_HEADER, n_tokens * 4);
        const int n_vocab = llama_vocab_n_tokens(E.vocab);
        for (llama_token t : tokens) {
            if (t < 0 || t >= n_vocab) throw engine_error("the saved state holds tokens this model does not have");
        }
        clear_memory();
        take_log_error();
        const size_t read = n_state ? llama_state_seq_set_data(E.ctx, data + STATE_HEADER + n_tokens * 4, n_state, 0) : 0;
        const llama_pos pos_max = llama_memory_seq_pos_max(llama_get_memory(E.ctx), 0);
        if ((n_state && read == 0) || pos_max != (llama_pos) n_tokens - 1) {
            clear_memory();
            throw engine_error(with_log("the saved state does not fit this model/context"));
        }
        E.cached = std::move(tokens);
        return (int) E.cached.size();
    });
}

}  // extern "C"
