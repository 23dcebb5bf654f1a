// The CPU engine: llama.cpp in WebAssembly (@wllama/wllama 3.8.1), for browsers without
// WebGPU. Same interface as the WebLLM engine:
//   reload(model), unload(), chat(messages, call, onToken) -> {text, usage, finish_reason},
//   interrupt(), counts {reloads, unloads}, label, loadedModel; and here also `template`,
//   the chat template the loaded model uses: {source: "gguf" | "builtin" | "default", name,
//   jinja, warning?} (see chatTemplateFor).
// A model is a bundled id (BUNDLED_CPU_MODELS, served from web/models/<id>.gguf, fetched by
// scripts/fetch_model.py) or the URL of any .gguf file.
// call: {model, purpose, max_tokens, schema?, grammar?, tool?, sampling?}. `grammar` (GBNF)
// replaces the schema's own conversion when the agent gives one. `sampling` (an object or
// null) sets llama.cpp's sampler for this call; each key is optional, null means "engine
// default": temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n,
// frequency_penalty, presence_penalty, dry_multiplier, dry_base, dry_allowed_length,
// dry_penalty_last_n, seed. Without temperature or seed the constructor's apply.
// usage: prompt_tokens, completion_tokens, prefill/decode tokens per second,
// time_to_first_token_s, cached_prompt_tokens (prompt tokens whose KV cache an earlier call
// left in place, so they cost nothing).
// Schemas are enforced by llama.cpp's JSON-schema-to-grammar converter through the chat
// response_format (json_schema) path. Everything comes from our origin: the wasm from
// web/vendor, the GGUF from web/models or the given URL, which wllama then keeps in the
// origin's storage (OPFS) and never downloads again.
import { Wllama } from "../vendor/wllama/index.js";
import { EngineError } from "./errors.js";

// Which one runs is a setting (agent_py/browser.py, PageSettings.cpu_model, with its default).
export const BUNDLED_CPU_MODELS = ["gemma3-270m-q4_k_m", "smollm2-135m-instruct-q4_1"];
const PROMPT_BATCH = 256;
const WASM_URL = new URL("../vendor/wllama/wllama.wasm", import.meta.url).href;

function bundledUrl(model) {
  return new URL(`../models/${model}.gguf`, import.meta.url).href;
}

// llama.cpp's sampling parameters (llama-server's names, which wllama passes through).
const SAMPLING_KEYS = [
  "temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n",
  "frequency_penalty", "presence_penalty", "dry_multiplier", "dry_base", "dry_allowed_length",
  "dry_penalty_last_n", "seed",
];

/** What the CPU engine can use here: threads, cross-origin isolation, wasm features. */
export function cpuEngineInfo() {
  const isolated = !!self.crossOriginIsolated;
  const jspi = typeof WebAssembly.Suspending === "function";
  let memory64 = false;
  try {
    new WebAssembly.Memory({ address: "i64", initial: 1n });
    memory64 = true;
  } catch {
    // Older engines reject the descriptor: no 64-bit memories.
  }
  const missing = [];
  if (!jspi) missing.push("WebAssembly JSPI (WebAssembly.Suspending)");
  if (!memory64) missing.push("64-bit WebAssembly memory");
  return {
    isolated,
    sharedArrayBuffer: typeof SharedArrayBuffer === "function",
    hardwareConcurrency: navigator.hardwareConcurrency || 1,
    // More threads need SharedArrayBuffer, which only a cross-origin isolated page has.
    defaultThreads: isolated ? 2 : 1,
    jspi,
    memory64,
    usable: missing.length === 0,
    reason: missing.length
      ? `This browser lacks ${missing.join(" and ")}, which the CPU engine needs. Use a recent Chrome or Edge.`
      : "",
    note: isolated
      ? ""
      : "The page is not cross-origin isolated (no COOP/COEP headers), so the CPU engine runs on one thread.",
  };
}

