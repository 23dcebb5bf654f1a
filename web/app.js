// The UI thread: renders events and relays messages. It holds no agent logic: the agent and
// the engine live in worker.js, JavaScript runs in the sandbox (sandbox-host.js), history is
// kept in IndexedDB (sessions.js) before anything is shown.
import { RunView } from "./render.js";
import { SessionStore, downloadJsonl } from "./sessions.js";
import { JavaScriptSandbox } from "./sandbox-host.js";
import { ExtensionRelay } from "./extension-relay.js";
import { ServersPanel } from "./servers.js";
import { UserPrompts, loadAuthRecords } from "./user-prompts.js";

const DEFAULT_SETTINGS = {
  model: "Qwen3-4B-q4f16_1-MLC",
  residency: "auto",
  thinking: false,
  context_window: 4096,
  model_url: "",
  model_lib_url: "",
  engine: "auto",
  cpu_model_url: "",
  cpu_threads: 0,
};
// Settings read when the worker starts: changing them restarts the agent worker.
const ENGINE_SETTINGS = ["engine", "cpu_model_url", "cpu_threads", "model_url", "model_lib_url"];
const SETTINGS_KEY = "agent_py.settings";
const STOP_GRACE_MS = 10_000; // a Stop the worker has not honoured by then restarts it

const $ = (id) => document.getElementById(id);
const view = new RunView($("run-view"));
const params = new URLSearchParams(location.search);
// ?engine= overrides the Engine setting for this visit; "scripted" is the explicit test switch,
// and nothing else ever selects the scripted engine.
const ENGINES = ["auto", "webllm", "cpu", "scripted"];
const engineOverride = ENGINES.includes(params.get("engine")) ? params.get("engine") : null;

let worker = null;
let sandbox = null;
let store = null;
let ready = false;
let running = false;
let stopTimer = null;
let storeFailed = false;
let eventQueue = Promise.resolve();
// Settled when the first worker has booted (or failed to): the offline copy waits for it.
let firstBootSettled;
const firstBoot = new Promise((resolve) => { firstBootSettled = resolve; });
const waiters = new Map(); // message type -> resolve, for the test hooks below

function loadSettings() {
  try {
    return { ...DEFAULT_SETTINGS, ...JSON.parse(localStorage.getItem(SETTINGS_KEY) || "{}") };
  } catch {
    return { ...DEFAULT_SETTINGS };
  }
}

let settings = loadSettings();

function setStatus(text) {
  $("status").textContent = text;
  document.body.dataset.status = text.toLowerCase().split(/[^a-z]/)[0];
}

function showError(message) {
  $("error").textContent = message;
}

function setRunning(value) {
  running = value;
  $("run").disabled = !ready || running;
  $("stop").disabled = !running;
}

// --- events: stored first, then drawn ----------------------------------------------------------
function onAgentEvent(event) {
  eventQueue = eventQueue.then(async () => {
    if (store && !storeFailed) {
      try {
        await store.append(event);
      } catch (error) {
        storeFailed = true;
        showError(`Session history is not being saved: ${error.message || error}`);
      }
    }
    view.apply(event);
    // Automation hook: `python -m agent_py run` exposes this function to follow the run.
    if (typeof window.__agent_py_event === "function") window.__agent_py_event(event);
    if (event.type === "final") {
      const state = event.meta.state;
      setStatus(state === "completed" ? "Completed" : state === "cancelled" ? "Stopped by the user" : `Failed: ${event.content}`);
      refreshSessions();
    }
  });
}

