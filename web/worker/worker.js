// The agent worker: Pyodide, agent_py and the model engine live here, off the UI thread.
// The messages it takes and sends are in protocol.js (ToWorker, ToUI); Python's side of the
// bridge below is typed in agent_py/page/ports.py.
import { ToWorker, toUI } from "../protocol.js";
import { createEnginePort } from "./engine-port.js";
import { describeEngineError } from "./engines/errors.js";
import { chooseEngine, detectWebGPU, f32Variant, needsShaderF16 } from "./engines/gpu.js";
import { createHttpPort } from "./http-port.js";
import { createOutbox } from "./outbox.js";
import { startPython } from "./python-boot.js";
import { createStepClock } from "./step-clock.js";
import { createUserPort } from "./user-port.js";

const PYODIDE_URL = new URL("../vendor/pyodide/", import.meta.url).href;

let pyodide = null;
let page = null; // agent_py.page.session.PageSession (a PyProxy, kept for the worker's lifetime)
let loopDrains = null; // agent_py.page.loop.drains: runs of the event loop's ready queue
let engine = null;
let engineInfo = null;
let userSettings = {}; // what the user changed, as the UI last sent it (boot or configure)
let settingsNow = null; // every setting in effect (PageSettings, from Python)
let running = false;
let lastPrefill = null; // the usage of the engine's last prefill
const pendingSandbox = new Map();
let nextSandboxId = 1;

const outbox = createOutbox(
  (message) => self.postMessage(message),
  (events) => {
    for (const event of events) stepClock.onEvent(event.type);
  },
);
const post = outbox.post;
const stepClock = createStepClock();

// What Python calls (agent_py/page/ports.py, Bridge). Every method resolves to a JSON string
// and never rejects.
const bridge = {
  ...createEnginePort(() => engine, outbox, stepClock, (usage) => {
    lastPrefill = usage;
  }),
  runJavaScript(code, timeoutMs, outputLimit) {
    const id = nextSandboxId++;
    return new Promise((resolve) => {
      pendingSandbox.set(id, resolve);
      post(toUI.sandboxRun(id, code, timeoutMs, outputLimit));
    });
  },
  runPython(program, timeoutMs) {
    const id = nextSandboxId++;
    return new Promise((resolve) => {
      pendingSandbox.set(id, resolve);
      post(toUI.pythonRun(id, program, timeoutMs));
    });
  },
  endPython() {
    post(toUI.pythonReset());
  },
  emit(eventJson) {
    outbox.event(eventJson);
  },
  // An engine that runs in Python (a model server, agent_py/engines/model_server.py) streams here.
  engineToken(purpose, step, text) {
    outbox.token(purpose, step ?? null, text);
  },
  engineNote(text) {
    post(toUI.engineNote(null, null, text));
  },
  engineWait(what) {
    post(toUI.waiting(what ?? null)); // Python's None arrives as undefined
  },
};

// --- MCP servers: agent_py.mcp in Python, HTTP through http-port.js ---------------------------
// Python calls httpPort.api as the module "agent_http" (fetch, or the extension through the
// UI thread) and reports server states through bridge.mcpStatus.
const httpPort = createHttpPort(post);
const userPort = createUserPort(post); // OAuth sign-in and forms, as "agent_user"
bridge.mcpStatus = (statusJson) => post(toUI.mcpStatus(JSON.parse(statusJson)));

async function handleMcpMessage(message) {
  if (httpPort.onMessage(message) || userPort.onMessage(message)) return true;
  switch (message.type) {
    case ToWorker.MCP_AUTH_RECORDS:
      page?.set_auth_records(JSON.stringify(message.records || {}));
      return true;
    case ToWorker.MCP_FORGET:
      if (page) await preparedAfter(() => page.forget_sign_in(message.name));
      return true;
    case ToWorker.MCP_SERVERS:
      try {
        if (page) await preparedAfter(() => page.configure_servers(JSON.stringify(message.servers || [])));
      } finally {
        serversListed();
      }
      return true;
    case ToWorker.MCP_RECONNECT:
      if (page) await preparedAfter(() => page.reconnect_server(message.name));
      return true;
    default:
      return false;
  }
}

// The planner's prompt lists the tools: when a server's tools came or went (a server added,
// removed, reconnected or signed out), prefill it again while the user types, so the next task
// does not compute it (llama.cpp keeps the unchanged start of the cache). Before the boot's
// own preparation has begun, that one comes after.
async function preparedAfter(change) {
  const before = page.mcp_tools_key();
  await change();
  if (bootPrepared && !running && page.mcp_tools_key() !== before) prepareModel();
}

