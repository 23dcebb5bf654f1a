// The UI thread: renders events and relays messages. It holds no agent logic: the agent and
// the engine live in worker.js, JavaScript runs in the sandbox (sandbox-host.js), history is
// kept in IndexedDB (sessions.js) before anything is shown.
import { RunView } from "./render.js";
import { PlanReview } from "./plan-review.js";
import { SessionStore, downloadJsonl } from "./sessions.js";
import { ServersPanel } from "./servers.js";
import { UserPrompts, loadAuthRecords } from "./user-prompts.js";
import { ToUI, toWorker } from "../protocol.js";
import { ToolHost } from "./tool-host.js";
import { showCpuModels } from "./cpu-models.js";
import { WaitShown } from "./waiting.js";

// What the user changed in Settings, kept in this browser; every default, and every setting
// in effect, comes from Python (agent_py/browser.py, PageSettings) in "ready" and "settings".
const SETTINGS_KEY = "agent_py.settings";
const SESSION_KEY = "agent_py.session"; // the conversation the next run continues
// What the worker needs of a stored session to continue it: its turns' framing and digests.
const SESSION_FRAMING = new Set(["session_start", "turn_start", "final", "turn_end"]);
const STOP_GRACE_MS = 10_000; // a Stop the worker has not honoured by then restarts it

const $ = (id) => document.getElementById(id);
const view = new RunView($("run-view"), { onUnfold: (session, turn, section) => unfoldTurn(session, turn, section) });
const waitShown = new WaitShown($("progress-model-text"), $("model-progress-row"));
const params = new URLSearchParams(location.search);
// ?engine= overrides the Engine setting for this visit; "scripted" is the explicit test switch,
// and nothing else ever selects the scripted engine.
const ENGINES = ["auto", "webllm", "cpu", "openai", "scripted"];
const engineOverride = ENGINES.includes(params.get("engine")) ? params.get("engine") : null;

let worker = null;
let store = null;
let ready = false;
let running = false;
let preparing = false; // the model's preparation is under way (Stop ends it too)
let stopTimer = null;
let storeFailed = false;
let eventQueue = Promise.resolve();
let currentSession = localStorage.getItem(SESSION_KEY);
let storeSettled;
const storeSettledOnce = new Promise((resolve) => { storeSettled = resolve; });
let sessionSent = Promise.resolve(); // a run is posted after the session it belongs to
// Settled when the first worker has booted (or failed to): the offline copy waits for it.
let firstBootSettled;
const firstBoot = new Promise((resolve) => { firstBootSettled = resolve; });
const waiters = new Map(); // message type -> resolve, for the test hooks below
// For the page's drivers (window.agentApp): "starting" until the worker has booted, then
// "ready" or "failed"; and the run under way (or the last one), settled with its result.
let pageState = "starting";
let lastRun = null; // {promise, resolve}

function loadUserSettings() {
  try {
    const stored = JSON.parse(localStorage.getItem(SETTINGS_KEY) || "{}");
    return stored && typeof stored === "object" && !Array.isArray(stored) ? stored : {};
  } catch {
    return {};
  }
}

let userSettings = loadUserSettings();
let settingsInfo = null; // {values, defaults, engine_fields, profile}, from the worker

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
  $("stop").disabled = !running && !preparing;
  $("new-session").disabled = running;
}

function setPreparing(value) {
  preparing = value;
  $("stop").disabled = !running && !preparing;
}

// --- events: stored first, then drawn ----------------------------------------------------------
// Events wait in `unsaved` while the store commits earlier ones, then go in one transaction:
// one per batch the worker sent (a turn of its loop) while the store is idle, fewer when the
// store is busy (a transaction costs the UI thread and the browser far more than an event).
let unsaved = [];
function onAgentEvents(events) {
  const queued = unsaved.length > 0; // a save is waiting to start: these go with it
  unsaved.push(...events);
  if (queued) return;
  eventQueue = eventQueue.then(async () => {
    const batch = unsaved;
    unsaved = [];
    if (store && !storeFailed) {
      try {
        await store.appendMany(batch);
        // A finished turn's events go into one record: a long session stays a few records a turn.
        for (const event of batch) if (event.type === "turn_end") await store.packTurn(event.session, event.turn);
      } catch (error) {
        storeFailed = true;
        showError(`Session history is not being saved: ${error.message || error}`);
      }
    }
    for (const event of batch) drawEvent(event);
  });
}

