// WebGPU detection, done before any model load so the page can say in words what is missing.

/**
 * @returns {Promise<{ok: boolean, f16: boolean, reason: string, adapter: string}>}
 */
export async function detectWebGPU() {
  if (!("gpu" in navigator) || !navigator.gpu) {
    return {
      ok: false,
      f16: false,
      adapter: "",
      reason: "This browser has no WebGPU (navigator.gpu is missing). Use a recent Chrome or Edge on a machine with a GPU.",
    };
  }
  let adapter = null;
  try {
    adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  } catch (error) {
    return { ok: false, f16: false, adapter: "", reason: `WebGPU failed to start: ${error.message || error}` };
  }
  if (!adapter) {
    return {
      ok: false,
      f16: false,
      adapter: "",
      reason: "This browser has no WebGPU adapter: WebGPU is present but no GPU is available to it (headless browsers and some drivers). The WebLLM engine cannot run here.",
    };
  }
  const info = adapter.info || {};
  const name = [info.vendor, info.architecture, info.description].filter(Boolean).join(" ") || "unknown GPU";
  const f16 = adapter.features.has("shader-f16");
  return {
    ok: true,
    f16,
    adapter: name,
    reason: f16 ? "" : "This GPU has no shader-f16 support: q4f16 models cannot run; choose a q4f32 model.",
  };
}

/** The q4f32 variant of a q4f16 model id, for adapters without shader-f16. */
export function f32Variant(modelId) {
  return modelId.includes("q4f16") ? modelId.replace("q4f16", "q4f32") : null;
}