// The UI sends its servers' list right after ready. The boot's preparation waits for that list
// to connect, for a bounded while, so a page with saved servers prefills the planner's prompt
// once, with their tools: not once without them, and again from the tool list on. A server
// slower than that joins the prompt later, through preparedAfter.
const SERVERS_WAIT_MS = 3000;
let serversListed;
const firstServerList = new Promise((resolve) => (serversListed = resolve));
let bootPrepared = false;
// --- end of MCP servers ------------------------------------------------------------------------

// "auto": WebLLM on a usable GPU (a hardware adapter), otherwise the CPU engine, saying why.
async function createEngine(choice, settings, gpu) {
  if (choice === "scripted") {
    const { ScriptedEngine } = await import("./engines/scripted.js");
    const scripted = new ScriptedEngine({ contextWindow: settings.context_window });
    return { engine: scripted, gpu, info: { name: "scripted", label: scripted.label, usable: true, reason: gpu.reason } };
  }
  if (choice === "openai") return modelServerEngine(gpu, settings);
  if (chooseEngine(choice, gpu) === "cpu") {
    return createCpuEngine(gpu, settings, choice === "auto");
  }
  return createWebLLMEngine(gpu, settings);
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
  const early = startEngineEarly(settings, override, gpuFound, () => Math.round(performance.now() - t0));
  const started = await startPython(PYODIDE_URL);
  pyodide = started.pyodide;
  Object.assign(phases, started.phases);
  phases.python_started_at = Math.round(performance.now() - t0);
  last = performance.now();
  post(toUI.progress("packages", 1, "Python and packages loaded"));

  pyodide.registerJsModule("agent_bridge", bridge);
  pyodide.registerJsModule("agent_http", httpPort.api);
  pyodide.registerJsModule("agent_user", userPort.api);
  Object.assign(phases, JSON.parse(await pyodide.runPythonAsync(PYTHON_BOOT)));
  // Between tasks, so every later one runs on it: ready callbacks run together, not each in
  // a browser task of its own (agent_py/page/loop.py).
  loopDrains = pyodide.runPython("import agent_py.page.loop as l; l.install(); l.drains");
  last = performance.now();
  page = pyodide.globals.get("page");
  // The engine to create comes from the settings in effect (their defaults are Python's); the
  // session is configured once, below, when the engine's kind is known.
  try {
    settingsNow = JSON.parse(page.resolve_settings(JSON.stringify(settings))).values;
  } catch (error) {
    post(toUI.error(`The saved settings cannot be used, so the defaults apply: ${pythonMessage(error)}`));
    settings = {};
    settingsNow = JSON.parse(page.resolve_settings("{}")).values;
  }
  const gpu = await gpuFound;
  const choice = override || settingsNow.engine;
  const earlyEngine = await early;
  let created;
  let engineEarly = null; // "used", or "dropped" when Python's settings differ from the last boot's
  if (earlyEngine && earlyEngine.choice === choice && sameEngineSettings(earlyEngine.settings, settingsNow)) {
    created = earlyEngine.created;
    engineEarly = "used";
    phases.engine_early_at = earlyEngine.at_ms; // its model load began then
  } else {
    if (earlyEngine) {
      engineEarly = "dropped";
      earlyEngine.created.engine.exit();
    }
    created = await createEngine(choice, settingsNow, gpu);
  }
  rememberEngine(settings, override, choice, settingsNow); // not awaited: for the next boot
  phase("engine");
  engine = created.engine;
  // The window the engine was made with (read once, at start: a change restarts the worker).
  engineInfo = { ...created.info, context_window: engine?.options?.contextWindow ?? null };
  const info = await configure(settings); // once, with the engine's kind (it picks the profile)
  phase("configure");
  const timings = { agent_ready_ms: Math.round(performance.now() - t0), phases, engine_early: engineEarly };
  post(toUI.ready({ engine: engineInfo, gpu, timings, settings: info }));

  // What the first task would do on its way (jsonschema, the tools' validators, the prompt
  // templates) is done now, while the user types (a run sent meanwhile waits for it).
  const warming = performance.now();
  page.warm_up();
  post(toUI.warmed(Math.round(performance.now() - warming)));
  await Promise.race([firstServerList, new Promise((resolve) => setTimeout(resolve, SERVERS_WAIT_MS))]);
  bootPrepared = true;
  // Not awaited: a run sent from now on waits for the engine (Python's lock). A run sent
  // during the wait has prefilled the same prompt for its plan: nothing is left to prepare.
  if (!running) prepareModel();
}


// --- the engine started while Python starts --------------------------------------------------
// The CPU engine's settings are Python's (defaults included), known only once Python runs, a
// second or two after the boot begins. What the last boot resolved from the same user settings
// is kept in Cache Storage, so the next boot starts that engine and loads its model meanwhile;
// once Python's settings are known, an engine made with others is dropped.
const BOOT_CACHE = "agent-py-boot-v1"; // not "agent_py-": the service worker clears its old caches by that prefix
const LAST_ENGINE = new URL("./last-engine.json", import.meta.url).href;
const ENGINE_SETTINGS = ["engine", "cpu_model", "cpu_threads", "cpu_seed", "cpu_temperature", "context_window"];

