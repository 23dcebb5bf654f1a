// The C API of the CPU engine's WebAssembly build (scripts/cpu_engine/agent_llama.cpp, built by
// scripts/cpu_engine/build.sh), bound to a module that createAgentLlama made. A plain script:
// the engine's worker (cpu-worker.js) loads it with importScripts, and the Node check
// (scripts/cpu_engine/check.mjs) with require.
"use strict";

function bindLlamaApi(llama) {
  const fn = (name, ret, args) => llama.cwrap(name, ret, args);
  return {
    load: fn("al_load", "number", ["string", "number", "number", "number"]),
    info: fn("al_model_info", "number", []),
    format: fn("al_format_chat", "number", ["string", "string"]),
    tokenize: fn("al_tokenize", "number", ["string", "number", "number"]),
    begin: fn("al_begin", "number", ["string", "string"]),
    prefill: fn("al_prefill", "number", ["number"]),
    next: fn("al_next", "number", []),
    end: fn("al_end", "number", []),
    save: fn("al_state_save", "number", []),
    restore: fn("al_state_load", "number", ["number", "number"]),
    buffer: fn("al_buffer", "number", []),
    cached: fn("al_cached", "number", []),
    result: fn("al_result", "number", []),
    lastError: fn("al_last_error", "number", []),
    free: fn("al_free", null, []),
    dotForm: fn("al_dot_form", "number", ["number"]),
  };
}

if (typeof exports === "object") exports.bindLlamaApi = bindLlamaApi;