function drawEvent(event) {
  if (event.type === "turn_start" && event.session !== currentSession) rememberSession(event.session);
  view.apply(event);
  // Automation hook: `python -m agent_py run` exposes this function to follow the run.
  if (typeof window.__agent_py_event === "function") window.__agent_py_event(event);
  if (event.type === "final") {
    const state = event.meta.state;
    setStatus(state === "completed" ? "Completed" : state === "cancelled" ? "Stopped by the user" : `Failed: ${event.content}`);
    refreshSessions();
  }
}

// --- MCP servers, the bridge extension and the sandbox -------------------------------------------
// The panel edits the list and the worker connects it; the tool host answers the worker's
// sandbox runs and carries its bridge requests to the extension.
const tools = new ToolHost();
const serversPanel = new ServersPanel({
  onChange: (servers) => {
    if (ready) worker.postMessage(toWorker.mcpServers(servers));
  },
  onReconnect: async (name) => {
    await tools.relay.detect({ again: true }); // the extension may have been set up meanwhile
    if (ready) worker.postMessage(toWorker.mcpReconnect(name));
  },
  onForget: (name) => {
    if (ready) worker.postMessage(toWorker.mcpForget(name));
  },
});
// OAuth sign-in popups and elicitation forms for the MCP client (user-prompts.js).
const userPrompts = new UserPrompts({ send: (message) => worker.postMessage(message), panel: serversPanel });
// A plan that waits for the user's review shows in the running turn (plan-review.js).
const planReview = new PlanReview({
  send: (message) => worker.postMessage(message),
  where: () => $("run-view").querySelector(".turn:last-of-type") ?? $("run-view"),
  onShow: () => setStatus("Review the plan: approve, edit or cancel"),
});
tools.relay.onPresence((presence) => serversPanel.setPresence(presence));
tools.relay.detect();

// --- the worker ----------------------------------------------------------------------------------
function startWorker() {
  tools.dropRequests(); // of a worker that is being replaced
  planReview.close();
  const target = new Worker(new URL("../worker/worker.js", import.meta.url), { type: "module" });
  worker = target;
  // Answers go to the worker that asked: a restarted one must not get the old one's.
  const answer = (message) => target.postMessage(message);
  target.onmessage = (message) => onWorkerMessage(message.data, answer);
  target.onerror = (event) => {
    firstBootSettled();
    pageState = "failed";
    setStatus("Failed to start");
    showError(`The agent worker failed: ${event.message || "unknown error"}`);
  };
  pageState = "starting";
  target.postMessage(toWorker.boot(userSettings, engineOverride));
}

