// Which engine runs the agent, made from the settings in effect: WebLLM, the CPU engine, a model
// server (reached from Python), or the scripted test engine. Each comes with what the UI shows
// of it ({name, label, usable, reason}); an engine module is loaded only when it is chosen.
import { describeEngineError } from "./engines/errors.js";
import { chooseEngine, f32Variant, needsShaderF16 } from "./engines/gpu.js";
import { toUI } from "../protocol.js";

// "auto": WebLLM on a usable GPU (a hardware adapter), otherwise the CPU engine, saying why.
// `post` sends the model's loading progress to the UI.
export async function createEngine(choice, settings, gpu, post) {
  if (choice === "scripted") {
    const { ScriptedEngine } = await import("./engines/scripted.js");
    const scripted = new ScriptedEngine({ contextWindow: settings.context_window });
    return { engine: scripted, gpu, info: { name: "scripted", label: scripted.label, usable: true, reason: gpu.reason } };
  }
  if (choice === "openai") return modelServerEngine(gpu, settings);
  if (chooseEngine(choice, gpu) === "cpu") {
    return createCpuEngine(gpu, settings, choice === "auto", post);
  }
  return createWebLLMEngine(gpu, settings, post);
}

// A model server (OpenAI's chat-completions API) is reached from Python
// (agent_py/engines/model_server.py, over http-port.js), so there is no engine object here.
function modelServerEngine(gpu, settings) {
  const url = settings.openai_base_url;
  const missing = [!url && "the server's URL", !settings.openai_model && "its model"].filter(Boolean);
  const info = {
    name: "openai",
    label: url ? `Model server at ${url}` : "Model server",
    usable: missing.length === 0,
    reason: missing.length ? `Set ${missing.join(" and ")} in Settings (engine: model server).` : "",
  };
  return { engine: null, gpu, info };
}

export async function createCpuEngine(gpu, settings, chosenForLackOfGpu, post) {
  const { CpuEngine, cpuEngineInfo } = await import("./engines/cpu.js");
  const cpuInfo = cpuEngineInfo();
  const cpu = new CpuEngine({
    contextWindow: settings.context_window,
    threads: settings.cpu_threads, // 0: automatic (cpu-threads.js)
    seed: settings.cpu_seed, // Python's defaults (agent_py/page/settings.py)
    temperature: settings.cpu_temperature,
    onProgress: ({ progress, text }) => post(toUI.progress("model", progress, text)),
  });
  const why = chosenForLackOfGpu ? `${gpu.reason} Using the CPU engine instead (a small model; slower).` : "The CPU engine was chosen in Settings.";
  return {
    engine: cpu,
    gpu,
    info: {
      name: "cpu",
      label: cpu.label,
      usable: cpuInfo.usable,
      reason: cpuInfo.usable ? [why, cpuInfo.note].filter(Boolean).join(" ") : cpuInfo.reason,
      // What Settings shows of the threads: those used, those a setting of 0 gives, the most.
      threads: { used: cpu.options.threads, automatic: cpuInfo.defaultThreads, most: cpuInfo.mostThreads, cores: cpuInfo.hardwareConcurrency, isolated: cpuInfo.isolated },
    },
  };
}

async function createWebLLMEngine(gpu, settings, post) {
  const { WebLLMEngine, appConfigFor, recordOf } = await import("./engines/webllm.js");
  const webllmEngine = new WebLLMEngine({
    contextWindow: settings.context_window,
    modelUrl: settings.model_url,
    modelLibUrl: settings.model_lib_url,
    gpu,
    onProgress: ({ progress, text }) => post(toUI.progress("model", progress, text)),
  });
  // WebLLM was chosen in Settings (or auto found a GPU): on a software adapter it still runs.
  let reason = gpu.software ? `${gpu.reason} WebLLM was chosen in Settings, so it runs there anyway, very slowly.` : gpu.reason;
  let usable = gpu.ok || gpu.software;
  let record = null;
  try {
    record = recordOf(settings.model, appConfigFor(settings.model, webllmEngine.options));
  } catch (error) {
    return { engine: webllmEngine, gpu, info: { name: "webllm", label: webllmEngine.label, usable: false, reason: describeEngineError(error).message } };
  }
  if (usable && !gpu.f16 && needsShaderF16(record)) {
    // The same check runs again at every reload, for whichever model a run asks for.
    usable = false;
    const f16 = `This GPU has no shader-f16 support, so ${settings.model} (a 16-bit float model) cannot run. Choose ${f32Variant(settings.model) || "a q4f32 model"} in Settings.`;
    reason = gpu.software ? `${gpu.reason} ${f16}` : f16;
  }
  return { engine: webllmEngine, gpu, info: { name: "webllm", label: webllmEngine.label, usable, reason } };
}
