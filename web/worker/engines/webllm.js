// The WebLLM engine (WebGPU), behind the engine interface the worker bridge uses:
//   reload(model), unload(), chat(messages, call, onToken, onNote) -> {text, usage, finish_reason},
//   interrupt(), counts {reloads, unloads}, label.
// call.sampling (an object or null; see cpu.js): temperature, top_p, repeat_penalty (as
// repetition_penalty), frequency_penalty, presence_penalty and seed reach WebLLM; the other
// keys have no WebLLM counterpart and are ignored.
// Tool calls are prompted and constrained with response_format json_object + schema (native
// tools work only for Hermes models in WebLLM 0.2.86).
// Where WebLLM 0.2.86 behaves in ways a caller would not guess, this adapter compensates:
// - extra_body.enable_thinking === false makes it insert an empty <think> block for ANY model,
//   so the switch is sent only to models that have it (Qwen3);
// - a response_format grammar applies from the first token, so a schema call never thinks;
// - interruptGenerate() before the generator takes its lock is forgotten (the flag is reset);
// - reload() cut short by unload() rejects with a bare string, or returns without error;
// - hasModelInCache / deleteModelAllInfoInCache default to prebuiltAppConfig.
import * as webllm from "../../vendor/web-llm/index.js";
import { EngineError } from "./errors.js";
import { detectWebGPU, f32Variant, needsShaderF16 } from "./gpu.js";

export const PREBUILT_MODELS = webllm.prebuiltAppConfig.model_list
  .filter((m) => !m.model_type) // chat models only (no embedding / VLM types)
  .map((m) => ({ id: m.model_id, vram_mb: m.vram_required_MB || null, low_resource: !!m.low_resource_required }));

/**
 * The app config WebLLM loads `model` from: the prebuilt records, or, with a model URL, one
 * self-hosted record (an absolute URL laid out like Hugging Face's ".../resolve/main/").
 */
export function appConfigFor(model, { modelUrl = "", modelLibUrl = "" } = {}) {
  if (!modelUrl) return webllm.prebuiltAppConfig;
  const prebuilt = webllm.prebuiltAppConfig.model_list.find((m) => m.model_id === model);
  const lib = modelLibUrl || prebuilt?.model_lib;
  if (!lib) throw new EngineError("config", `No model library for ${model}: set the model library URL in Settings.`);
  // The prebuilt record's overrides and required features still describe the same model.
  const record = { ...(prebuilt || {}), model: modelUrl, model_id: model, model_lib: lib };
  return { ...webllm.prebuiltAppConfig, model_list: [record] };
}

/** The record of `model` in `config`, or null. */
export function recordOf(model, config) {
  return config.model_list.find((m) => m.model_id === model) || null;
}

/**
 * Whether a model has Qwen3's per-request thinking switch (its chat template reads
 * enable_thinking). Judged from the record: the id, or the model library it runs on.
 */
export function hasThinkingSwitch(record) {
  if (!record) return false;
  const lib = String(record.model_lib || "").split("/").pop();
  return /^Qwen3-/i.test(String(record.model_id || "")) || /^Qwen3-/i.test(lib);
}

/**
 * A load error in words where the model record explains it: a shader pipeline that fails on
 * an adapter without shader-f16, for a model that uses 16-bit floats.
 */
export function classifyLoadError(error, record, gpu) {
  if (error?.name === "GPUPipelineError" && gpu && !gpu.f16 && needsShaderF16(record)) {
    return f16Error(record.model_id);
  }
  return error;
}

function f16Error(model) {
  const variant = f32Variant(model);
  const instead = variant && recordOf(variant, webllm.prebuiltAppConfig) ? `Choose ${variant} in Settings.` : "Choose a q4f32 model in Settings.";
  return new EngineError("f16", `This GPU has no shader-f16 support, so ${model} (a 16-bit float model) cannot run on it. ${instead}`);
}