function onWorkerMessage(message, answer) {
  const waiter = waiters.get(message.type);
  if (waiter) {
    waiters.delete(message.type);
    waiter(message);
  }
  if (tools.onWorkerMessage(message, answer) || userPrompts.onWorkerMessage(message)) return;
  if (planReview.onWorkerMessage(message)) return;
  switch (message.type) {
    case ToUI.PROGRESS:
      if (message.what === "prefill") setPreparing(true);
      return showProgress(message);
    case ToUI.READY:
      return onReady(message);
    case ToUI.SETTINGS:
      return showSettings(message.settings);
    case ToUI.WARMED:
      window.agentApp.timings.warm_after_ready_ms = message.ms;
      return;
    case ToUI.PREPARED:
      setPreparing(false);
      if (!running && document.body.dataset.status === "stopping") {
        clearTimeout(stopTimer); // a Stop of the preparation was honoured
        setStatus("Ready");
      }
      window.agentApp.prepared = message.report;
      window.agentApp.preparations.push(message.report);
      return showPrepared(message.report);
    case ToUI.EVENTS:
      return onAgentEvents(message.events);
    case ToUI.TOKEN:
      $("live").textContent += message.text;
      return;
    case ToUI.ENGINE_NOTE:
      $("live").textContent += `\n[${message.text}]\n`;
      return;
    case ToUI.WAITING:
      return waitShown.update(message.what);
    case ToUI.RUN_FINISHED:
      clearTimeout(stopTimer);
      planReview.close();
      // After every queued event is stored and drawn, so a watcher of lastResult sees them all.
      eventQueue.then(() => {
        window.agentApp.lastCounts = message.counts;
        window.agentApp.lastOverhead = message.overhead;
        window.agentApp.lastResult = message.result;
        setRunning(false);
        lastRun?.resolve(message.result);
      });
      return;
    case ToUI.MODELS:
      window.agentApp.prebuilt = message.prebuilt;
      if (settingsInfo) showSettings(settingsInfo); // the model list grows by the prebuilt ones
      return showCachedModels(message.cached);
    case ToUI.MCP_STATUS:
      return serversPanel.setStatus(message.status);
    case ToUI.ERROR:
      showError(message.message);
      if (!ready) {
        setStatus("Failed to start");
        pageState = "failed";
        firstBootSettled();
      }
      return;
    default:
      return;
  }
}