// --- MCP servers and the bridge extension --------------------------------------------------------
// The panel edits the list and the worker connects it; the relay carries the worker's bridge
// requests to the extension and the answers back (message formats: worker.js, http-bridge.js).
const relay = new ExtensionRelay();
const serversPanel = new ServersPanel({
  onChange: (servers) => {
    if (ready) worker.postMessage({ type: "mcp-servers", servers });
  },
  onReconnect: async (name) => {
    await relay.detect({ again: true }); // the extension may have been set up meanwhile
    if (ready) worker.postMessage({ type: "mcp-reconnect", name });
  },
  onForget: (name) => {
    if (ready) worker.postMessage({ type: "mcp-forget", name });
  },
});
// OAuth sign-in popups and elicitation forms for the MCP client (user-prompts.js).
const userPrompts = new UserPrompts({ send: (message) => worker.postMessage(message), panel: serversPanel });
relay.onPresence((presence) => serversPanel.setPresence(presence));
relay.detect();

function relayBridgeRequest({ id, request }) {
  const target = worker; // a restarted worker must not get the old one's answers
  const send = (message) => target.postMessage({ id, ...message });
  relay.start(id, request, {
    head: (status, headers) => send({ type: "bridge-head", status, headers }),
    chunk: (chunk) => send({ type: "bridge-chunk", chunk }),
    end: () => send({ type: "bridge-end" }),
    error: (error) => send({ type: "bridge-error", error }),
  });
}

// --- the worker ----------------------------------------------------------------------------------
function startWorker() {
  relay.abortAll(); // requests of a worker that is being replaced
  worker = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
  worker.onmessage = (message) => onWorkerMessage(message.data);
  worker.onerror = (event) => {
    firstBootSettled();
    setStatus("Failed to start");
    showError(`The agent worker failed: ${event.message || "unknown error"}`);
  };
  worker.postMessage({ type: "boot", settings, engine: engineOverride || settings.engine });
}

function onWorkerMessage(message) {
  const waiter = waiters.get(message.type);
  if (waiter) {
    waiters.delete(message.type);
    waiter(message);
  }
  switch (message.type) {
    case "progress":
      return showProgress(message);
    case "ready":
      return onReady(message);
    case "warmed":
      window.agentApp.timings.warm_after_ready_ms = message.ms;
      return;
    case "event":
      return onAgentEvent(message.event);
    case "token":
      $("live").textContent += message.text;
      return;
    case "engine-note":
      $("live").textContent += `\n[${message.text}]\n`;
      return;
    case "sandbox-run":
      return runInSandbox(message);
    case "run-finished":
      clearTimeout(stopTimer);
      // After every queued event is stored and drawn, so a watcher of lastResult sees them all.
      eventQueue.then(() => {
        window.agentApp.lastCounts = message.counts;
        window.agentApp.lastStepOverheadMs = message.step_overhead_ms;
        window.agentApp.lastResult = message.result;
        setRunning(false);
      });
      return;
    case "models":
      return showCachedModels(message.cached);
    case "mcp-status":
      return serversPanel.setStatus(message.status);
    case "mcp-authorize":
    case "mcp-auth-save":
    case "mcp-elicit":
      return userPrompts.onWorkerMessage(message);
    case "bridge-request":
      return relayBridgeRequest(message);
    case "bridge-abort":
      return relay.abort(message.id);
    case "error":
      showError(message.message);
      if (!ready) {
        setStatus("Failed to start");
        firstBootSettled();
      }
      return;
    default:
      return;
  }
}

function showProgress({ what, progress, text }) {
  if (what === "model") {
    $("model-progress-row").hidden = false;
    $("progress-model").value = progress;
    $("progress-model-text").textContent = text;
    return;
  }
  // Python start and package loading share one bar: half each.
  $("progress-python").value = what === "pyodide" ? progress / 2 : 0.5 + progress / 2;
  $("progress-python-text").textContent = text;
  if (!ready) setStatus(what === "pyodide" ? "Loading Python…" : "Loading packages…");
}

function onReady({ engine, timings }) {
  ready = true;
  firstBootSettled();
  window.agentApp.timings = timings;
  window.agentApp.engine = engine;
  $("progress-python").value = 1;
  $("progress-python-text").textContent = `agent ready in ${(timings.agent_ready_ms / 1000).toFixed(1)} s`;
  if (engine.name === "scripted") {
    $("test-banner").hidden = false;
    $("test-banner").textContent = `TEST MODE: ${engine.label}`;
  }
  if (engine.reason) {
    $("engine-notice").hidden = false;
    $("engine-notice").textContent = engine.reason;
  }
  setStatus(engine.usable ? "Ready" : "Ready, but no model can run here");
  setRunning(false);
  worker.postMessage({ type: "mcp-auth-records", records: loadAuthRecords() });
  worker.postMessage({ type: "mcp-servers", servers: serversPanel.servers() });
}