// The user's settings as a digest: they may hold a model server's API key, kept only where the
// UI keeps it.
async function bootKey(settings, override) {
  const text = new TextEncoder().encode(JSON.stringify({ settings, override: override || null }));
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", text));
  return Array.from(digest, (byte) => byte.toString(16).padStart(2, "0")).join("");
}
const engineSettings = (settings) => Object.fromEntries(ENGINE_SETTINGS.map((name) => [name, settings[name] ?? null]));
const sameEngineSettings = (a, b) => JSON.stringify(engineSettings(a)) === JSON.stringify(engineSettings(b));

/** The CPU engine of the last boot with these user settings, its model loading; else null. */
async function startEngineEarly(settings, override, gpuFound, sinceBoot) {
  try {
    if (typeof caches === "undefined") return null;
    const stored = await (await caches.open(BOOT_CACHE)).match(LAST_ENGINE);
    const record = stored ? await stored.json() : null;
    if (!record || record.key !== (await bootKey(settings, override))) return null;
    const gpu = await gpuFound;
    if (chooseEngine(record.choice, gpu) !== "cpu") return null; // WebLLM checks its cache first
    const created = await createCpuEngine(gpu, record.settings, record.choice === "auto");
    if (!created.info.usable) return null;
    created.engine.preload(record.settings.cpu_model);
    return { choice: record.choice, settings: record.settings, created, at_ms: sinceBoot() };
  } catch (error) {
    console.warn(`[agent_py] the engine could not start early: ${error.message || error}`);
    return null;
  }
}

async function rememberEngine(settings, override, choice, settingsNow) {
  if (typeof caches === "undefined") return;
  try {
    const record = { key: await bootKey(settings, override), choice, settings: engineSettings(settingsNow) };
    const cache = await caches.open(BOOT_CACHE);
    await cache.put(LAST_ENGINE, new Response(JSON.stringify(record), { headers: { "content-type": "application/json" } }));
  } catch (error) {
    console.warn(`[agent_py] the engine's settings could not be kept: ${error.message || error}`);
  }
}

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
    if (done.stopped) {
      post(toUI.prepared({ prefilled: false, skipped: "the preparation was stopped; the first run prepares it", ms: Math.round(performance.now() - started) }));
      return;
    }
    // The CPU engine keeps the prefilled state in the browser's storage: whether it came from
    // there, and why a saved one was not used.
    const state = lastPrefill ? { restored_tokens: lastPrefill.restored_tokens || 0, state: lastPrefill.state } : {};
    if (lastPrefill?.state_warning) state.warning = lastPrefill.state_warning;
    post(toUI.prepared({ ...done, ...state, ...serverModels(), ms: Math.round(performance.now() - started) }));
  } catch (error) {
    post(toUI.prepared({ prefilled: false, error: pythonMessage(error), ...serverModels(), ms: Math.round(performance.now() - started) }));
  }
}

// A model server's models (what its /v1/models listed), for the Settings' model field.
function serverModels() {
  return engineInfo.name === "openai" ? { server_models: JSON.parse(page.server_models()) } : {};
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
    post(toUI.runFinished(null, engine?.counts ?? null));
    return;
  }
  running = true;
  const drainsBefore = loopDrains();
  stepClock.reset();
  try {
    const resultJson = await page.run(question);
    const overhead = { step_ms: stepClock.finish(), drains: drainsBefore === undefined ? null : loopDrains() - drainsBefore };
    post(toUI.runFinished(JSON.parse(resultJson), engine?.counts ?? null, overhead));
  } catch (error) {
    post(toUI.error(`The agent failed: ${error.message || error}`));
    post(toUI.runFinished(null, engine?.counts ?? null));
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
      if (bootPrepared && !running) prepareModel();
      return;
    case ToWorker.RUN:
      return run(message);
    case ToWorker.SESSION:
      if (!page) throw new Error("The agent is still starting: no session can be chosen yet.");
      if (running) throw new Error("The session cannot change while a task runs.");
      page.use_session(JSON.stringify(message.events));
      return;
    case ToWorker.STOP:
      page?.cancel();
      engine?.interrupt();
      return;
    case ToWorker.SCRIPT:
      if (engineInfo?.name !== "scripted") throw new Error("Scripts are for the scripted test engine only.");
      engine.setScript(message.replies);
      return;
    case ToWorker.SANDBOX_RESULT:
    case ToWorker.PYTHON_RESULT: {
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