function showProgress({ what, progress, text }) {
  if (what === "model" || what === "prefill") {
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

// The quiet line under the model bar once the model is prepared before a task (or why not).
function showPrepared({ prefilled, prompt_tokens: tokens, ms, skipped, error, restored_tokens: restored, warning, server_models: served }) {
  $("model-progress-row").hidden = false;
  if (served) $("openai-models").replaceChildren(...served.map((id) => new Option(id, id)));
  $("progress-model").value = prefilled ? 1 : 0;
  if (error) {
    $("progress-model-text").textContent = `The model could not be prepared: ${error}`;
  } else if (skipped) {
    $("progress-model-text").textContent = `Model: ${skipped}.`;
  } else {
    const seconds = ((ms || 0) / 1000).toFixed(1);
    const how = restored ? "restored from this browser's storage" : "prefilled";
    $("progress-model-text").textContent = prefilled
      ? `Model ready: the planner's prompt${tokens ? ` (${tokens} tokens)` : ""} is ${how} (${seconds} s)${warning ? `. ${warning}` : ""}`
      : `Model loaded (${seconds} s)`;
  }
}

function onReady({ engine, timings, settings: info }) {
  ready = true;
  pageState = "ready";
  firstBootSettled();
  window.agentApp.timings = timings;
  window.agentApp.engine = engine;
  showSettings(info);
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
  worker.postMessage(toWorker.mcpAuthRecords(loadAuthRecords()));
  worker.postMessage(toWorker.mcpServers(serversPanel.servers()));
  sendSession();
}

// --- run and stop --------------------------------------------------------------------------------
/** Runs a task; settles with its RunResult (protocol.js), or null at once when none starts. */
function run(question) {
  if (!question.trim() || running) {
    lastRun = { promise: Promise.resolve(null), resolve() {} };
    return lastRun.promise;
  }
  let resolve;
  const promise = new Promise((settle) => { resolve = settle; });
  lastRun = { promise, resolve };
  showError("");
  $("live").textContent = "";
  setStatus("Running…");
  setRunning(true);
  const target = worker;
  sessionSent.then(() => target.postMessage(toWorker.run(question)));
  return promise;
}

/** The run under way (or the last one): {done: true, result} once it has ended, or
 * {done: false} when it has not within `timeoutMs`. */
function finished(timeoutMs) {
  if (!lastRun) return Promise.resolve({ done: true, result: null });
  const ended = lastRun.promise.then((result) => ({ done: true, result }));
  const late = new Promise((resolve) => setTimeout(() => resolve({ done: false }), timeoutMs));
  return Promise.race([ended, late]);
}

// --- the conversation: turns of one session, continued across reloads ----------------------------
function rememberSession(session) {
  currentSession = session;
  if (session) localStorage.setItem(SESSION_KEY, session);
  else localStorage.removeItem(SESSION_KEY);
}

/** Posts the session the next run continues (its stored events), after any posted before. */
function postSession(events) {
  const target = worker;
  const framing = () => events.then((all) => all.filter((event) => SESSION_FRAMING.has(event.type)));
  sessionSent = sessionSent.then(framing).then((kept) => target.postMessage(toWorker.session(kept)));
  return sessionSent;
}

/** Tells the (re)booted worker which session the next run continues: its stored turns. */
function sendSession() {
  return postSession(
    storeSettledOnce.then(() => (currentSession && store && !storeFailed ? store.events(currentSession) : [])).catch((error) => {
      showError(`The conversation could not be continued: ${error.message || error}`);
      return [];
    }),
  );
}

/** Continue `session` (null: a new one) from the next run. */
function chooseSession(session) {
  rememberSession(session);
  if (ready) sendSession();
}

function newSession() {
  if (running) return;
  view.clear();
  $("session-notice").hidden = true;
  chooseSession(null);
  setStatus("New session");
  $("task").focus();
}

function stop() {
  if (!running && !preparing) return;
  setStatus(running ? "Stopping…" : "Stopping the model's preparation…");
  worker.postMessage(toWorker.stop());
  clearTimeout(stopTimer);
  stopTimer = setTimeout(() => {
    // The worker did not finish the run in time (a stuck engine): restart it rather than hang.
    worker.terminate();
    ready = false;
    waitShown.update(null);
    setPreparing(false);
    setRunning(false);
    setStatus("Stopped (the agent was restarted)");
    showError("The agent did not stop in time, so it was restarted.");
    view.markInterrupted("stopped: the agent did not stop in time and was restarted");
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
      open.onclick = async () => {
        if (running) return;
        await openSession(session.session);
        chooseSession(session.session); // the next run continues it
      };
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

// A folded turn's Show: its events from the store, drawn in full in its place.
async function unfoldTurn(session, turn, section) {
  try {
    const events = (await store.events(session)).filter((event) => event.turn === turn);
    const drawn = new RunView(document.createElement("div"));
    for (const event of events) drawn.apply(event);
    if (drawn.turn) section.replaceWith(drawn.turn.section);
  } catch (error) {
    showError(String(error.message || error));
  }
}

// --- settings ------------------------------------------------------------------------------------
// The form's fields are named after the settings (PageSettings); what they show is what
// Python says is in effect.
function settingsFields() {
  return [...$("settings-form").elements].filter((field) => field.name);
}

function showSettings(info) {
  settingsInfo = info;
  const { values } = info;
  const models = [...new Set([values.model, info.defaults.model, ...(window.agentApp.prebuilt || [])])];
  $("setting-model").replaceChildren(...models.map((id) => new Option(id, id, false, id === values.model)));
  for (const field of settingsFields()) {
    if (field.type === "checkbox") field.checked = Boolean(values[field.name]);
    else field.value = values[field.name] ?? "";
  }
  $("save-settings").disabled = false;
  $("refresh-models").disabled = false; // the worker knows the model settings now
  showCpuModels($("cpu-models"), $("setting-cpu-model"), values.cpu_model).catch((error) =>
    console.warn("the CPU models could not be listed:", error));
}

function formValue(field) {
  if (field.type === "checkbox") return field.checked;
  if (field.type === "number") return field.value === "" ? settingsInfo.defaults[field.name] : Number(field.value);
  return field.value.trim();
}

function saveSettings(event) {
  event.preventDefault();
  if (!settingsInfo) return; // the button is enabled once the worker sent them
  const { values: before, defaults, engine_fields: engineFields } = settingsInfo;
  const wanted = { ...before };
  for (const field of settingsFields()) wanted[field.name] = formValue(field);
  // Only what differs from the defaults is kept, so a changed default reaches this user too;
  // settings the form does not show (set by tests and scripts) stay as they were.
  const kept = { ...userSettings };
  for (const key of Object.keys(kept)) if (!(key in before)) delete kept[key]; // an old name
  for (const field of settingsFields()) {
    if (wanted[field.name] === defaults[field.name]) delete kept[field.name];
    else kept[field.name] = wanted[field.name];
  }
  userSettings = kept;
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(userSettings));
  const restart = engineFields.some((key) => before[key] !== wanted[key]);
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
  if (ready) worker.postMessage(toWorker.configure(userSettings));
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
      remove.onclick = () => worker.postMessage(toWorker.deleteModel(id));
      li.append(`${id} `, remove);
      return li;
    }),
  );
}

// --- hooks for tests and scripts -----------------------------------------------------------------
function request(message, answerType) {
  return new Promise((resolve) => {
    waiters.set(answerType, resolve);
    worker.postMessage(message);
  });
}

// The page's API for its drivers (the terminal, the suite, scripts and tests): states and
// promises, never the words of the status line or the DOM.
window.agentApp = {
  /** "starting", "ready" (the engine may still be unusable: `engine.usable`) or "failed". */
  state: () => pageState,
  /** Every setting in effect (null before the worker has started). */
  settings: () => (settingsInfo ? { ...settingsInfo.values } : null),
  /** The same with the defaults, which settings restart the worker, and the model profile. */
  settingsInfo: () => settingsInfo,
  /** Replies for the scripted test engine (only with ?engine=scripted). */
  setScript: (replies) => worker.postMessage(toWorker.script(replies)),
  engineCounts: async () => (await request(toWorker.engineCounts(), ToUI.ENGINE_COUNTS)).counts,
  /** The MCP servers list (as saved) and a way to replace it, like editing the panel. */
  mcpServers: () => serversPanel.servers(),
  /** Each server's state ({name, state, error?}: "pending", "connected", "error", …). */
  serverStates: () => serversPanel.states(),
  setMcpServers: (servers) => serversPanel.setServers(servers),
  bridgePresence: () => tools.relay.presence,
  /** Each preparation's report since the page opened (`prepared` is the last). */
  preparations: [],
  /** Each wait the engine reported ({what, shown}: shown in the model bar once it lasted). */
  waits: () => waitShown.seen,
  run,
  finished,
  stop,
  sessions: () => store.sessions(),
  /** The next run continues the session of these stored events ([]: a new session). */
  useSession(events) {
    rememberSession(events[0]?.session ?? null);
    return postSession(Promise.resolve(events));
  },
};

// --- start ---------------------------------------------------------------------------------------
async function main() {
  $("task-form").addEventListener("submit", (event) => {
    event.preventDefault();
    run($("task").value);
  });
  $("task").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      run($("task").value);
    }
  });
  $("new-session").addEventListener("click", newSession);
  $("stop").addEventListener("click", stop);
  $("settings-form").addEventListener("submit", saveSettings);
  $("refresh-models").addEventListener("click", () => worker.postMessage(toWorker.models()));

  startWorker();
  // The sandbox frame is made once the agent has booted, before any run can ask for it: made
  // at load, its document and scripts took the main thread for up to ~80 ms during the boot.
  firstBoot.then(() => tools.startSandbox());

  try {
    store = await SessionStore.open();
    const sessions = await store.sessions();
    const last = sessions[0];
    if (last && (last.lastState === "running" || last.lastState === "interrupted")) {
      await openSession(last.session);
      rememberSession(last.session);
      $("session-notice").hidden = false;
      $("session-notice").textContent = "The last session was interrupted by a page reload; everything shown before is kept below.";
    } else if (currentSession && sessions.some((session) => session.session === currentSession)) {
      await openSession(currentSession); // the conversation as it was before the reload
    } else {
      rememberSession(null);
    }
    await refreshSessions();
  } catch (error) {
    showError(String(error.message || error)); // sessions.js says "Session history is unavailable: …"
  } finally {
    storeSettled();
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