export class WllamaEngine {
  /**
   * @param {{threads?: number, contextWindow: number, seed?: number,
   *          temperature?: number,
   *          onProgress?: (p: {progress: number, text: string}) => void}} options
   */
  constructor(options = {}) {
    const info = cpuEngineInfo();
    if (!Number.isSafeInteger(options.contextWindow)) {
      throw new TypeError(`contextWindow (the context_window setting) must be a whole number, got ${options.contextWindow}`);
    }
    this.options = {
      threads: info.isolated ? options.threads || info.defaultThreads : 1,
      contextWindow: options.contextWindow,
      seed: options.seed,
      temperature: options.temperature,
      onProgress: options.onProgress,
    };
    this.wllama = null;
    this.loadedModel = null;
    this.loadedUrl = null;
    this.template = null;
    this.counts = { reloads: 0, unloads: 0 };
    this.running = new Map(); // AbortController -> promise of a running chat
    const threads = this.options.threads === 1 ? "1 thread" : `${this.options.threads} threads`;
    this.label = `CPU engine (llama.cpp in WebAssembly, ${threads})`;
  }

  /** Threads llama.cpp really uses; null when nothing is loaded. */
  get threads() {
    return this.wllama ? this.wllama.getNumThreads() : null;
  }

  /** The GGUF URL of a model: a bundled id, or any value that is itself a .gguf URL. */
  urlOf(model) {
    if (BUNDLED_CPU_MODELS.includes(model)) return bundledUrl(model);
    let url = null;
    if (/^(https?:|blob:)/i.test(model) || /\.gguf(\?.*)?$/i.test(model)) {
      try {
        url = new URL(model, self.location.href);
      } catch {
        url = null;
      }
    }
    if (!url || !["http:", "https:", "blob:"].includes(url.protocol)) {
      throw new EngineError(
        "config",
        `The CPU engine runs ${BUNDLED_CPU_MODELS.map((id) => `"${id}"`).join(", ")} or a GGUF file ` +
          `given by its URL, not "${model}". Choose the CPU model in Settings.`,
      );
    }
    return url.href;
  }

  async reload(model) {
    const url = this.urlOf(model);
    const info = cpuEngineInfo();
    if (!info.usable) throw new EngineError("engine", info.reason);
    await this.exit(); // like WebLLM's reload: whatever was loaded goes first
    const progress = (value, text) => this.options.onProgress?.({ progress: value, text });
    progress(0, `Loading ${model} on the CPU…`);
    const wllama = new Wllama({ default: WASM_URL }, { logger: quietLogger, suppressNativeLog: true });
    wllama.setCompat(null); // never fall back to wllama's CDN build
    const loadParams = {
      n_ctx: this.options.contextWindow,
      n_threads: this.options.threads,
      n_gpu_layers: 0, // the CPU engine: never probe WebGPU
      // llama.cpp reports a prompt's progress once per batch: 256 tokens (seconds here) rather
      // than the default 2048, so a long prefill shows it moving. It also prefilled the
      // planner's prompt faster than the default (README, "CPU engine speed").
      n_batch: PROMPT_BATCH,
      n_ubatch: PROMPT_BATCH,
      // Calls of one run share long prefixes (system prompt, tools), and llama.cpp reuses the
      // KV cache of the longest common prefix (cache_prompt is on by default). A sliding-window
      // model (Gemma 3) keeps only the last window, so llama.cpp cannot cut its cache back to a
      // prefix and computes the whole prompt again; a full-size window cache lets it reuse.
      swa_full: true,
      // No seed here: wllama would then override each call's seed with it.
      progressCallback: ({ loaded, total }) => {
        const mb = (n) => (n / 1e6).toFixed(0);
        // The download (or the read from wllama's cache) is most of the load.
        progress(total ? Math.min(loaded / total, 1) * 0.9 : 0, `Loading ${model}: ${mb(loaded)} / ${mb(total)} MB`);
      },
    };
    let template;
    try {
      // What loadModelFromUrl does, with a look at the GGUF's header in between: the chat
      // template is a load-time option, and the header says which one the model needs.
      const cached = await wllama.modelManager.getModelOrDownload({ url }, loadParams);
      const blobs = await cached.open();
      const headerStarted = performance.now();
      template = chatTemplateFor(await readGgufHeader(blobs[0]));
      template.detect_ms = Math.round(performance.now() - headerStarted);
      if (template.warning) console.warn(`[cpu engine] ${model}: ${template.warning}`);
      await wllama.loadModel(blobs, { ...loadParams, ...template.options });
    } catch (error) {
      await wllama.exit().catch(() => {});
      throw loadError(url, error, BUNDLED_CPU_MODELS.includes(model));
    }
    this.wllama = wllama;
    this.loadedModel = model;
    this.loadedUrl = url;
    const { options: _options, ...described } = template;
    this.template = described;
    this.counts.reloads += 1;
    progress(1, `${model} loaded (${this.threads === 1 ? "1 thread" : `${this.threads} threads`})`);
  }

