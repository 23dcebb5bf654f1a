// The CPU engine: llama.cpp in WebAssembly (@wllama/wllama 3.8.1), for browsers without
// WebGPU. Same interface as the WebLLM engine:
//   reload(model), unload(), chat(messages, call, onToken) -> {text, usage, finish_reason},
//   interrupt(), counts {reloads, unloads}, label, loadedModel.
// Schemas are enforced by llama.cpp's JSON-schema-to-grammar converter through the chat
// response_format (json_schema) path. Everything comes from our origin: the wasm from
// web/vendor, the GGUF from web/models (scripts/fetch_model.py), which wllama then keeps in
// the origin's storage (OPFS) and never downloads again.
import { Wllama } from "../vendor/wllama/index.js";

export const DEFAULT_CPU_MODEL = "gemma3-270m-q4_k_m";
const DEFAULT_MODEL_URL = new URL("../models/gemma3-270m-q4_k_m.gguf", import.meta.url).href;
const WASM_URL = new URL("../vendor/wllama/wllama.wasm", import.meta.url).href;

// The Gemma 3 270M GGUF carries no chat template. llama.cpp's built-in "gemma" template only
// applies with jinja off: "gemma" with jinja on silently builds a broken prompt, and no
// template at all falls back to ChatML, which this model answers with garbage.
const CHAT_TEMPLATE = { chat_template: "gemma", jinja: false };

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
   * @param {{modelUrl?: string | URL, threads?: number, contextWindow?: number, seed?: number,
   *          temperature?: number,
   *          onProgress?: (p: {progress: number, text: string}) => void}} options
   */
  constructor(options = {}) {
    const info = cpuEngineInfo();
    this.options = {
      modelUrl: String(options.modelUrl || DEFAULT_MODEL_URL),
      threads: info.isolated ? options.threads || info.defaultThreads : 1,
      contextWindow: options.contextWindow || 4096,
      seed: options.seed,
      temperature: options.temperature,
      onProgress: options.onProgress,
    };
    this.wllama = null;
    this.loadedModel = null;
    this.loadedUrl = null;
    this.counts = { reloads: 0, unloads: 0 };
    this.running = new Map(); // AbortController -> promise of a running chat
    const threads = this.options.threads === 1 ? "1 thread" : `${this.options.threads} threads`;
    this.label = `CPU engine (llama.cpp in WebAssembly, ${threads})`;
  }

  /** Threads llama.cpp really uses; null when nothing is loaded. */
  get threads() {
    return this.wllama ? this.wllama.getNumThreads() : null;
  }

  /** The GGUF URL of a model id: the default id, or any value that is itself a .gguf URL. */
  urlOf(model) {
    if (!model || model === DEFAULT_CPU_MODEL) return this.options.modelUrl;
    let url = null;
    if (/^(https?:|blob:)/i.test(model) || /\.gguf(\?.*)?$/i.test(model)) {
      try {
        url = new URL(model, self.location.href);
      } catch {
        url = null;
      }
    }
    if (!url || !["http:", "https:", "blob:"].includes(url.protocol)) {
      throw Object.assign(
        new Error(
          `The CPU engine runs "${DEFAULT_CPU_MODEL}" or a GGUF file given by its URL, not "${model}". ` +
            "Choose the CPU model in Settings.",
        ),
        { name: "CPUModelNotFoundError" },
      );
    }
    return url.href;
  }

  async reload(model) {
    const url = this.urlOf(model);
    const info = cpuEngineInfo();
    if (!info.usable) throw Object.assign(new Error(info.reason), { name: "CPUEngineUnsupportedError" });
    await this.exit(); // like WebLLM's reload: whatever was loaded goes first
    const name = model || DEFAULT_CPU_MODEL;
    const progress = (value, text) => this.options.onProgress?.({ progress: value, text });
    progress(0, `Loading ${name} on the CPU…`);
    const wllama = new Wllama({ default: WASM_URL }, { logger: quietLogger, suppressNativeLog: true });
    wllama.setCompat(null); // never fall back to wllama's CDN build
    try {
      await wllama.loadModelFromUrl(url, {
        ...CHAT_TEMPLATE,
        n_ctx: this.options.contextWindow,
        n_threads: this.options.threads,
        n_gpu_layers: 0, // the CPU engine: never probe WebGPU
        seed: this.options.seed,
        progressCallback: ({ loaded, total }) => {
          const mb = (n) => (n / 1e6).toFixed(0);
          // The download (or the read from wllama's cache) is most of the load.
          progress(total ? Math.min(loaded / total, 1) * 0.9 : 0, `Loading ${name}: ${mb(loaded)} / ${mb(total)} MB`);
        },
      });
    } catch (error) {
      await wllama.exit().catch(() => {});
      throw loadError(url, error, url === DEFAULT_MODEL_URL);
    }
    this.wllama = wllama;
    this.loadedModel = name;
    this.loadedUrl = url;
    this.counts.reloads += 1;
    progress(1, `${name} loaded (${this.threads === 1 ? "1 thread" : `${this.threads} threads`})`);
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

  async generate(wllama, messages, call, onToken, signal) {
    const request = {
      messages: messages.map(({ role, content }) => ({ role, content })),
      stream: true,
      max_tokens: call.max_tokens,
      timings_per_token: true, // so an interrupted generation still has its timings
      abortSignal: signal,
    };
    if (this.options.temperature !== undefined) request.temperature = this.options.temperature;
    if (call.schema) {
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
      },
    };
  }
}

function rate(value) {
  return Number.isFinite(value) && value > 0 ? value : null;
}

function loadError(url, error, isDefault) {
  const raw = String(error?.message || error).replace(/\.$/, "");
  let hint = "";
  if (/HTTP 404/.test(raw)) {
    hint = isDefault
      ? " The model file is not on the server: run `python scripts/fetch_model.py` once."
      : " Check the model URL.";
  }
  return Object.assign(new Error(`The CPU engine could not load the model from ${url}: ${raw}.${hint}`), {
    name: "CPUEngineLoadError",
    cause: error,
  });
}

function chatError(error) {
  const raw = String(error?.message || error);
  if (error?.name === "RuntimeError" || /crashed/i.test(raw)) {
    return Object.assign(new Error(`The CPU engine crashed while generating (${raw}). Load the model again.`), {
      name: "CPUEngineCrashError",
      cause: error,
    });
  }
  return Object.assign(new Error(`The CPU engine failed while generating: ${raw}`), { cause: error });
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
