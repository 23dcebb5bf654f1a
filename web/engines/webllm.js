// The WebLLM engine (WebGPU), behind the engine interface the worker bridge uses:
//   reload(model), unload(), chat(messages, call, onToken) -> {text, usage, finish_reason},
//   interrupt(), counts {reloads, unloads}, label.
// call.sampling (an object or null; see wllama.js): temperature, top_p, repeat_penalty (as
// repetition_penalty), frequency_penalty, presence_penalty and seed reach WebLLM; the other
// keys have no WebLLM counterpart and are ignored.
// Tool calls are prompted and constrained with response_format json_object + schema (native
// tools work only for Hermes models in WebLLM 0.2.86).
import * as webllm from "../vendor/web-llm/index.js";

export const PREBUILT_MODELS = webllm.prebuiltAppConfig.model_list
  .filter((m) => !m.model_type) // chat models only (no embedding / VLM types)
  .map((m) => ({ id: m.model_id, vram_mb: m.vram_required_MB || null, low_resource: !!m.low_resource_required }));

export class WebLLMEngine {
  /**
   * @param {{contextWindow?: number, modelUrl?: string, modelLibUrl?: string,
   *          onProgress?: (p: {progress: number, text: string}) => void}} options
   */
  constructor(options = {}) {
    this.options = options;
    this.engine = null;
    this.loadedModel = null;
    this.counts = { reloads: 0, unloads: 0 };
    this.label = "WebLLM (WebGPU)";
  }

  appConfig(model) {
    const { modelUrl, modelLibUrl } = this.options;
    if (!modelUrl) return webllm.prebuiltAppConfig;
    // Self-hosted weights: an absolute URL laid out like Hugging Face's ".../resolve/main/".
    const prebuilt = webllm.prebuiltAppConfig.model_list.find((m) => m.model_id === model);
    const lib = modelLibUrl || prebuilt?.model_lib;
    if (!lib) throw Object.assign(new Error(`No model library for ${model}: set the model library URL.`), { name: "ModelNotFoundError" });
    return { ...webllm.prebuiltAppConfig, model_list: [{ model: modelUrl, model_id: model, model_lib: lib }] };
  }

  async reload(model) {
    const initProgressCallback = (report) => this.options.onProgress?.({ progress: report.progress, text: report.text });
    if (!this.engine) {
      this.engine = new webllm.MLCEngine({ appConfig: this.appConfig(model), initProgressCallback });
    } else {
      this.engine.setAppConfig?.(this.appConfig(model));
      this.engine.setInitProgressCallback?.(initProgressCallback);
    }
    this.loadedModel = null;
    // reload() unloads whatever was loaded first, then uploads the weights again.
    await this.engine.reload(model, { context_window_size: this.options.contextWindow || 4096 });
    this.loadedModel = model;
    this.counts.reloads += 1;
  }

  async unload() {
    if (this.engine) await this.engine.unload();
    this.loadedModel = null;
    this.counts.unloads += 1;
  }

  interrupt() {
    this.engine?.interruptGenerate();
  }

  async chat(messages, call, onToken) {
    const request = {
      messages,
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: call.max_tokens,
      extra_body: { enable_thinking: !!call.thinking },
      ...samplingOf(call.sampling),
    };
    if (call.schema) {
      // XGrammar takes the schema as a JSON string.
      request.response_format = { type: "json_object", schema: JSON.stringify(call.schema) };
    }
    let text = "";
    let usage = null;
    let finish = "stop";
    const chunks = await this.engine.chat.completions.create(request);
    for await (const chunk of chunks) {
      const choice = chunk.choices?.[0];
      const delta = choice?.delta?.content || "";
      if (delta) {
        text += delta;
        onToken?.(delta);
      }
      if (choice?.finish_reason) finish = choice.finish_reason;
      if (chunk.usage) usage = chunk.usage;
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

/** Models WebLLM holds in its cache, for the settings' "cached models" list. */
export async function cachedModels() {
  const found = [];
  for (const model of PREBUILT_MODELS) {
    try {
      if (await webllm.hasModelInCache(model.id, webllm.prebuiltAppConfig)) found.push(model.id);
    } catch {
      // A cache that cannot be read counts as empty.
    }
  }
  return found;
}

export async function deleteCachedModel(modelId) {
  await webllm.deleteModelAllInfoInCache(modelId, webllm.prebuiltAppConfig);
}