  async unload() {
    await this.exit();
    this.counts.unloads += 1;
  }

  async exit() {
    const wllama = this.wllama;
    this.wllama = null;
    this.loadedModel = null;
    this.loadedUrl = null;
    this.template = null;
    // Terminating wllama's worker under a running chat would leave that chat waiting forever:
    // stop the chats first (they end at their next token).
    this.interrupt();
    await Promise.allSettled(this.running.values());
    if (wllama) await wllama.exit(); // terminates wllama's worker: all its memory goes
  }

  interrupt() {
    for (const controller of this.running.keys()) controller.abort();
  }

  async chat(messages, call, onToken) {
    if (!this.wllama) {
      throw new Error(`The CPU engine has no model loaded (asked for ${call.model}); load it first.`);
    }
    if (call.model && call.model !== this.loadedModel) {
      throw new Error(`The CPU engine has ${this.loadedModel} loaded, not ${call.model}.`);
    }
    const controller = new AbortController();
    const generation = this.generate(this.wllama, messages, call, onToken, controller.signal);
    this.running.set(controller, generation);
    try {
      return await generation;
    } finally {
      this.running.delete(controller);
    }
  }

  /**
   * Compute the KV cache of `messages` and keep it: a later chat whose prompt starts with
   * them reuses it (cache_prompt) and prefills only the rest. One token is decoded and
   * dropped (llama.cpp's server always samples one). onProgress({done, total}) reports the
   * prompt tokens as llama.cpp processes them. Resolves to the usage.
   */
  async prefill(messages, call, onProgress) {
    if (!this.wllama) {
      throw new Error(`The CPU engine has no model loaded (asked for ${call.model}); load it first.`);
    }
    const controller = new AbortController();
    const work = this.generate(this.wllama, messages, { ...call, max_tokens: 1, schema: null, grammar: null }, null, controller.signal, onProgress);
    this.running.set(controller, work);
    try {
      return (await work).usage;
    } finally {
      this.running.delete(controller);
    }
  }

  async generate(wllama, messages, call, onToken, signal, onPromptProgress = null) {
    const request = {
      messages: messages.map(({ role, content }) => ({ role, content })),
      stream: true,
      max_tokens: call.max_tokens,
      timings_per_token: true, // so an interrupted generation still has its timings
      cache_prompt: true, // llama.cpp's default, said here: reuse the KV cache of a shared prefix
      abortSignal: signal,
    };
    if (onPromptProgress) request.return_progress = true; // chunks with prompt_progress
    Object.assign(request, this.samplingOf(call.sampling));
    if (call.grammar) {
      // A GBNF grammar from the agent (agent_py/grammar.py): the schema's own bounds, and no
      // whitespace between JSON tokens, which small models otherwise spend tokens on.
      request.grammar = call.grammar;
    } else if (call.schema) {
      // llama.cpp turns the schema into a grammar; bound strings and arrays (maxLength,
      // maxItems), or a small model keeps going until max_tokens.
      // Tool schemas (an MCP server's, say) often leave strings unbounded: bound them by the
      // reply budget here. The agent still validates the reply against the original schema.
      const schema = boundedSchema(call.schema, Math.max(call.max_tokens * 3, 32));
      request.response_format = {
        type: "json_schema",
        json_schema: { name: call.tool || call.purpose || "reply", schema, strict: true },
      };
    }
    const started = performance.now();
    let firstTokenAt = null;
    let text = "";
    let pieces = 0;
    let finish = "stop";
    let usage = null;
    let timings = null;
    request.onData = (chunk) => {
      const progress = chunk.prompt_progress;
      if (progress && onPromptProgress) onPromptProgress({ done: progress.processed ?? 0, total: progress.total ?? 0, cached: progress.cache ?? 0 });
      const choice = chunk.choices?.[0];
      const delta = choice?.delta?.content || "";
      if (delta) {
        firstTokenAt ??= performance.now();
        text += delta;
        pieces += 1;
        onToken?.(delta);
      }
      if (choice?.finish_reason) finish = choice.finish_reason;
      if (chunk.usage) usage = chunk.usage;
      if (chunk.timings) timings = chunk.timings;
    };
    try {
      await wllama.createChatCompletion(request);
    } catch (error) {
      if (error?.name !== "AbortError") throw chatError(error);
      finish = "abort";
    }
    return {
      text,
      finish_reason: finish,
      usage: {
        // Streamed chunks carry timings but no usage; prompt_n counts only the tokens that
        // were not already in the KV cache (cache_n).
        prompt_tokens: usage?.prompt_tokens ?? (timings ? timings.prompt_n + (timings.cache_n || 0) : 0),
        completion_tokens: usage?.completion_tokens ?? timings?.predicted_n ?? pieces,
        prefill_tokens_per_s: rate(timings?.prompt_per_second),
        decode_tokens_per_s: rate(timings?.predicted_per_second),
        time_to_first_token_s: firstTokenAt === null ? null : (firstTokenAt - started) / 1000,
        // Prompt tokens whose KV cache a previous call left in place (not computed again).
        cached_prompt_tokens: timings ? timings.cache_n || 0 : null,
      },
    };
  }

