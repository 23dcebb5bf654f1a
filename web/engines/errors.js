// Engine errors as messages a person understands, plus a kind the Python side acts on:
// "memory" becomes MemoryPressureError (the auto residency policy then unloads and retries).

const BY_NAME = {
  WebGPUNotAvailableError: ["webgpu", "This browser has no WebGPU, which the WebLLM engine needs. Use a recent Chrome or Edge with a GPU."],
  WebGPUNotFoundError: ["webgpu", "This browser has no WebGPU adapter, which the WebLLM engine needs."],
  ShaderF16SupportError: ["f16", "This GPU does not support 16-bit floats (shader-f16). Choose the q4f32 variant of the model in Settings."],
  DeviceLostError: ["memory", "The GPU ran out of memory or was reset while working. Try a smaller model or a smaller context window."],
  ModelNotFoundError: ["config", "That model id is not known to WebLLM. Pick one from the list, or set a model URL for a self-hosted model."],
  ContextWindowSizeExceededError: ["context", "The prompt is longer than the model's context window. Raise the context window in Settings."],
};

/** @returns {{kind: string, message: string}} */
export function describeEngineError(error) {
  const name = (error && (error.name || error.constructor?.name)) || "Error";
  const raw = String((error && error.message) || error);
  if (name.startsWith("CPU")) {
    // The CPU engine's own errors are already written for people; keep them as they are.
    return { kind: /memory/i.test(raw) ? "memory" : "engine", message: raw };
  }
  if (BY_NAME[name]) {
    const [kind, message] = BY_NAME[name];
    return { kind, message };
  }
  if (/out of memory|OOM|allocation failed|device (was )?lost/i.test(raw)) {
    return { kind: "memory", message: `The GPU ran out of memory: ${raw}` };
  }
  if (/failed to fetch|networkerror|load failed/i.test(raw)) {
    return { kind: "network", message: `The model files could not be downloaded (${raw}). Check the model URL, or connect once so they can be cached.` };
  }
  return { kind: "engine", message: raw };
}
