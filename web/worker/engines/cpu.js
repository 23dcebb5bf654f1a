// The CPU engine: llama.cpp compiled to WebAssembly by us (scripts/cpu_engine/build.sh, served
// from web/vendor/llama), for browsers without WebGPU. An Engine (../engine-port.js); here also
// `template`, the chat template the loaded model uses: {source: "gguf" | "builtin" |
// "default", name, architecture, warning?} (cpu-gguf.js).
// A model is a bundled id (BUNDLED_CPU_MODELS, served from web/models/<id>.gguf, fetched by
// scripts/fetch_model.py) or the URL of any .gguf file. llama.cpp runs in its own worker
// (cpu-worker.js); this object lives in the agent's worker and speaks to it.
// One class a little over 400 lines: the engine's one job (load, chat, prefill, the pinned
// prefilled prompt); its worker line, stores and GGUF reading are modules of their own.
// call: a CallInfo (../engine-port.js). Its `grammar` (GBNF) replaces the schema's own
// conversion when the agent gives one. `sampling` (an object or
// null) sets llama.cpp's sampler for this call; each key is optional, null means "engine
// default" (llama-server's defaults): temperature, top_k, top_p, min_p, repeat_penalty,
// repeat_last_n, frequency_penalty, presence_penalty, dry_multiplier, dry_base,
// dry_allowed_length, dry_penalty_last_n, seed. Without temperature or seed the
// constructor's apply.
// usage: prompt_tokens, completion_tokens, prefill/decode tokens per second,
// time_to_first_token_s, cached_prompt_tokens (prompt tokens whose KV cache an earlier call
// left in place, so they cost nothing).
// This file holds the engine's calls and what it keeps between them (the loaded model, the
// pinned prefill state). Its other parts: cpu-rpc.js speaks to llama.cpp's worker,
// cpu-model-store.js fetches GGUF files and keeps them, cpu-state-store.js keeps prefilled KV
// states, cpu-gguf.js reads a GGUF's header and picks its chat template, cpu-schema.js bounds
// a call's schema for llama.cpp's grammar. Everything comes from our origin (the wasm from
// web/vendor/llama) or the model URL given.
import { EngineError } from "./errors.js";
import { CpuWorkerRpc, crashError } from "./cpu-rpc.js";
import { bundledUrl, fetchModel, mb } from "./cpu-model-store.js";
import { buildId, readState, stateKeyFor, writeState } from "./cpu-state-store.js";
import { chatTemplateFor, readGgufHeader, unknownTemplate } from "./cpu-gguf.js";
import { boundedSchema } from "./cpu-schema.js";
import { cpuThreads } from "./cpu-threads.js";
import CATALOG from "../../models.json" with { type: "json" };

// The bundled models (web/models.json, which scripts/fetch_model.py fetches and checks). Which
// one runs is a setting (agent_py/page/settings.py, PageSettings.cpu_model, with its default).
export const CPU_MODEL_CATALOG = CATALOG.models;
export const BUNDLED_CPU_MODELS = CATALOG.models.map((model) => model.id);
// llama.cpp's batch: a long prompt reports progress every 256 tokens, and 256 prefilled the
// planner's prompt faster than larger batches (scripts/cpu_engine/README.md).
const PROMPT_BATCH = 256;
const PAGE_ROOT = new URL("../../", import.meta.url).href;

// llama.cpp's sampling parameters (llama-server's names).
const SAMPLING_KEYS = [
  "temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n",
  "frequency_penalty", "presence_penalty", "dry_multiplier", "dry_base", "dry_allowed_length",
  "dry_penalty_last_n", "seed",
];

/** What the CPU engine can use here: threads need SharedArrayBuffer (cross-origin isolation).
 * `defaultThreads` is the threads it runs without a setting, `mostThreads` the most it runs. */