  /** llama.cpp's sampling parameters for one call: the engine's defaults, then the call's. */
  samplingOf(sampling) {
    const params = {};
    if (this.options.temperature !== undefined) params.temperature = this.options.temperature;
    if (this.options.seed !== undefined) params.seed = this.options.seed;
    for (const key of SAMPLING_KEYS) {
      const value = sampling?.[key];
      if (typeof value === "number" && Number.isFinite(value)) params[key] = value;
    }
    return params;
  }
}

// Architectures whose GGUFs may lack a template but are known to want llama.cpp's built-in
// one: the Gemma 3 270M GGUF we bundle has none, and ChatML (the fallback) gives garbage.
const BUILTIN_FOR_ARCHITECTURE = [[/^gemma/, "gemma"]];

// Names of llama.cpp's built-in templates, recognised in a jinja source by their markers;
// only to tell a reader which format a GGUF's own template is.
const TEMPLATE_MARKERS = [
  ["<|im_start|>", "chatml"],
  ["<start_of_turn>", "gemma"],
  ["<|start_header_id|>", "llama3"],
  ["[INST]", "llama2"],
  ["<|user|>", "zephyr"],
];

/**
 * Which chat template a model gets, from its GGUF header:
 *  - the GGUF has one: it is used, rendered by llama.cpp's jinja engine (source "gguf");
 *  - it has none and its architecture is known to need a built-in one (Gemma): that built-in,
 *    with jinja off, as llama.cpp only applies "gemma" so (source "builtin");
 *  - otherwise llama.cpp's default (ChatML), with a warning (source "default").
 * `options` are the loadModel options that make it so.
 */
export function chatTemplateFor({ architecture, chatTemplate }) {
  if (chatTemplate) {
    const marker = TEMPLATE_MARKERS.find(([text]) => chatTemplate.includes(text));
    return { source: "gguf", name: marker ? marker[1] : "jinja", jinja: true, architecture, options: { jinja: true } };
  }
  const builtin = BUILTIN_FOR_ARCHITECTURE.find(([pattern]) => pattern.test(architecture || ""));
  if (builtin) {
    return {
      source: "builtin",
      name: builtin[1],
      jinja: false,
      architecture,
      options: { chat_template: builtin[1], jinja: false },
    };
  }
  return {
    source: "default",
    name: "chatml",
    jinja: false,
    architecture,
    warning:
      `The GGUF has no chat template and its architecture (${architecture || "unknown"}) is not one ` +
      "we know: using llama.cpp's default (ChatML). Replies may be poor; prefer a GGUF with a template.",
    options: { jinja: false },
  };
}

const GGUF_STRING = 8;
const GGUF_ARRAY = 9;
const GGUF_SCALAR_BYTES = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };

/**
 * The few header keys we need from a GGUF file (general.architecture, general.name,
 * tokenizer.chat_template), read from the start of the Blob. The template comes after the
 * vocabulary (1.8 MB into SmolLM2's file, 6.5 MB into Gemma's), so the slice read grows
 * until the key/value section fits.
 */
export async function readGgufHeader(blob) {
  for (let size = 4 << 20; ; size *= 2) {
    const bytes = new Uint8Array(await blob.slice(0, Math.min(size, blob.size)).arrayBuffer());
    const header = parseGgufHeader(bytes);
    if (header) return header;
    if (size >= blob.size) throw new Error("the file ends inside its GGUF header");
  }
}

const TRUNCATED = new Error("the GGUF header runs past the bytes read");

