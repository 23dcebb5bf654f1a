// The agent worker: Pyodide, agent_py and the model engine live here, off the UI thread.
// The messages it takes and sends are in protocol.js (ToWorker, ToUI); Python's side of the
// bridge below is typed in agent_py/page/ports.py.
import { startPython } from "./python-boot.js";
import { describeEngineError } from "./engines/errors.js";
import { chooseEngine, detectWebGPU, f32Variant, needsShaderF16 } from "./engines/gpu.js";
import { createHttpBridge } from "./http-port.js";
import { ToWorker, bridgeFailed, bridgeOk, toUI } from "../protocol.js";
import { createUserBridge } from "./user-port.js";

const PYODIDE_URL = new URL("../vendor/pyodide/", import.meta.url).href;

let pyodide = null;
let page = null; // agent_py.page.session.PageSession (a PyProxy, kept for the worker's lifetime)
let loopDrains = null; // agent_py.page.loop.drains: runs of the event loop's ready queue
let engine = null;
let engineInfo = null;
let userSettings = {}; // what the user changed, as the UI last sent it (boot or configure)
let settingsNow = null; // every setting in effect (PageSettings, from Python)
let running = false;
const pendingSandbox = new Map();
let nextSandboxId = 1;

// Agent events wait here until the end of the current turn, then go in one message; streamed
// text waits until other messages are sent or TOKEN_FLUSH_MS has passed, then goes in one
// message too (an engine streams a token at a time, and every message costs the UI thread a
// task and a redraw). At most one of the two holds anything, and anything else posted sends it
// first, so the UI sees every message in the order it was made.
const TOKEN_FLUSH_MS = 50; // the live output still updates 20 times a second
let pendingEvents = []; // JSON strings, as Python emitted them
let pendingTokens = null; // {purpose, step, text}
let tokenTimer = 0;
function flushEvents() {
  if (!pendingEvents.length) return;
  const events = JSON.parse(`[${pendingEvents.join(",")}]`);
  pendingEvents = [];
  for (const event of events) stepClock.onEvent(event.type);
  self.postMessage(toUI.events(events));
}
function flushTokens() {
  if (!pendingTokens) return;
  clearTimeout(tokenTimer);
  const { purpose, step, text } = pendingTokens;
  pendingTokens = null;
  self.postMessage(toUI.token(purpose, step, text));
}
function flushPending() {
  flushEvents();
  flushTokens();
}
function postToken(purpose, step, text) {
  if (pendingTokens && pendingTokens.purpose === purpose && pendingTokens.step === step) {
    pendingTokens.text += text;
    return;
  }
  flushPending();
  pendingTokens = { purpose, step, text };
  tokenTimer = setTimeout(flushTokens, TOKEN_FLUSH_MS);
}
const post = (message) => {
  flushPending();
  self.postMessage(message);
};

// Orchestration time per step of the current run, outside the engine: the steps of a task run
// together, so the run is cut into one segment per task (the next task starts at its first
// step_started after a reflection; the first segment includes planning, the last the answer)
// and each segment's time less the engine's, divided by its steps, is one sample per step.
// scripts/bench_page.py reports them.
const stepClock = {
  engineMs: 0,
  open: null, // {at, engineMs, steps, ending}
  samples: [],
  reset() {
    this.engineMs = 0;
    this.samples = [];
    this.open = { at: performance.now(), engineMs: 0, steps: 0, ending: false };
  },
  onEvent(type) {
    if (!this.open) return;
    if (type === "reflection") this.open.ending = true;
    if (type !== "step_started") return;
    if (this.open.ending) this.close();
    this.open.steps += 1;
  },
  close() {
    const now = performance.now();
    const { at, engineMs, steps } = this.open;
    const perStep = (now - at - (this.engineMs - engineMs)) / steps;
    if (steps) this.samples.push(...Array(steps).fill(Math.round(perStep * 1000) / 1000));
    this.open = { at: now, engineMs: this.engineMs, steps: 0, ending: false };
  },
  finish() {
    this.close();
    this.open = null;
    return this.samples;
  },
};
// The engine's own time, which stepClock leaves out.
async function engineTime(work) {
  const started = performance.now();
  try {
    return await work();
  } finally {
    stepClock.engineMs += performance.now() - started;
  }
}

const engineFailed = (error) => {
  const { kind, message } = describeEngineError(error);
  return bridgeFailed(kind, message);
};

