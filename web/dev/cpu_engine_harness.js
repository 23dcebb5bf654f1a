// Module Worker of the CPU engine harness (cpu_engine_harness.html): owns one CpuEngine,
// as web/worker/worker.js does, and answers the page's calls. Each method gets {id} of the call first.
//   page -> worker  {id, method: "info" | "create" | "reload" | "preload" | "chat" | "interrupt" |
//                    "unload" | "counts" | "countTokens", args: [...]}
//   worker -> page  {id, result} | {id, error: {name, message}}
//                   {type: "token", id, text, ms}      streamed output of chat call `id`
//                   {type: "progress", progress, text} model loading
//                   {type: "prefill-progress", id}     prefill call `id` goes on
import { CpuEngine, cpuEngineInfo } from "../worker/engines/cpu.js";

let engine = null;
let engineOptions = {};

const onProgress = ({ progress, text }) => self.postMessage({ type: "progress", progress, text });

// The page's default context window; a test may ask for another.
const CONTEXT_WINDOW = 4096;

function currentEngine() {
  engine ??= new CpuEngine({ contextWindow: CONTEXT_WINDOW, ...engineOptions, onProgress });
  return engine;
}

const methods = {
  info: (_call) => ({ ...cpuEngineInfo(), label: engine?.label ?? null, options: engineOptions }),

  /** A fresh engine with other options (threads, contextWindow, seed, temperature). */
  async create(_call, options = {}) {
    if (engine) await engine.unload();
    engineOptions = options;
    engine = null;
    return { label: currentEngine().label };
  },

  async reload(_call, model) {
    const started = performance.now();
    await currentEngine().reload(model);
    return {
      loadedModel: engine.loadedModel,
      threads: engine.threads,
      template: engine.template,
      dotForm: engine.modelInfo?.dot_form ?? null,
      storage: engine.storage, // {kept, why}: whether the origin keeps the model's file
      bytes: engine.modelBytes,
      seconds: (performance.now() - started) / 1000,
    };
  },

  preload(_call, model) {
    currentEngine().preload(model);
  },

  async chat({ id }, messages, call) {
    const started = performance.now();
    const onToken = (text) => self.postMessage({ type: "token", id, text, ms: performance.now() - started });
    const reply = await currentEngine().chat(messages, call, onToken);
    return { ...reply, seconds: (performance.now() - started) / 1000 };
  },

  async prefill({ id }, messages, call) {
    const started = performance.now();
    const progress = [];
    const usage = await currentEngine().prefill(messages, call, (p) => {
      progress.push({ ...p, ms: performance.now() - started });
      self.postMessage({ type: "prefill-progress", id }); // the page's stall guard sees it
    });
    return { usage, progress, seconds: (performance.now() - started) / 1000 };
  },

  /** The key under which prefill(messages) keeps its state (a URL in Cache Storage). */
  stateKeyOf: (_call, messages) => currentEngine().stateKeyOf(messages),

  countTokens: (_call, texts) => currentEngine().countTokens(texts),
  interrupt: (_call) => engine?.interrupt(),
  unload: (_call) => currentEngine().unload(),
  counts: (_call) => {
    const { counts, loadedModel, threads, template } = currentEngine();
    return { ...counts, loadedModel, threads, template };
  },
};

self.onmessage = async ({ data: { id, method, args = [] } }) => {
  try {
    if (!methods[method]) throw new Error(`unknown method ${method}`);
    const result = await methods[method]({ id }, ...args);
    self.postMessage({ id, result: result ?? null });
  } catch (error) {
    self.postMessage({ id, error: { name: error?.name || "Error", kind: error?.kind, message: String(error?.message || error) } });
  }
};
