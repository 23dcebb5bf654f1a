// WebGPU detection, done before any model load so the page can say in words what is missing,
// and the rules that follow from it: which engine `auto` takes, and which models need f16.

// Software renderers that Chromium and Mesa expose as WebGPU adapters. They run WGSL on the
// CPU: correct, but a 4B model there answers in minutes per token, so they are no usable GPU.
const SOFTWARE_ARCHITECTURES = ["swiftshader", "llvmpipe", "lavapipe"];

/**
 * ok: a usable GPU (a hardware adapter). software: the adapter is a software renderer
 * (ok is then false, but WebLLM can still be forced in Settings).
 * @returns {Promise<{ok: boolean, f16: boolean, software: boolean, reason: string, adapter: string}>}
 */
export async function detectWebGPU() {
  const none = { ok: false, f16: false, software: false, adapter: "" };
  if (!("gpu" in navigator) || !navigator.gpu) {
    return {
      ...none,
      reason: "This browser has no WebGPU (navigator.gpu is missing). Use a recent Chrome or Edge on a machine with a GPU.",
    };
  }
  let adapter = null;
  try {
    adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  } catch (error) {
    return { ...none, reason: `WebGPU failed to start: ${error.message || error}` };
  }
  if (!adapter) {
    return {
      ...none,
      reason: "This browser has no WebGPU adapter: WebGPU is present but no GPU is available to it (headless browsers and some drivers). The WebLLM engine cannot run here.",
    };
  }
  return describeAdapter(adapter);
}

/** The detection result for one adapter (exported for tests that hold a real adapter). */
export function describeAdapter(adapter) {
  const info = adapter.info || {};
  const name = [info.vendor, info.architecture, info.description].filter(Boolean).join(" ") || "unknown GPU";
  const f16 = adapter.features.has("shader-f16");
  const software = isSoftwareAdapter(adapter);
  if (software) {
    return {
      ok: false,
      f16,
      software,
      adapter: name,
      reason: `This browser's WebGPU adapter is a software renderer (${name}), not a GPU: a language model on it would take minutes per answer.`,
    };
  }
  return {
    ok: true,
    f16,
    software,
    adapter: name,
    reason: f16 ? "" : "This GPU has no shader-f16 support: q4f16 and q0f16 models cannot run; choose a q4f32 or q0f32 model.",
  };
}

/** Chromium reports a fallback adapter in adapter.info.isFallbackAdapter (older: on the adapter). */
export function isSoftwareAdapter(adapter) {
  const info = adapter.info || {};
  if (info.isFallbackAdapter === true || adapter.isFallbackAdapter === true) return true;
  const text = [info.architecture, info.description, info.device].filter(Boolean).join(" ").toLowerCase();
  return SOFTWARE_ARCHITECTURES.some((name) => text.includes(name));
}

/**
 * The engine for a choice ("auto" | "webllm" | "cpu" | "scripted") on this machine.
 * auto takes WebLLM only on a usable (hardware) GPU; a forced choice is kept as it is.
 */
export function chooseEngine(choice, gpu) {
  if (choice === "auto") return gpu.ok ? "webllm" : "cpu";
  return choice;
}

/**
 * Whether a WebLLM model record needs the shader-f16 feature. WebLLM 0.2.86 declares
 * required_features only for some records (not Qwen3's), so the quantization named in the
 * record's model library or id (q4f16_1, q0f16, q3f16_1) counts too.
 */
export function needsShaderF16(record) {
  if (!record) return false;
  if ((record.required_features || []).includes("shader-f16")) return true;
  const lib = String(record.model_lib || "").split("/").pop();
  return /q\d+f16/i.test(lib) || /q\d+f16/i.test(String(record.model_id || ""));
}

/** The f32 variant of an f16 model id (q4f16_1 -> q4f32_1, q0f16 -> q0f32), or null. */
export function f32Variant(modelId) {
  return /q\d+f16/i.test(modelId) ? modelId.replace(/(q\d+)f16/i, "$1f32") : null;
}
