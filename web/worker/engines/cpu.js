// The CPU engine: llama.cpp compiled to WebAssembly by us (scripts/build_cpu_engine.sh, served
// from web/vendor/llama), for browsers without WebGPU. An Engine (../engine-port.js); here also
// `template`, the chat template the loaded model uses: {source: "gguf" | "builtin" |
// "default", name, architecture, warning?}.
// A model is a bundled id (BUNDLED_CPU_MODELS, served from web/models/<id>.gguf, fetched by
// scripts/fetch_model.py) or the URL of any .gguf file. llama.cpp runs in its own worker
// (cpu-worker.js); this object lives in the agent's worker and speaks to it.
// call: {model, purpose, max_tokens, schema?, grammar?, tool?, sampling?}. `grammar` (GBNF)
// replaces the schema's own conversion when the agent gives one. `sampling` (an object or
// null) sets llama.cpp's sampler for this call; each key is optional, null means "engine
// default" (llama-server's defaults): temperature, top_k, top_p, min_p, repeat_penalty,
// repeat_last_n, frequency_penalty, presence_penalty, dry_multiplier, dry_base,
// dry_allowed_length, dry_penalty_last_n, seed. Without temperature or seed the
// constructor's apply.
// usage: prompt_tokens, completion_tokens, prefill/decode tokens per second,
// time_to_first_token_s, cached_prompt_tokens (prompt tokens whose KV cache an earlier call
// left in place, so they cost nothing).
// Everything comes from our origin: the wasm from web/vendor/llama, the GGUF from web/models
// or the given URL, kept in the origin's Cache Storage so it is never downloaded again. The
// KV state of a prefilled prompt is kept there too, so the next visit starts warm.
import { EngineError } from "./errors.js";
import CATALOG from "../../models.json" with { type: "json" };

// The bundled models (web/models.json, which scripts/fetch_model.py fetches and checks). Which
// one runs is a setting (agent_py/page/settings.py, PageSettings.cpu_model, with its default).
export const CPU_MODEL_CATALOG = CATALOG.models;
export const BUNDLED_CPU_MODELS = CATALOG.models.map((model) => model.id);
// llama.cpp's batch: a long prompt reports progress every 256 tokens, and 256 prefilled the
// planner's prompt faster than larger batches (docs/models.md, "CPU engine speed").
const PROMPT_BATCH = 256;
const MAX_THREADS = 16; // the size of the build's thread pool
const WORKER_URL = new URL("./cpu-worker.js", import.meta.url).href;
const PAGE_ROOT = new URL("../../", import.meta.url).href;
const BUILD_URL = new URL("../../vendor/llama/build.json", import.meta.url).href;
const MODEL_CACHE = "agent-py-gguf-v1";
const STATE_CACHE = "agent-py-kv-state-v1";
const STATES_KEPT = 4; // saved prompt states, newest first; each is tens of MB

function bundledUrl(model) {
  return new URL(`../../models/${model}.gguf`, import.meta.url).href;
}

// llama.cpp's sampling parameters (llama-server's names).
const SAMPLING_KEYS = [
  "temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n",
  "frequency_penalty", "presence_penalty", "dry_multiplier", "dry_base", "dry_allowed_length",
  "dry_penalty_last_n", "seed",
];

/** What the CPU engine can use here: threads need SharedArrayBuffer (cross-origin isolation). */
export function cpuEngineInfo() {
  const isolated = !!self.crossOriginIsolated;
  const usable = typeof WebAssembly === "object" && typeof Worker === "function";
  return {
    isolated,
    sharedArrayBuffer: typeof SharedArrayBuffer === "function",
    hardwareConcurrency: navigator.hardwareConcurrency || 1,
    defaultThreads: isolated ? 2 : 1,
    usable,
    reason: usable ? "" : "This browser lacks WebAssembly workers, which the CPU engine needs. Use a recent Chrome or Edge.",
    note: isolated
      ? ""
      : "The page is not cross-origin isolated (no COOP/COEP headers), so the CPU engine runs on one thread.",
  };
}

