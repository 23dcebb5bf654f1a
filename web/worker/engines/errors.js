// Engine errors as messages a person understands, plus a kind the Python side acts on:
// "memory" becomes MemoryPressureError (the auto residency policy then unloads and retries).
// "crashed" (the CPU engine's worker died; it loads the model again) makes the Python side count
// the model as not loaded.
// Kinds: webgpu, f16, memory, config, context, network, cancelled, crashed, engine.

const BY_NAME = {
  WebGPUNotAvailableError: ["webgpu", "This browser has no WebGPU, which the WebLLM engine needs. Use a recent Chrome or Edge with a GPU."],
  WebGPUNotFoundError: ["webgpu", "This browser has no WebGPU adapter, which the WebLLM engine needs."],
  ShaderF16SupportError: ["f16", "This GPU does not support 16-bit floats (shader-f16). Choose the q4f32 variant of the model in Settings."],
  DeviceLostError: ["memory", "The GPU ran out of memory or was reset while working. Try a smaller model or a smaller context window."],
  ModelNotFoundError: ["config", "That model id is not known to WebLLM. Pick one from the list, or set a model URL for a self-hosted model."],
  ContextWindowSizeExceededError: ["context", "The prompt is longer than the model's context window. Raise the context window in Settings."],
};

/**
 * An error our engines raise with its words already written (kind and message kept as given).
 * Every engine error of ours is one of these: describeEngineError reads the kind, never a name.
 */
export class EngineError extends Error {
  constructor(kind, message, options = undefined) {
    super(message, options);
    this.name = "EngineError";
    this.kind = kind;
  }
}

/** @returns {{kind: string, message: string}} */
export function describeEngineError(error) {
  const name = (error && (error.name || error.constructor?.name)) || "Error";
  const raw = String((error && error.message) || error);
  if (error instanceof EngineError || name === "EngineError") return { kind: error.kind || "engine", message: raw };
  if (BY_NAME[name]) {
    const [kind, message] = BY_NAME[name];
    return { kind, message };
  }
  // WebLLM 0.2.86 throws a plain Error from its GPU detection when there is no adapter.
  if (/Unable to find a compatible GPU/i.test(raw)) {
    return { kind: "webgpu", message: "This browser found no GPU that WebGPU can use, which the WebLLM engine needs. Check that WebGPU is enabled and the GPU driver works (chrome://gpu), or choose the CPU engine in Settings." };
  }
  if (name === "GPUPipelineError" && /\bf16\b|shader-f16/i.test(raw)) {
    return { kind: "f16", message: "The GPU could not build this model's shaders because it does not support 16-bit floats (shader-f16). Choose the q4f32 variant of the model in Settings." };
  }
  if (name === "GPUPipelineError") {
    return { kind: "engine", message: `The GPU could not build this model's shaders (${firstLine(raw)}). The GPU may lack a feature the model needs; try another model or browser.` };
  }
  if (/out of memory|OOM|allocation failed|device (was )?lost/i.test(raw)) {
    return { kind: "memory", message: `The GPU ran out of memory: ${raw}` };
  }
  if (/failed to fetch|networkerror|load failed|Cannot fetch|Request failed|network error/i.test(raw)) {
    return { kind: "network", message: `The model files could not be downloaded (${firstLine(raw)}). If you are offline, connect once so they can be cached; otherwise check the model URL.` };
  }
  return { kind: "engine", message: raw };
}

function firstLine(text) {
  const line = text.split("\n")[0].trim();
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}