// What Python calls. Every method resolves to a JSON string and never rejects.
const bridge = {
  async engineReload(model) {
    try {
      post(toUI.progress("model", 0, `Loading ${model}…`));
      await engineTime(() => engine.reload(model));
      post(toUI.progress("model", 1, `${model} loaded`));
      return bridgeOk();
    } catch (error) {
      post(toUI.progress("model", 0, "Model load failed"));
      return engineFailed(error);
    }
  },
  async engineUnload() {
    try {
      await engineTime(() => engine.unload());
      return bridgeOk();
    } catch (error) {
      return engineFailed(error);
    }
  },
  async engineInterrupt() {
    try {
      engine.interrupt();
      return bridgeOk();
    } catch (error) {
      return engineFailed(error);
    }
  },
  async engineChat(messagesJson, callJson) {
    const call = JSON.parse(callJson);
    try {
      const onToken = (text) => postToken(call.purpose, call.step, text);
      const onNote = (text) => post(toUI.engineNote(call.purpose, call.step, text));
      const messages = JSON.parse(messagesJson);
      return bridgeOk(await engineTime(() => engine.chat(messages, call, onToken, onNote)));
    } catch (error) {
      return engineFailed(error);
    }
  },
  // The planner's fixed prompt into the engine's KV cache, before a task (agent_py's
  // Agent.prepare); engines without a cache to fill answer prefilled: false.
  async enginePrefill(messagesJson, callJson) {
    if (typeof engine.prefill !== "function") return bridgeOk({ prefilled: false });
    const call = JSON.parse(callJson);
    try {
      const onProgress = ({ done, total }) => {
        if (total) post(toUI.progress("prefill", done / total, `Preparing the model: ${done} of ${total} prompt tokens`));
      };
      const usage = await engineTime(() => engine.prefill(JSON.parse(messagesJson), call, onProgress));
      lastPrefill = usage;
      return bridgeOk({ prefilled: true, usage });
    } catch (error) {
      return engineFailed(error);
    }
  },
  runJavaScript(code, timeoutMs, outputLimit) {
    const id = nextSandboxId++;
    return new Promise((resolve) => {
      pendingSandbox.set(id, resolve);
      post(toUI.sandboxRun(id, code, timeoutMs, outputLimit));
    });
  },
  emit(eventJson) {
    flushTokens();
    pendingEvents.push(eventJson);
    if (pendingEvents.length === 1) queueMicrotask(flushEvents);
  },
};

// --- MCP servers: agent_py.mcp in Python, HTTP through http-port.js ---------------------------
// Python calls httpBridge.api as the module "agent_http" (fetch, or the extension through the
// UI thread) and reports server states through bridge.mcpStatus.
const httpBridge = createHttpBridge(post);
const userBridge = createUserBridge(post); // OAuth sign-in and forms, as "agent_user"
bridge.mcpStatus = (statusJson) => post(toUI.mcpStatus(JSON.parse(statusJson)));

async function handleMcpMessage(message) {
  if (httpBridge.onMessage(message) || userBridge.onMessage(message)) return true;
  switch (message.type) {
    case ToWorker.MCP_AUTH_RECORDS:
      page?.set_auth_records(JSON.stringify(message.records || {}));
      return true;
    case ToWorker.MCP_FORGET:
      if (page) await page.forget_sign_in(message.name);
      return true;
    case ToWorker.MCP_SERVERS:
      if (page) await page.configure_servers(JSON.stringify(message.servers || []));
      return true;
    case ToWorker.MCP_RECONNECT:
      if (page) await page.reconnect_server(message.name);
      return true;
    default:
      return false;
  }
}
// --- end of MCP servers ------------------------------------------------------------------------

// "auto": WebLLM on a usable GPU (a hardware adapter), otherwise the CPU engine, saying why.
async function createEngine(choice, settings, gpu) {
  if (choice === "scripted") {
    const { ScriptedEngine } = await import("./engines/scripted.js");
    const scripted = new ScriptedEngine({ contextWindow: settings.context_window });
    return { engine: scripted, gpu, info: { name: "scripted", label: scripted.label, usable: true, reason: gpu.reason } };
  }
  if (chooseEngine(choice, gpu) === "cpu") {
    return createCpuEngine(gpu, settings, choice === "auto");
  }
  return createWebLLMEngine(gpu, settings);
}

async function createCpuEngine(gpu, settings, chosenForLackOfGpu) {
  const { CpuEngine, cpuEngineInfo } = await import("./engines/cpu.js");
  const cpuInfo = cpuEngineInfo();
  const cpu = new CpuEngine({
    contextWindow: settings.context_window,
    threads: settings.cpu_threads || undefined, // 0: the engine's choice
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
    },
  };
}