export class CpuEngine {
  /**
   * @param {{threads?: number, contextWindow: number, seed?: number,
   *          temperature?: number, build?: "relaxed" | "threads" | "single",
   *          dot?: "i16" | "i32", promptBatch?: number,
   *          onProgress?: (p: {progress: number, text: string}) => void}} options
   * `build` names the engine build to run (cpu-worker.js); left out, the worker picks the
   * fastest this browser can run. `dot` names the relaxed build's dot product form (benches);
   * left out, the faster for this CPU. `promptBatch` is llama.cpp's batch for prompts (tests;
   * left out, PROMPT_BATCH): the answers do not depend on it.
   */
  constructor(options = {}) {
    const info = cpuEngineInfo();
    if (!Number.isSafeInteger(options.contextWindow)) {
      throw new TypeError(`contextWindow (the context_window setting) must be a whole number, got ${options.contextWindow}`);
    }
    this.options = {
      threads: info.isolated ? Math.min(options.threads || info.defaultThreads, MAX_THREADS) : 1,
      contextWindow: options.contextWindow,
      seed: options.seed,
      temperature: options.temperature,
      onProgress: options.onProgress,
      build: options.build,
      dot: options.dot,
      promptBatch: options.promptBatch || PROMPT_BATCH,
    };
    this.worker = null;
    this.loadedModel = null;
    this.loadedUrl = null;
    this.template = null;
    this.modelInfo = null;
    this.modelBytes = 0;
    // Whether the loaded model's file is kept in the origin's storage: {kept, why}.
    this.storage = null;
    this.counts = { reloads: 0, unloads: 0 };
    this.preloading = null; // {model, settled}: a load started ahead of the first reload
    // The last prefill's state (the planner's prompt), kept to put back when another call
    // (a code call, a generation) has taken the cache: {prompt, bytes}. `cachedText` is
    // what the cache holds now, as text: the last prompt and its reply ("" when unknown).
    this.pinned = null;
    this.cachedText = "";
    this.calls = new Map(); // id -> {resolve, reject, onEvent}
    this.generations = new Set(); // ids of running generations
    this.nextId = 1;
    const threads = this.options.threads === 1 ? "1 thread" : `${this.options.threads} threads`;
    this.label = `CPU engine (llama.cpp in WebAssembly, ${threads})`;
  }

  /** Threads llama.cpp really uses; null when nothing is loaded. */
  get threads() {
    return this.modelInfo ? this.modelInfo.n_threads : null;
  }