export function cpuEngineInfo() {
  const isolated = !!self.crossOriginIsolated;
  const usable = typeof WebAssembly === "object" && typeof Worker === "function";
  const { automatic, most } = cpuThreads(navigator.hardwareConcurrency, isolated);
  return {
    isolated,
    sharedArrayBuffer: typeof SharedArrayBuffer === "function",
    hardwareConcurrency: navigator.hardwareConcurrency || 1,
    defaultThreads: automatic,
    mostThreads: most,
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
   * left out, PROMPT_BATCH): the answers do not depend on it. `threads` is the user's setting
   * (cpu-threads.js: 0 or left out, automatic; above the pool's size, clamped).
   */
  constructor(options = {}) {
    const info = cpuEngineInfo();
    if (!Number.isSafeInteger(options.contextWindow)) {
      throw new TypeError(`contextWindow (the context_window setting) must be a whole number, got ${options.contextWindow}`);
    }
    this.options = {
      threads: cpuThreads(navigator.hardwareConcurrency, info.isolated, options.threads).threads,
      contextWindow: options.contextWindow,
      seed: options.seed,
      temperature: options.temperature,
      onProgress: options.onProgress,
      build: options.build,
      dot: options.dot,
      promptBatch: options.promptBatch || PROMPT_BATCH,
    };
    const workerOptions = { build: this.options.build, dot: this.options.dot };
    this.rpc = new CpuWorkerRpc(workerOptions, (worker) => this.forgetCrashed(worker));
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
    this.label = labelFor(this.options.threads);
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
      this.rpc.startWorker(); // llama.cpp starts while the file is fetched
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
      this.modelInfo = await this.rpc.request("load", {
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
          await this.rpc.request("format", { messages: [{ role: "user", content: "Hi" }], template: "" });
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
    this.label = labelFor(this.threads); // what llama.cpp runs (its pool may hold fewer)
    const threads = threadsText(this.threads);
    const note = this.storage?.kept === false && this.storage.why ? `; not kept in this browser: ${this.storage.why}` : "";
    progress(1, `${model} loaded (${threads}${note})`);
  }

  async unload() {
    await this.exit();
    this.counts.unloads += 1;
  }

  /** Forgets the worker and the model in it; returns that worker (null: none). */
  detach() {
    const worker = this.rpc.detach();
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
    await this.rpc.close(worker);
  }

  interrupt() {
    this.rpc.interrupt();
  }

  /** Each text's token count by the loaded model's tokenizer (special tokens parsed, none
   * added: a message's text as it sits inside the chat template). */
  async countTokens(texts) {
    this.checkLoaded({ model: null });
    return Promise.all(texts.map((text) => this.rpc.request("tokenize", { text })));
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
    await this.rpc.request("restore", { bytes: this.pinned.bytes.slice(0) });
    this.cachedText = this.pinned.prompt;
  }

  /**
   * Compute the KV cache of `messages` and keep it: a later chat whose prompt starts with
   * them reuses it and prefills only the rest. The state is saved in the origin's storage,
   * keyed by engine build, model and prompt, and restored instead of computed when found (a
   * state that does not restore is ignored, with a warning in the usage).
   * onProgress({done, total}) reports the prompt tokens as llama.cpp processes them.
   * Resolves to the usage, with `state`: "restored" | "saved" | "unsaved", and
   * `state_source: "shipped"` when the restored state came from the page's server (set-up
   * ships the default planner prompts' states; such a state is then kept in storage too).
   */
  async prefill(messages, call, onProgress) {
    this.checkLoaded(call);
    const prompt = await this.format(messages);
    const key = await this.stateKey(prompt);
    let restored = 0;
    let warning = null;
    const found = key ? await readState(key) : null;
    const saved = found?.bytes ?? null;
    this.pinned = null;
    if (saved) {
      try {
        restored = await this.rpc.request("restore", { bytes: saved.slice(0) });
      } catch (error) {
        warning = `The saved model state was ignored (${error.message}); computing it again.`;
        console.warn(`[cpu engine] ${warning}`);
      }
    }
    const prefillCall = { ...call, max_tokens: 0, schema: null, grammar: null, sampling: null };
    const reply = await this.generate(prompt, prefillCall, null, onProgress);
    const usage = { ...reply.usage, restored_tokens: restored, state: restored ? "restored" : "unsaved" };
    if (restored && found.shipped) usage.state_source = "shipped";
    if (warning) usage.state_warning = warning;
    if (reply.finish_reason === "abort") return usage;
    const bytes = restored ? saved : await this.rpc.request("save");
    this.pinned = { prompt, bytes };
    if ((!restored || found.shipped) && key) {
      try {
        await writeState(key, bytes); // a shipped state is kept too: the next visit is offline-ready
        if (!restored) usage.state = "saved";
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
    // The model by its path on this origin (the port of a loopback page changes from run to
    // run, and a state shipped with the page must match any of them), by URL elsewhere.
    const model = new URL(this.loadedUrl, self.location.href);
    const where = model.origin === self.location.origin ? model.pathname : model.href;
    const identity = JSON.stringify([build, where, this.modelBytes, this.options.contextWindow, prompt]);
    return stateKeyFor(identity);
  }

  /** The key of the saved state prefill(messages) would use (for tests and tools). */
  async stateKeyOf(messages) {
    return this.stateKey(await this.format(messages));
  }

  checkLoaded(call) {
    if (!this.rpc.worker || !this.loadedModel) {
      throw new Error(`The CPU engine has no model loaded (asked for ${call.model}); load it first.`);
    }
    if (call.model && call.model !== this.loadedModel) {
      throw new Error(`The CPU engine has ${this.loadedModel} loaded, not ${call.model}.`);
    }
  }

  format(messages) {
    const plain = messages.map(({ role, content }) => ({ role, content }));
    return this.rpc.request("format", { messages: plain, template: this.template.option });
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
    const worker = this.rpc.worker;
    try {
      summary = await this.rpc.request("generate", { prompt, params, batch: this.options.promptBatch }, onEvent, true);
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

  /** A crashed worker's module cannot be trusted again: it goes, and with it the model. */
  forgetCrashed(worker) {
    if (this.rpc.worker !== worker) return;
    // Any other call to it would wait for ever on a terminated worker.
    this.rpc.failAll(worker, crashError("another call crashed the engine's worker"));
    this.detach().terminate();
  }
}

const threadsText = (threads) => (threads === 1 ? "1 thread" : `${threads} threads`);
const labelFor = (threads) => `CPU engine (llama.cpp in WebAssembly, ${threadsText(threads)})`;

// Put the prefilled state back only for a gain of this much prompt text (about 100 tokens).
const PIN_MIN_GAIN_CHARS = 400;

/** How many leading characters two texts share. */
function sharedLength(a, b) {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
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

function chatError(error) {
  if (error instanceof EngineError) return error;
  const raw = String(error?.message || error);
  if (/RuntimeError|unreachable|abort\(/i.test(raw)) return crashError(raw, error);
  const kind = /out of memory|allocation failed|context is full|more tokens than/i.test(raw)
    ? (/context|tokens than/i.test(raw) ? "context" : "memory")
    : "engine";
  return new EngineError(kind, `The CPU engine failed while generating: ${raw}`, { cause: error });
}