async function runInSandbox({ id, code, timeoutMs, outputLimit }) {
  let result;
  try {
    result = await sandbox.run(code, { timeoutMs, outputLimit });
  } catch (error) {
    result = { value: null, console: [], error: `The sandbox failed: ${error.message || error}`, timedOut: false, truncated: false };
  }
  worker.postMessage({ type: "sandbox-result", id, result });
}

// --- run and stop --------------------------------------------------------------------------------
function run(question) {
  if (!question.trim() || running) return;
  showError("");
  $("live").textContent = "";
  setStatus("Running…");
  setRunning(true);
  worker.postMessage({ type: "run", question });
}

function stop() {
  if (!running) return;
  setStatus("Stopping…");
  worker.postMessage({ type: "stop" });
  clearTimeout(stopTimer);
  stopTimer = setTimeout(() => {
    // The worker did not finish the run in time (a stuck engine): restart it rather than hang.
    worker.terminate();
    ready = false;
    setRunning(false);
    setStatus("Stopped (the agent was restarted)");
    showError("The agent did not stop in time, so it was restarted.");
    startWorker();
  }, STOP_GRACE_MS);
}

// --- sessions ------------------------------------------------------------------------------------
async function refreshSessions() {
  if (!store) return;
  const list = $("sessions");
  let sessions;
  try {
    sessions = await store.sessions();
  } catch (error) {
    list.replaceChildren(Object.assign(document.createElement("li"), { textContent: String(error.message || error) }));
    return;
  }
  list.replaceChildren(
    ...sessions.map((session) => {
      const li = document.createElement("li");
      const title = Object.assign(document.createElement("span"), {
        className: "title",
        textContent: `${session.title || "(untitled)"} — ${session.lastState}, ${session.events} events`,
      });
      const open = Object.assign(document.createElement("button"), { type: "button", textContent: "Open" });
      open.setAttribute("aria-label", `Open session ${session.title || session.session}`);
      open.onclick = () => openSession(session.session);
      const exportButton = Object.assign(document.createElement("button"), { type: "button", textContent: "Export JSONL" });
      exportButton.setAttribute("aria-label", `Export session ${session.title || session.session} as JSONL`);
      exportButton.onclick = async () => downloadJsonl(`agent_py-${session.session}.jsonl`, await store.exportJsonl(session.session));
      li.append(title, open, exportButton);
      return li;
    }),
  );
}

async function openSession(session) {
  const events = await store.events(session);
  view.clear();
  for (const event of events) view.apply(event);
  view.markInterrupted();
}

// --- settings ------------------------------------------------------------------------------------
function fillSettingsForm() {
  const models = [...new Set([settings.model, DEFAULT_SETTINGS.model, ...(window.agentApp.prebuilt || [])])];
  $("setting-model").replaceChildren(...models.map((id) => new Option(id, id, false, id === settings.model)));
  $("setting-residency").value = settings.residency;
  $("setting-thinking").checked = settings.thinking;
  $("setting-context").value = settings.context_window;
  $("setting-model-url").value = settings.model_url;
  $("setting-model-lib-url").value = settings.model_lib_url;
  $("setting-engine").value = settings.engine;
  $("setting-cpu-model-url").value = settings.cpu_model_url;
  $("setting-cpu-threads").value = settings.cpu_threads;
}