export class WebLLMEngine {
  /**
   * @param {{contextWindow?: number, modelUrl?: string, modelLibUrl?: string,
   *          gpu?: {f16: boolean, adapter: string},
   *          onProgress?: (p: {progress: number, text: string}) => void}} options
   * gpu: detectWebGPU()'s result; detected at the first reload when not given.
   */
  constructor(options = {}) {
    this.options = options;
    this.engine = null;
    this.loadedModel = null;
    this.loadedRecord = null;
    // reload_ms: how long each completed reload took (scripts/webllm_check.py reports it).
    this.counts = { reloads: 0, unloads: 0, reload_ms: [] };
    this.label = "WebLLM (WebGPU)";
    // Every reload and unload takes a ticket; a reload that finds a later ticket lost a race.
    this.ticket = 0;
    this.lastRequest = null; // "reload" | "unload"
    this.activeCalls = new Set();
  }

  appConfig(model) {
    return appConfigFor(model, this.options);
  }

  async reload(model) {
    const config = this.appConfig(model);
    const record = recordOf(model, config);
    if (!record) throw new EngineError("config", `WebLLM knows no model called ${model}. Pick one from the list, or set a model URL for a self-hosted model.`);
    const started = performance.now();
    const ticket = ++this.ticket;
    this.lastRequest = "reload";
    this.loadedModel = null;
    this.loadedRecord = null;
    const gpu = (this.options.gpu ??= await detectWebGPU());
    if (ticket !== this.ticket) throw this.superseded(model);
    // WebLLM checks required_features only after downloading the model library, and Qwen3's
    // q4f16 records declare none: without this check the load fails inside shader compilation.
    if (gpu.adapter && !gpu.f16 && needsShaderF16(record)) {
      if (this.engine) await this.engine.unload(); // as WebLLM's reload would have done
      throw f16Error(model);
    }
    const initProgressCallback = (report) => this.options.onProgress?.({ progress: report.progress, text: report.text });
    if (!this.engine) {
      this.engine = new webllm.MLCEngine({ appConfig: config, initProgressCallback });
    } else {
      this.engine.setAppConfig(config);
      this.engine.setInitProgressCallback(initProgressCallback);
    }
    // reload() unloads whatever was loaded first, then uploads the weights again.
    let failure = null;
    try {
      // Without a contextWindow (the page always gives its setting), the model's own applies.
      await this.engine.reload(model, this.options.contextWindow ? { context_window_size: this.options.contextWindow } : {});
    } catch (error) {
      failure = error;
    }
    if (ticket !== this.ticket) {
      // unload() (or another reload) came while this one loaded. WebLLM then rejects with the
      // abort reason (a bare string), or, past its last abortable download, finishes loading
      // and returns quietly: after an unload the model must not stay on the GPU.
      if (this.lastRequest === "unload") await this.engine.unload();
      throw this.superseded(model);
    }
    if (failure) throw classifyLoadError(failure, record, gpu);
    this.loadedModel = model;
    this.loadedRecord = record;
    this.counts.reloads += 1;
    this.counts.reload_ms.push(Math.round(performance.now() - started));
  }

  superseded(model) {
    const why = this.lastRequest === "unload" ? "the model was unloaded while it loaded" : "another model load replaced it";
    return new EngineError("cancelled", `Loading ${model} was cancelled: ${why}.`);
  }

  async unload() {
    this.ticket += 1;
    this.lastRequest = "unload";
    this.loadedModel = null;
    this.loadedRecord = null;
    if (this.engine) await this.engine.unload();
    this.counts.unloads += 1;
  }

  interrupt() {
    // WebLLM forgets an interrupt that comes before its generator takes the lock, so every
    // call in progress keeps it and applies it again once generation has started.
    for (const call of this.activeCalls) call.interrupted = true;
    this.engine?.interruptGenerate();
  }

