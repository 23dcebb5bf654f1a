// The UI thread's entry: it makes the page's parts, starts the agent worker and hands each of the
// worker's messages to the part that shows it. It holds no agent logic: the agent and the engine
// live in worker.js, JavaScript runs in the sandbox (sandbox-host.js), history is kept in
// IndexedDB (sessions.js) before anything is shown.
//
// The parts: agent-link.js (the worker, started and restarted), run-controls.js (Run, Stop and
// the run under way), conversation.js (events stored then drawn, the session continued, the
// Sessions list), settings-panel.js, progress-view.js (the boot and model bars), status-line.js,
// workspace-panel.js (the user's files), and driver-api.js (window.agentApp, for the page's
// drivers).
import { ToUI, toWorker } from "../protocol.js";
import { AgentLink } from "./agent-link.js";
import { Conversation } from "./conversation.js";
import { installDriverApi } from "./driver-api.js";
import { PlanReview } from "./plan-review.js";
import { showBooted, showPrepared, showProgress } from "./progress-view.js";
import { RunControls } from "./run-controls.js";
import { ServersPanel } from "./servers.js";
import { SettingsPanel } from "./settings-panel.js";
import { setStatus, showError } from "./status-line.js";
import { ToolHost } from "./tool-host.js";
import { UserPrompts, loadAuthRecords } from "./user-prompts.js";
import { WaitShown } from "./waiting.js";
import { WorkspacePanel } from "./workspace-panel.js";

const $ = (id) => document.getElementById(id);
const waitShown = new WaitShown($("progress-model-text"), $("model-progress-row"));
const link = new AgentLink({
  onMessage: onWorkerMessage,
  onError: (event) => {
    setStatus("Failed to start");
    showError(`The agent worker failed: ${event.message || "unknown error"}`);
  },
});
const conversation = new Conversation({ root: $("run-view"), link, isRunning: () => controls.running });
const controls = new RunControls({
  link,
  sessionSent: () => conversation.sessionSent,
  view: conversation.view,
  waitShown,
  restart: startWorker,
});
const settingsPanel = new SettingsPanel({
  link,
  prebuilt: () => window.agentApp.prebuilt,
  isRunning: () => controls.running,
  restart: () => {
    link.terminate();
    controls.setRunning(false);
    startWorker();
  },
});

// --- MCP servers, the bridge extension and the sandbox -------------------------------------------
// The panel edits the list and the worker connects it; the tool host answers the worker's
// sandbox runs and carries its bridge requests to the extension.
const tools = new ToolHost();
const serversPanel = new ServersPanel({
  onChange: (servers) => {
    if (link.ready) link.post(toWorker.mcpServers(servers));
  },
  onReconnect: async (name) => {
    await tools.relay.detect({ again: true }); // the extension may have been set up meanwhile
    if (link.ready) link.post(toWorker.mcpReconnect(name));
  },
  onForget: (name) => {
    if (link.ready) link.post(toWorker.mcpForget(name));
  },
});
// OAuth sign-in popups and elicitation forms for the MCP client (user-prompts.js).
const userPrompts = new UserPrompts({ send: (message) => link.post(message), panel: serversPanel });
// A plan that waits for the user's review shows in the running turn (plan-review.js).
const planReview = new PlanReview({
  send: (message) => link.post(message),
  where: () => $("run-view").querySelector(".turn:last-of-type") ?? $("run-view"),
  onShow: () => setStatus("Review the plan: approve, edit or cancel"),
});
tools.relay.onPresence((presence) => serversPanel.setPresence(presence));
tools.relay.detect();

// The user's files: the agent's worker reads them from the same storage at each run.
const workspacePanel = new WorkspacePanel();

installDriverApi({ link, controls, conversation, settingsPanel, serversPanel, tools, waitShown, workspacePanel });

// --- the worker ----------------------------------------------------------------------------------
function startWorker() {
  tools.dropRequests(); // of a worker that is being replaced
  planReview.close();
  link.start(settingsPanel.userSettings);
}