/** The header keys from `bytes`, or null when the key/value section runs past its end. */
function parseGgufHeader(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const decoder = new TextDecoder();
  let at = 0;
  const need = (n) => {
    if (at + n > bytes.length) throw TRUNCATED;
  };
  const u32 = () => (need(4), (at += 4), view.getUint32(at - 4, true));
  const u64 = () => (need(8), (at += 8), Number(view.getBigUint64(at - 8, true)));
  const string = () => {
    const length = u64();
    need(length);
    at += length;
    return decoder.decode(bytes.subarray(at - length, at));
  };
  const skip = (type) => {
    if (type === GGUF_STRING) return void (need(8), (at += 8 + Number(view.getBigUint64(at, true))));
    if (type === GGUF_ARRAY) {
      const itemType = u32();
      const count = u64();
      if (itemType in GGUF_SCALAR_BYTES) return void (need(count * GGUF_SCALAR_BYTES[itemType]), (at += count * GGUF_SCALAR_BYTES[itemType]));
      for (let i = 0; i < count; i++) skip(itemType);
      return;
    }
    if (!(type in GGUF_SCALAR_BYTES)) throw new Error(`unknown GGUF value type ${type}`);
    need(GGUF_SCALAR_BYTES[type]);
    at += GGUF_SCALAR_BYTES[type];
  };
  try {
    need(4);
    if (decoder.decode(bytes.subarray(0, 4)) !== "GGUF") throw new Error("not a GGUF file (bad magic)");
    at = 4;
    const version = u32();
    u64(); // tensor count
    const keys = u64();
    const wanted = { "general.architecture": "architecture", "general.name": "name", "tokenizer.chat_template": "chatTemplate" };
    const header = { version, architecture: null, name: null, chatTemplate: null };
    for (let i = 0; i < keys; i++) {
      const key = string();
      const type = u32();
      if (key in wanted && type === GGUF_STRING) header[wanted[key]] = string();
      else skip(type);
    }
    return header;
  } catch (error) {
    if (error === TRUNCATED) return null;
    throw error;
  }
}

function rate(value) {
  return Number.isFinite(value) && value > 0 ? value : null;
}

function loadError(url, error, isBundled) {
  const raw = String(error?.message || error).replace(/\.$/, "");
  let hint = "";
  if (/HTTP 404/.test(raw)) {
    hint = isBundled
      ? " The model file is not on the server: run `python scripts/fetch_model.py` once."
      : " Check the model URL.";
  }
  const message = `The CPU engine could not load the model from ${url}: ${raw}.${hint}`;
  return new EngineError(/memory/i.test(raw) ? "memory" : "engine", message, { cause: error });
}

function chatError(error) {
  const raw = String(error?.message || error);
  if (error?.name === "RuntimeError" || /crashed/i.test(raw)) {
    const message = `The CPU engine crashed while generating (${raw}). Load the model again.`;
    return new EngineError(/memory/i.test(raw) ? "memory" : "engine", message, { cause: error });
  }
  const kind = /out of memory|allocation failed/i.test(raw) ? "memory" : "engine";
  return new EngineError(kind, `The CPU engine failed while generating: ${raw}`, { cause: error });
}

// wllama logs every step at debug level; keep its warnings and errors.
const quietLogger = {
  debug() {},
  log() {},
  warn: (...args) => console.warn("[wllama]", ...args),
  error: (...args) => console.error("[wllama]", ...args),
};

const MAX_ITEMS = 8;

/**
 * A copy of a JSON Schema in which every string has a maxLength (at most maxChars) and every
 * array a maxItems, so a grammar built from it cannot run on until the reply budget is spent.
 */
export function boundedSchema(schema, maxChars) {
  if (Array.isArray(schema)) return schema.map((item) => boundedSchema(item, maxChars));
  if (!schema || typeof schema !== "object") return schema;
  const copy = {};
  for (const [key, value] of Object.entries(schema)) {
    copy[key] = key === "enum" || key === "const" || key === "default" || key === "examples"
      ? value
      : boundedSchema(value, maxChars);
  }
  const types = [].concat(copy.type ?? []);
  if (types.includes("string") && !copy.enum && !copy.const) {
    copy.maxLength = Math.min(copy.maxLength ?? maxChars, maxChars);
  }
  if (types.includes("array")) copy.maxItems = Math.min(copy.maxItems ?? MAX_ITEMS, MAX_ITEMS);
  return copy;
}