async function createWebLLMEngine(gpu, settings) {
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

// Python's part of the boot, each import timed: the last expression is the phases as JSON.
// agent_py.page.session imports the MCP package only once a server is configured, and jsonschema
// at the first tool call (warmed up after "ready", below).
const PYTHON_BOOT = `
import json, time
_phases = {}
_last = time.perf_counter()
def _phase(name):
    global _last
    now = time.perf_counter()
    _phases[name] = round((now - _last) * 1000)
    _last = now
import pydantic_core; _phase("import_pydantic_core")
import pydantic; _phase("import_pydantic")
import pyodide_http
pyodide_http.patch_all()  # urllib-based code can reach the network through fetch
import agent_bridge, agent_http, agent_user
import agent_py.page.session; _phase("import_agent_py")
page = agent_py.page.session.PageSession(agent_bridge, http=agent_http, user=agent_user)
_phase("page_session")
json.dumps(_phases)
`;

// A Python exception's own words, without the traceback Pyodide puts before them.
function pythonMessage(error) {
  const last = String(error?.message || error).trim().split("\n").pop();
  return last.replace(/^[\w.]+: /, "");
}

// Settings go to Python as the user's, with the engine's kind (which chooses the model
// profile); what comes back is every setting in effect, the defaults and the profile.
async function configure(settings) {
  userSettings = settings;
  const info = JSON.parse(await page.configure(JSON.stringify({ ...userSettings, engine_kind: engineInfo?.name || "" })));
  settingsNow = info.values;
  return info;
}

async function boot({ settings, engine: override }) {
  settings ??= {};
  const t0 = performance.now();
  const phases = {}; // ms per phase, sent with "ready"; scripts/bench_page.py prints them
  let last = t0;
  const phase = (name) => {
    const now = performance.now();
    phases[name] = Math.round(now - last);
    last = now;
  };
  post(toUI.progress("pyodide", 0.05, "Starting Python…"));
  const gpuFound = detectWebGPU(); // while Python starts
  const started = await startPython(PYODIDE_URL);
  pyodide = started.pyodide;
  Object.assign(phases, started.phases);
  last = performance.now();
  post(toUI.progress("packages", 1, "Python and packages loaded"));

  pyodide.registerJsModule("agent_bridge", bridge);
  pyodide.registerJsModule("agent_http", httpBridge.api);
  pyodide.registerJsModule("agent_user", userBridge.api);
  Object.assign(phases, JSON.parse(await pyodide.runPythonAsync(PYTHON_BOOT)));
  // Between tasks, so every later one runs on it: ready callbacks run together, not each in
  // a browser task of its own (agent_py/page/loop.py).
  loopDrains = pyodide.runPython("import agent_py.page.loop as l; l.install(); l.drains");
  last = performance.now();
  page = pyodide.globals.get("page");
  try {
    await configure(settings); // the settings' defaults are Python's
  } catch (error) {
    post(toUI.error(`The saved settings cannot be used, so the defaults apply: ${pythonMessage(error)}`));
    settings = {};
    await configure(settings);
  }
  const gpu = await gpuFound;
  const created = await createEngine(override || settingsNow.engine, settingsNow, gpu);
  phase("engine");
  engine = created.engine;
  // The window the engine was made with (read once, at start: a change restarts the worker).
  engineInfo = { ...created.info, context_window: engine.options?.contextWindow ?? null };
  const info = await configure(settings); // again, for the engine's kind
  phase("configure");
  const timings = { agent_ready_ms: Math.round(performance.now() - t0), phases };
  post(toUI.ready({ engine: engineInfo, gpu, timings, settings: info }));

  // What the first task would do on its way (jsonschema, the tools' validators, the prompt
  // templates) is done now, while the user types (a run sent meanwhile waits for it).
  const warming = performance.now();
  page.warm_up();
  post(toUI.warmed(Math.round(performance.now() - warming)));
  prepareModel(); // not awaited: a run sent meanwhile waits for the engine (Python's lock)
}

let lastPrefill = null; // the usage of the engine's last prefill

// Load the model and prefill the planner's fixed prompt while the user types, so the first
// task computes only its own words. WebLLM only when its weights are cached already: a first
// download of gigabytes waits for the user's Run. A failure here is only reported: the run
// meets it again and says it in its own events.
async function prepareModel() {
  if (!engineInfo.usable) return;
  if (engineInfo.name === "webllm" && !(await webllmModelCached())) {
    post(toUI.prepared({ prefilled: false, skipped: "the model's weights are not in this browser yet: they load at the first run" }));
    return;
  }
  const started = performance.now();
  post(toUI.progress("prefill", 0, "Preparing the model…"));
  try {
    lastPrefill = null;
    const done = JSON.parse(await page.prepare());
    // The CPU engine keeps the prefilled state in the browser's storage: whether it came from
    // there, and why a saved one was not used.
    const state = lastPrefill ? { restored_tokens: lastPrefill.restored_tokens || 0, state: lastPrefill.state } : {};
    if (lastPrefill?.state_warning) state.warning = lastPrefill.state_warning;
    post(toUI.prepared({ ...done, ...state, ms: Math.round(performance.now() - started) }));
  } catch (error) {
    post(toUI.prepared({ prefilled: false, error: pythonMessage(error), ms: Math.round(performance.now() - started) }));
  }
}

async function webllmModelCached() {
  const { cachedModels } = await import("./engines/webllm.js");
  try {
    return (await cachedModels(await webllmConfig())).includes(settingsNow.model);
  } catch {
    return false;
  }
}

async function run({ question }) {
  if (running) {
    post(toUI.error("A task is already running."));
    return;
  }
  if (!engineInfo.usable) {
    post(toUI.error(engineInfo.reason || "No model engine can run in this browser."));
    post(toUI.runFinished(null, engine.counts));
    return;
  }
  running = true;
  const drainsBefore = loopDrains();
  stepClock.reset();
  try {
    const resultJson = await page.run(question);
    const overhead = { step_ms: stepClock.finish(), drains: drainsBefore === undefined ? null : loopDrains() - drainsBefore };
    post(toUI.runFinished(JSON.parse(resultJson), engine.counts, overhead));
  } catch (error) {
    post(toUI.error(`The agent failed: ${error.message || error}`));
    post(toUI.runFinished(null, engine.counts));
  } finally {
    running = false;
  }
}

// WebLLM's app config for the settings: a self-hosted model is looked up in it, not in the
// prebuilt list (WebLLM's cache functions default to that).
async function webllmConfig() {
  const { appConfigFor } = await import("./engines/webllm.js");
  try {
    return appConfigFor(settingsNow.model, { modelUrl: settingsNow.model_url, modelLibUrl: settingsNow.model_lib_url });
  } catch {
    return appConfigFor(settingsNow.model); // no library URL for it: the prebuilt records only
  }
}

async function sendModels() {
  if (!settingsNow) {
    post(toUI.error("The agent is still starting: check the cached models once it is ready."));
    return;
  }
  const { PREBUILT_MODELS, cachedModels } = await import("./engines/webllm.js");
  post(toUI.models(PREBUILT_MODELS, await cachedModels(await webllmConfig())));
}

async function handle(message) {
  if (await handleMcpMessage(message)) return;
  switch (message.type) {
    case ToWorker.BOOT:
      return boot(message);
    case ToWorker.CONFIGURE:
      try {
        post(toUI.settings(await configure(message.settings)));
      } catch (error) {
        post(toUI.error(`The settings were not changed: ${pythonMessage(error)}`));
        return;
      }
      // A new profile or budget may change the planner's prompt: prefill it again (llama.cpp
      // keeps what is unchanged of the cache, so an unchanged prompt costs nothing).
      if (!running) prepareModel();
      return;
    case ToWorker.RUN:
      return run(message);
    case ToWorker.STOP:
      page?.cancel();
      engine?.interrupt();
      return;
    case ToWorker.SCRIPT:
      if (engineInfo?.name !== "scripted") throw new Error("Scripts are for the scripted test engine only.");
      engine.setScript(message.replies);
      return;
    case ToWorker.SANDBOX_RESULT: {
      const resolve = pendingSandbox.get(message.id);
      pendingSandbox.delete(message.id);
      resolve?.(JSON.stringify(message.result));
      return;
    }
    case ToWorker.ENGINE_COUNTS:
      post(toUI.engineCounts(engine ? { ...engine.counts } : null));
      return;
    case ToWorker.MODELS:
      return sendModels();
    case ToWorker.DELETE_MODEL: {
      const { deleteCachedModel } = await import("./engines/webllm.js");
      await deleteCachedModel(message.id, await webllmConfig());
      return sendModels();
    }
    default:
      throw new Error(`unknown message ${message.type}`);
  }
}

self.onmessage = (event) => {
  handle(event.data).catch((error) => post(toUI.error(String(error?.message || error))));
};