  /** The GGUF URL of a model: a bundled id, or any value that is itself a .gguf URL. */
  urlOf(model) {
    if (BUNDLED_CPU_MODELS.includes(model)) return bundledUrl(model);
    let url = null;
    if (/^(https?:|blob:)/i.test(model) || /\.gguf(\?.*)?$/i.test(model)) {
      try {
        url = new URL(model, PAGE_ROOT); // a relative URL is the page's (web/)
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

  /**
   * Starts loading `model` before anyone asks (the page, while Python starts); the next
   * reload of the same model waits for this load instead of starting another. Never rejects:
   * a failed load is tried again, and reported, by that reload.
   */
  preload(model) {
    const loading = this.reload(model);
    this.preloading = { model, settled: loading.then(() => true, () => false) };
  }

  async reload(model) {
    const preloading = this.preloading;
    this.preloading = null;
    if (preloading) {
      const loaded = await preloading.settled;
      if (loaded && preloading.model === model && this.loadedModel === model) return;
    }
    const url = this.urlOf(model);
    const info = cpuEngineInfo();
    if (!info.usable) throw new EngineError("engine", info.reason);
    await this.exit(); // like WebLLM's reload: whatever was loaded goes first
    const progress = (value, text) => this.options.onProgress?.({ progress: value, text });
    progress(0, `Loading ${model} on the CPU…`);
    let template;
    try {
      this.startWorker(); // llama.cpp starts while the file is fetched
      const started = performance.now();
      const { blob, kept, why } = await fetchModel(url, (loaded, total, note) => {
        // The download (or the read from the cache) is most of the load.
        const seconds = ((performance.now() - started) / 1000).toFixed(0);
        const size = total ? `${mb(loaded)} / ${mb(total)} MB` : `${mb(loaded)} MB`;
        const more = note ? ` (${note})` : "";
        progress(total ? Math.min(loaded / total, 1) * 0.9 : 0, `Loading ${model}: ${size}, ${seconds} s${more}`);
      });
      this.storage = { kept, why };
      const headerStarted = performance.now();
      template = chatTemplateFor(await readGgufHeader(blob));
      template.detect_ms = Math.round(performance.now() - headerStarted);
      progress(0.9, `Loading ${model} into llama.cpp…`);
      this.modelInfo = await this.request("load", {
        blob,
        name: "model.gguf",
        contextWindow: this.options.contextWindow,
        threads: this.options.threads,
        batch: this.options.promptBatch,
      });
      this.modelBytes = blob.size;
      // A template in the GGUF that llama.cpp does not know by its markers: ChatML, said.
      if (template.source === "gguf") {
        try {
          await this.request("format", { messages: [{ role: "user", content: "Hi" }], template: "" });
        } catch {
          template = unknownTemplate(template.architecture, "Its GGUF has a chat template llama.cpp does not recognise");
        }
      }
    } catch (error) {
      await this.exit();
      throw loadError(url, error, BUNDLED_CPU_MODELS.includes(model));
    }
    if (template.warning) console.warn(`[cpu engine] ${model}: ${template.warning}`);
    this.loadedModel = model;
    this.loadedUrl = url;
    this.template = template;
    this.counts.reloads += 1;
    const threads = this.threads === 1 ? "1 thread" : `${this.threads} threads`;
    const note = this.storage?.kept === false && this.storage.why ? `; not kept in this browser: ${this.storage.why}` : "";
    progress(1, `${model} loaded (${threads}${note})`);
  }

  async unload() {
    await this.exit();
    this.counts.unloads += 1;
  }

  /** Forgets the worker and the model in it; returns that worker (null: none). */
  detach() {
    const worker = this.worker;
    this.worker = null;
    this.loadedModel = null;
    this.loadedUrl = null;
    this.template = null;
    this.modelInfo = null;
    this.pinned = null;
    this.cachedText = "";
    return worker;
  }

  async exit() {
    const worker = this.detach();
    if (!worker) return;
    // Running generations end at their next step; then the worker (and all its memory) goes.
    this.interrupt(worker);
    const running = [...this.calls.values()].map((waiting) => waiting.settled);
    await Promise.allSettled(running);
    worker.terminate();
  }

  interrupt(worker = this.worker) {
    for (const target of this.generations) worker?.postMessage({ id: 0, op: "abort", args: { target } });
  }

  /** Each text's token count by the loaded model's tokenizer (special tokens parsed, none
   * added: a message's text as it sits inside the chat template). */
  async countTokens(texts) {
    this.checkLoaded({ model: null });
    return Promise.all(texts.map((text) => this.request("tokenize", { text })));
  }

  async chat(messages, call, onToken) {
    this.checkLoaded(call);
    const prompt = await this.format(messages);
    await this.restorePinned(prompt);
    return this.generate(prompt, call, onToken);
  }

  /**
   * Put the last prefill's state back when `prompt` shares more of it than of what the cache
   * holds now: a code call or a generation took the cache, and the planner's next call would
   * otherwise compute its whole prompt again (about 1,200 tokens, 5-7 s on two cores) where
   * a restore takes a fraction of a second. The floats are those computed, so answers do not
   * change.
   */
  async restorePinned(prompt) {
    if (!this.pinned) return;
    const gain = sharedLength(prompt, this.pinned.prompt) - sharedLength(prompt, this.cachedText);
    if (gain < PIN_MIN_GAIN_CHARS) return;
    this.cachedText = "";
    // A copy: the request transfers its bytes to the engine's worker.
    await this.request("restore", { bytes: this.pinned.bytes.slice(0) });
    this.cachedText = this.pinned.prompt;
  }

  /**
   * Compute the KV cache of `messages` and keep it: a later chat whose prompt starts with
   * them reuses it and prefills only the rest. The state is saved in the origin's storage,
   * keyed by engine build, model and prompt, and restored instead of computed when found (a
   * state that does not restore is ignored, with a warning in the usage).
   * onProgress({done, total}) reports the prompt tokens as llama.cpp processes them.
   * Resolves to the usage, with `state`: "restored" | "saved" | "unsaved".
   */
  async prefill(messages, call, onProgress) {
    this.checkLoaded(call);
    const prompt = await this.format(messages);
    const key = await this.stateKey(prompt);
    let restored = 0;
    let warning = null;
    const saved = key ? await readState(key) : null;
    this.pinned = null;
    if (saved) {
      try {
        restored = await this.request("restore", { bytes: saved.slice(0) });
      } catch (error) {
        warning = `The saved model state was ignored (${error.message}); computing it again.`;
        console.warn(`[cpu engine] ${warning}`);
      }
    }
    const prefillCall = { ...call, max_tokens: 0, schema: null, grammar: null, sampling: null };
    const reply = await this.generate(prompt, prefillCall, null, onProgress);
    const usage = { ...reply.usage, restored_tokens: restored, state: restored ? "restored" : "unsaved" };
    if (warning) usage.state_warning = warning;
    if (reply.finish_reason === "abort") return usage;
    const bytes = restored ? saved : await this.request("save");
    this.pinned = { prompt, bytes };
    if (!restored && key) {
      try {
        await writeState(key, bytes);
        usage.state = "saved";
      } catch (error) {
        console.warn(`[cpu engine] the model's state was not saved: ${error.message}`);
      }
    }
    return usage;
  }

  /**
   * The key of a prompt's saved state: engine build (the one the worker loaded, with or
   * without threads), model, context window and prompt.
   */
  async stateKey(prompt) {
    const build = this.modelInfo && (await buildId(this.modelInfo.build));
    if (!build || !this.loadedUrl || typeof caches === "undefined") return null;
    const identity = JSON.stringify([build, this.loadedUrl, this.modelBytes, this.options.contextWindow, prompt]);
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(identity));
    const hex = Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
    return new URL(`../../vendor/llama/state/${hex}`, import.meta.url).href;
  }

  /** The key of the saved state prefill(messages) would use (for tests and tools). */
  async stateKeyOf(messages) {
    return this.stateKey(await this.format(messages));
  }

  checkLoaded(call) {
    if (!this.worker || !this.loadedModel) {
      throw new Error(`The CPU engine has no model loaded (asked for ${call.model}); load it first.`);
    }
    if (call.model && call.model !== this.loadedModel) {
      throw new Error(`The CPU engine has ${this.loadedModel} loaded, not ${call.model}.`);
    }
  }

  format(messages) {
    const plain = messages.map(({ role, content }) => ({ role, content }));
    return this.request("format", { messages: plain, template: this.template.option });
  }

  async generate(prompt, call, onToken, onPromptProgress = null) {
    const params = { max_tokens: call.max_tokens, ...this.samplingOf(call.sampling) };
    if (call.grammar) {
      // A GBNF grammar from the agent (agent_py/core/grammar.py): the schema's own bounds, JSON on
      // one line as the worked examples write it (small models otherwise spend tokens on
      // newlines and indentation), and text it allows alone the engine writes unsampled.
      params.grammar = call.grammar;
    } else if (call.schema) {
      // llama.cpp turns the schema into a grammar; bound strings and arrays (maxLength,
      // maxItems), or a small model keeps going until max_tokens. Tool schemas (an MCP
      // server's, say) often leave strings unbounded: bound them by the reply budget here. The
      // agent still validates the reply against the original schema.
      params.schema = boundedSchema(call.schema, Math.max(call.max_tokens * 3, 32));
    }
    let text = "";
    const onEvent = (event) => {
      if (event.event === "token") {
        text += event.text;
        onToken?.(event.text);
      } else if (event.event === "progress") {
        onPromptProgress?.({ done: event.done, total: event.total, cached: event.cached });
      }
    };
    let summary;
    this.cachedText = "";
    const worker = this.worker;
    try {
      summary = await this.request("generate", { prompt, params, batch: this.options.promptBatch }, onEvent, true);
    } catch (error) {
      const failure = chatError(error);
      if (failure.kind === "crashed") this.forgetCrashed(worker);
      throw failure;
    }
    const { finish_reason: finish, ...usage } = summary;
    this.cachedText = prompt + text;
    return { text, finish_reason: finish, usage };
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

  startWorker() {
    const url = new URL(WORKER_URL);
    if (this.options.build) url.searchParams.set("build", this.options.build);
    if (this.options.dot) url.searchParams.set("dot", this.options.dot);
    const worker = new Worker(url.href); // classic: emscripten's threads use importScripts
    worker.onmessage = ({ data }) => {
      const waiting = this.calls.get(data.id);
      if (!waiting) return;
      if (data.event) return waiting.onEvent?.(data);
      this.calls.delete(data.id);
      this.generations.delete(data.id);
      if ("error" in data) waiting.reject(new Error(data.error));
      else waiting.resolve(data.result);
    };
    // The worker died (a crash in llama.cpp, a script that failed to load): every call fails,
    // and the engine forgets it, so the next call loads the model into a new one.
    worker.onerror = (event) => {
      event.preventDefault?.();
      this.failAll(worker, crashError(`the engine's worker stopped: ${event.message || "it crashed"}`));
      this.forgetCrashed(worker);
    };
    this.worker = worker;
  }

  /** A crashed worker's module cannot be trusted again: it goes, and with it the model. */
  forgetCrashed(worker) {
    if (this.worker !== worker) return;
    this.detach().terminate();
  }

  failAll(worker, error) {
    if (this.worker !== worker) return;
    for (const [id, waiting] of this.calls) {
      this.calls.delete(id);
      waiting.reject(error);
    }
    this.generations.clear();
  }

  request(op, args, onEvent = null, isGeneration = false) {
    const worker = this.worker;
    if (!worker) return Promise.reject(new Error("The CPU engine has no model loaded."));
    const id = this.nextId++;
    let settle;
    const settled = new Promise((resolve) => (settle = resolve));
    const result = new Promise((resolve, reject) => {
      this.calls.set(id, {
        onEvent,
        settled,
        resolve: (value) => (settle(), resolve(value)),
        reject: (error) => (settle(), reject(error)),
      });
    });
    if (isGeneration) this.generations.add(id);
    const transfer = args?.bytes instanceof ArrayBuffer ? [args.bytes] : [];
    worker.postMessage({ id, op, args }, transfer);
    return result;
  }
}

// Put the prefilled state back only for a gain of this much prompt text (about 100 tokens).
const PIN_MIN_GAIN_CHARS = 400;

/** How many leading characters two texts share. */
function sharedLength(a, b) {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

let buildPromise = null;

/**
 * The id of one engine build (web/vendor/llama/build.json): saved states are only for it.
 * `key` is the worker's (cpu-worker.js): "build_id_relaxed_simd", "build_id" (threads) or
 * "build_id_single_thread".
 */
async function buildId(key) {
  buildPromise ??= fetch(BUILD_URL)
    .then((response) => (response.ok ? response.json() : null))
    .catch(() => null);
  return (await buildPromise)?.[key] || null;
}

/**
 * The GGUF at `url` as a Blob: from the origin's Cache Storage when it is there, otherwise
 * downloaded into it (with progress) and read back, so the Blob is backed by disk, not memory.
 * A blob: URL (a file the user picked) is read as it is.
 */
/**
 * The GGUF at `url` as a Blob, from the origin's Cache Storage when it is there, else
 * downloaded and kept there for the next visit. When the origin's storage cannot keep it (its
 * quota, or an ephemeral or private window, where Cache.put fails with "Unexpected internal
 * error"), the model is loaded uncached and that is said: {blob, kept, why}.
 * onProgress(loaded, total, note) as bytes arrive; `note` says when the file is not kept.
 */
async function fetchModel(url, onProgress) {
  const cache = url.startsWith("blob:") || typeof caches === "undefined" ? null : await caches.open(MODEL_CACHE);
  const hit = cache && (await cache.match(url));
  if (hit) {
    const blob = await hit.blob();
    onProgress(blob.size, blob.size, "");
    return { blob, kept: true, why: "" };
  }
  const first = await download(url, onProgress);
  if (!cache) return { blob: await first.blob(""), kept: false, why: "" };
  const room = await freeStorage();
  if (room !== null && first.total > room) {
    const why = `this browser keeps at most ${mb(room)} MB more for the page, and the model is ${mb(first.total)} MB`;
    console.warn(`[cpu engine] the model is loaded without being kept: ${why}`);
    return { blob: await first.blob(`not kept: ${why}`), kept: false, why };
  }
  try {
    await cache.put(url, new Response(first.body, { headers: { "content-type": "application/octet-stream" } }));
    const kept = await cache.match(url);
    if (!kept) throw new Error("the cache dropped it");
    return { blob: await kept.blob(), kept: true, why: "" };
  } catch (error) {
    await cache.delete(url).catch(() => {});
    const why = `the browser's storage refused it (${error.message})`;
    console.warn(`[cpu engine] the model is loaded without being kept: ${why}`);
    const again = await download(url, onProgress);
    return { blob: await again.blob(`not kept: ${why}`), kept: false, why };
  }
}

/** A download of `url` that reports its bytes: {total, body, blob(note)}; `note` goes with
 * the progress reports from then on. */
async function download(url, onProgress) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`HTTP ${response.status} ${response.statusText}`.trim());
  const total = Number(response.headers.get("content-length")) || 0;
  let loaded = 0;
  let note = "";
  const body = response.body.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        loaded += chunk.byteLength;
        onProgress(loaded, total, note);
        controller.enqueue(chunk);
      },
    }),
  );
  const blob = (said) => {
    note = said;
    return new Response(body).blob();
  };
  return { total, body, blob };
}