function saveSettings(event) {
  event.preventDefault();
  const before = settings;
  settings = {
    ...settings,
    model: $("setting-model").value,
    residency: $("setting-residency").value,
    thinking: $("setting-thinking").checked,
    context_window: Number($("setting-context").value) || DEFAULT_SETTINGS.context_window,
    model_url: $("setting-model-url").value.trim(),
    model_lib_url: $("setting-model-lib-url").value.trim(),
    engine: $("setting-engine").value,
    cpu_model_url: $("setting-cpu-model-url").value.trim(),
    cpu_threads: Number($("setting-cpu-threads").value) || 0,
  };
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(settings));
  const restart = ENGINE_SETTINGS.some((key) => before[key] !== settings[key]);
  if (restart && !running) {
    $("settings-saved").textContent = "Saved. Restarting the agent with the new engine settings…";
    worker.terminate();
    ready = false;
    setRunning(false);
    startWorker();
    return;
  }
  $("settings-saved").textContent = restart
    ? "Saved. Engine changes apply when this run ends and the page is reloaded."
    : "Saved. Model changes apply from the next run.";
  if (ready) worker.postMessage({ type: "configure", settings });
}

function showCachedModels(cached) {
  const list = $("cached-models");
  if (!cached.length) {
    list.replaceChildren(Object.assign(document.createElement("li"), { className: "muted", textContent: "No model is cached." }));
    return;
  }
  list.replaceChildren(
    ...cached.map((id) => {
      const li = document.createElement("li");
      const remove = Object.assign(document.createElement("button"), { type: "button", textContent: "Delete" });
      remove.setAttribute("aria-label", `Delete cached model ${id}`);
      remove.onclick = () => worker.postMessage({ type: "delete-model", id });
      li.append(`${id} `, remove);
      return li;
    }),
  );
}

// --- hooks for tests and scripts -----------------------------------------------------------------
function request(type, message = {}) {
  return new Promise((resolve) => {
    waiters.set(type, resolve);
    worker.postMessage({ type, ...message });
  });
}

window.agentApp = {
  settings: () => ({ ...settings }),
  /** Replies for the scripted test engine (only with ?engine=scripted). */
  setScript: (replies) => worker.postMessage({ type: "script", replies }),
  engineCounts: async () => (await request("engine-counts")).counts,
  /** The MCP servers list (as saved) and a way to replace it, like editing the panel. */
  mcpServers: () => serversPanel.servers(),
  setMcpServers: (servers) => serversPanel.setServers(servers),
  bridgePresence: () => relay.presence,
  run,
  stop,
};

// --- start ---------------------------------------------------------------------------------------
async function main() {
  $("task-form").addEventListener("submit", (event) => {
    event.preventDefault();
    run($("task").value);
  });
  $("stop").addEventListener("click", stop);
  $("settings-form").addEventListener("submit", saveSettings);
  $("refresh-models").addEventListener("click", () => worker.postMessage({ type: "models" }));
  fillSettingsForm();

  startWorker();
  // The sandbox frame is made once the agent has booted, before any run can ask for it: made
  // at load, its document and scripts took the main thread for up to ~80 ms during the boot.
  firstBoot.then(() => { sandbox = new JavaScriptSandbox(); });

  try {
    store = await SessionStore.open();
    const sessions = await store.sessions();
    const last = sessions[0];
    if (last && (last.lastState === "running" || last.lastState === "interrupted")) {
      await openSession(last.session);
      $("session-notice").hidden = false;
      $("session-notice").textContent = "The last session was interrupted by a page reload; everything shown before is kept below.";
    }
    await refreshSessions();
  } catch (error) {
    showError(String(error.message || error)); // sessions.js says "Session history is unavailable: …"
  }

  // Offline use needs the service worker; the page works without it while online, so a
  // failure here is reported but never blocks the agent. It is registered once the agent has
  // booted: a first visit's precaching (tens of MB, each file hashed) would otherwise take
  // the CPU from the boot.
  firstBoot
    .then(() => import("./sw-register.js"))
    .then(({ registerServiceWorker }) => registerServiceWorker())
    .then(() => { document.body.dataset.offline = "ready"; })
    .catch((error) => console.warn("service worker not registered:", error));
}

main();