  async chat(messages, call, onToken, onNote) {
    const record = this.loadedRecord || recordOf(call.model, this.appConfig(call.model));
    const request = {
      messages,
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: call.max_tokens,
      ...samplingOf(call.sampling),
    };
    if (call.schema) {
      // XGrammar takes the schema as a JSON string.
      request.response_format = { type: "json_object", schema: JSON.stringify(call.schema) };
    }
    if (hasThinkingSwitch(record)) {
      // The grammar holds the reply from its first token, so a schema call cannot think:
      // ask for what will happen, and say so where the user watches the model.
      request.extra_body = { enable_thinking: !!call.thinking && !call.schema };
      if (call.thinking && call.schema) {
        onNote?.(`Thinking is off for this ${call.purpose} call: its reply must follow a JSON schema from the first token.`);
      }
    }
    const active = { interrupted: false, applied: false };
    this.activeCalls.add(active);
    let text = "";
    let usage = null;
    let finish = "stop";
    try {
      const chunks = await this.engine.chat.completions.create(request);
      for await (const chunk of chunks) {
        if (active.interrupted && !active.applied) {
          active.applied = true;
          await this.engine.interruptGenerate();
        }
        const choice = chunk.choices?.[0];
        const delta = choice?.delta?.content || "";
        if (delta) {
          text += delta;
          onToken?.(delta);
        }
        if (choice?.finish_reason) finish = choice.finish_reason;
        if (chunk.usage) usage = chunk.usage;
      }
    } finally {
      this.activeCalls.delete(active);
    }
    const extra = usage?.extra || {};
    return {
      text,
      finish_reason: finish,
      usage: {
        prompt_tokens: usage?.prompt_tokens || 0,
        completion_tokens: usage?.completion_tokens || 0,
        prefill_tokens_per_s: extra.prefill_tokens_per_s ?? null,
        decode_tokens_per_s: extra.decode_tokens_per_s ?? null,
        time_to_first_token_s: extra.time_to_first_token_s ?? null,
      },
    };
  }
}

// Our sampling keys -> WebLLM's chat.completions.create fields (0.2.86 reads these).
const SAMPLING_FIELDS = {
  temperature: "temperature",
  top_p: "top_p",
  repeat_penalty: "repetition_penalty",
  frequency_penalty: "frequency_penalty",
  presence_penalty: "presence_penalty",
  seed: "seed",
};

function samplingOf(sampling) {
  const fields = {};
  for (const [key, field] of Object.entries(SAMPLING_FIELDS)) {
    const value = sampling?.[key];
    // WebLLM rejects a seed that is not an integer.
    if (typeof value === "number" && (key === "seed" ? Number.isInteger(value) : Number.isFinite(value))) fields[field] = value;
  }
  // WebLLM rejects a repetition_penalty that is not positive.
  if (!(fields.repetition_penalty > 0)) delete fields.repetition_penalty;
  return fields;
}

/**
 * Models WebLLM holds in its cache, for the settings' "cached models" list: the prebuilt ones
 * and, when `config` holds a self-hosted record, that one (looked up in our own config).
 */
export async function cachedModels(config = webllm.prebuiltAppConfig) {
  const found = new Set();
  const lookups = [
    ...PREBUILT_MODELS.map((model) => [model.id, webllm.prebuiltAppConfig]),
    ...(config === webllm.prebuiltAppConfig ? [] : config.model_list.map((record) => [record.model_id, config])),
  ];
  for (const [id, where] of lookups) {
    try {
      if (await webllm.hasModelInCache(id, where)) found.add(id);
    } catch {
      // A cache that cannot be read counts as empty.
    }
  }
  return [...found];
}

/** Delete a cached model: a self-hosted record of `config` first, else the prebuilt one. */
export async function deleteCachedModel(modelId, config = webllm.prebuiltAppConfig) {
  const where = recordOf(modelId, config) ? config : recordOf(modelId, webllm.prebuiltAppConfig) ? webllm.prebuiltAppConfig : null;
  if (!where) throw new EngineError("config", `${modelId} is neither a prebuilt model nor the self-hosted model in Settings, so it cannot be deleted here.`);
  await webllm.deleteModelAllInfoInCache(modelId, where);
}