/** Bytes the origin may still store (its quota less its usage), or null when unknown. */
async function freeStorage() {
  try {
    const { quota, usage } = await navigator.storage.estimate();
    return Number.isFinite(quota) && Number.isFinite(usage) ? Math.max(0, quota - usage) : null;
  } catch {
    return null;
  }
}

const mb = (bytes) => (bytes / 1e6).toFixed(0);

async function readState(key) {
  try {
    const cache = await caches.open(STATE_CACHE);
    const hit = await cache.match(key);
    return hit ? await hit.arrayBuffer() : null;
  } catch (error) {
    console.warn(`[cpu engine] the saved model state could not be read: ${error.message}`);
    return null;
  }
}

/** Keep `bytes` under `key`, and only the newest few states. */
async function writeState(key, bytes) {
  const cache = await caches.open(STATE_CACHE);
  await cache.delete(key);
  await cache.put(key, new Response(bytes));
  const keys = await cache.keys(); // oldest first
  for (const old of keys.slice(0, Math.max(0, keys.length - STATES_KEPT))) await cache.delete(old);
}

// Architectures whose GGUFs may lack a template but are known to want llama.cpp's built-in
// one: the Gemma 3 270M GGUF we bundle has none, and ChatML (the fallback) gives garbage.
const BUILTIN_FOR_ARCHITECTURE = [[/^gemma/, "gemma"]];