function onWorkerMessage(message, answer) {
  if (tools.onWorkerMessage(message, answer) || userPrompts.onWorkerMessage(message)) return;
  if (planReview.onWorkerMessage(message)) return;
  switch (message.type) {
    case ToUI.PROGRESS:
      if (message.what === "prefill") controls.setPreparing(true);
      return showProgress(message, link.ready);
    case ToUI.READY:
      return onReady(message);
    case ToUI.SETTINGS:
      return settingsPanel.show(message.settings);
    case ToUI.WARMED:
      window.agentApp.timings.warm_after_ready_ms = message.ms;
      return;
    case ToUI.PREPARED:
      controls.prepared();
      window.agentApp.prepared = message.report;
      window.agentApp.preparations.push(message.report);
      return showPrepared(message.report);
    case ToUI.EVENTS:
      return conversation.onEvents(message.events);
    case ToUI.TOKEN:
      $("live").textContent += message.text;
      return;
    case ToUI.ENGINE_NOTE:
      $("live").textContent += `\n[${message.text}]\n`;
      return;
    case ToUI.WAITING:
      return waitShown.update(message.what);
    case ToUI.RUN_FINISHED:
      controls.runFinished();
      planReview.close();
      // After every queued event is stored and drawn, so a watcher of lastResult sees them all.
      conversation.drawn.then(() => {
        window.agentApp.lastCounts = message.counts;
        window.agentApp.lastOverhead = message.overhead;
        window.agentApp.lastResult = message.result;
        controls.ended(message.result);
      });
      workspacePanel.refresh(); // the run's steps may have written files
      return;
    case ToUI.MODELS:
      window.agentApp.prebuilt = message.prebuilt;
      if (settingsPanel.info) settingsPanel.show(settingsPanel.info); // the model list grows by the prebuilt ones
      return settingsPanel.showCachedModels(message.cached);
    case ToUI.MCP_STATUS:
      return serversPanel.setStatus(message.status);
    case ToUI.ERROR:
      showError(message.message);
      if (!link.ready) {
        setStatus("Failed to start");
        link.failed();
      }
      return;
    default:
      return;
  }
}

function onReady({ engine, timings, settings: info }) {
  link.booted();
  window.agentApp.timings = timings;
  window.agentApp.engine = engine;
  settingsPanel.show(info);
  settingsPanel.showThreads(engine.threads);
  showBooted(engine, timings);
  setStatus(engine.usable ? "Ready" : "Ready, but no model can run here");
  controls.setRunning(false);
  link.post(toWorker.mcpAuthRecords(loadAuthRecords()));
  link.post(toWorker.mcpServers(serversPanel.servers()));
  conversation.send();
}

// --- start ---------------------------------------------------------------------------------------
async function main() {
  $("task-form").addEventListener("submit", (event) => {
    event.preventDefault();
    controls.run($("task").value);
  });
  $("task").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      controls.run($("task").value);
    }
  });
  $("new-session").addEventListener("click", () => conversation.startNew());
  $("stop").addEventListener("click", () => controls.stop());
  $("settings-form").addEventListener("submit", (event) => settingsPanel.save(event));
  $("refresh-models").addEventListener("click", () => link.post(toWorker.models()));

  startWorker();
  // The sandbox frame is made once the agent has booted, before any run can ask for it: made
  // at load, its document and scripts took the main thread for up to ~80 ms during the boot.
  link.firstBoot.then(() => tools.startSandbox());

  await conversation.restore();

  // Offline use needs the service worker; the page works without it while online, so a
  // failure here is reported but never blocks the agent. It is registered once the agent has
  // booted: a first visit's precaching (tens of MB, each file hashed) would otherwise take
  // the CPU from the boot.
  link.firstBoot
    .then(() => import("./sw-register.js"))
    .then(({ registerServiceWorker }) => registerServiceWorker())
    .then(() => { document.body.dataset.offline = "ready"; })
    .catch((error) => console.warn("service worker not registered:", error));
}

main();