// Names of llama.cpp's built-in templates, recognised in a GGUF's template by their markers;
// llama.cpp applies a GGUF's template by recognising it the same way (it has no jinja here).
const TEMPLATE_MARKERS = [
  ["<|im_start|>", "chatml"],
  ["<start_of_turn>", "gemma"],
  ["<|start_header_id|>", "llama3"],
  ["[INST]", "llama2"],
  ["<|user|>", "zephyr"],
];

/**
 * Which chat template a model gets, from its GGUF header:
 *  - the GGUF has one: llama.cpp applies it (source "gguf"; `option` "" means the model's own);
 *  - it has none and its architecture is known to need a built-in one (Gemma): that built-in
 *    (source "builtin");
 *  - otherwise ChatML, with a warning (source "default").
 */
export function chatTemplateFor({ architecture, chatTemplate }) {
  if (chatTemplate) {
    const marker = TEMPLATE_MARKERS.find(([text]) => chatTemplate.includes(text));
    return { source: "gguf", name: marker ? marker[1] : "custom", architecture, option: "" };
  }
  const builtin = BUILTIN_FOR_ARCHITECTURE.find(([pattern]) => pattern.test(architecture || ""));
  if (builtin) return { source: "builtin", name: builtin[1], architecture, option: builtin[1] };
  return unknownTemplate(architecture, `The GGUF has no chat template and its architecture (${architecture || "unknown"}) is not one we know`);
}

function unknownTemplate(architecture, why) {
  return {
    source: "default",
    name: "chatml",
    architecture,
    option: "chatml",
    warning: `${why}: using ChatML. Replies may be poor; prefer a GGUF with a template llama.cpp knows.`,
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

function loadError(url, error, isBundled) {
  const raw = String(error?.message || error).replace(/\.$/, "");
  let hint = "";
  if (/HTTP 404/.test(raw)) {
    hint = isBundled
      ? " The model file is not on the server: run `python scripts/fetch_model.py` once."
      : " Check the model URL.";
  } else if (/agent-llama|importScripts|NetworkError/.test(raw)) {
    hint = " The engine's WebAssembly build is missing: run `bash scripts/setup.sh` once.";
  }
  const message = `The CPU engine could not load the model from ${url}: ${raw}.${hint}`;
  return new EngineError(/memory/i.test(raw) ? "memory" : "engine", message, { cause: error });
}

/** A crash of llama.cpp or of its worker: the call fails, and the next one loads the model
 * into a new worker (kind "crashed": the Python side then counts the model as not loaded). */
function crashError(raw, cause = undefined) {
  const message = `The CPU engine crashed (${raw}); the next call loads the model again.`;
  return new EngineError(/memory/i.test(raw) ? "memory" : "crashed", message, { cause });
}

function chatError(error) {
  if (error instanceof EngineError) return error;
  const raw = String(error?.message || error);
  if (/RuntimeError|unreachable|abort\(/i.test(raw)) return crashError(raw, error);
  const kind = /out of memory|allocation failed|context is full|more tokens than/i.test(raw)
    ? (/context|tokens than/i.test(raw) ? "context" : "memory")
    : "engine";
  return new EngineError(kind, `The CPU engine failed while generating: ${raw}`, { cause: error });
}

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
