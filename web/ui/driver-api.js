// The page's API for its drivers (the terminal, the suite, scripts and tests): states and
// promises, never the words of the status line or the DOM. agent_py/cli/terminal.py is its
// main reader; docs/architecture.md states the contract.
//
// Besides what is defined here, app.js records on window.agentApp what the worker reports, as it
// arrives: `engine` and `timings` at ready (`timings.warm_after_ready_ms` once warmed up), each
// preparation's report as `prepared` (and in `preparations`), WebLLM's `prebuilt` models, and
// the last run's `lastResult`, `lastCounts` and `lastOverhead`. Each is undefined until then.
import { ToUI, toWorker } from "../protocol.js";

/**
 * Sets window.agentApp, over the page's parts (made by app.js), and returns it.
 * @param {object} parts
 * @param {import("./agent-link.js").AgentLink} parts.link
 * @param {import("./run-controls.js").RunControls} parts.controls
 * @param {import("./conversation.js").Conversation} parts.conversation
 * @param {import("./settings-panel.js").SettingsPanel} parts.settingsPanel
 * @param {import("./servers.js").ServersPanel} parts.serversPanel
 * @param {import("./tool-host.js").ToolHost} parts.tools
 * @param {import("./waiting.js").WaitShown} parts.waitShown
 * @param {import("./workspace-panel.js").WorkspacePanel} parts.workspacePanel
 */
export function installDriverApi({ link, controls, conversation, settingsPanel, serversPanel, tools, waitShown, workspacePanel }) {
  window.agentApp = {
    /** The workspace's files as the Files panel shows them, read again: [{name, size, modified}]. */
    workspaceFiles: async () => {
      await workspacePanel.refresh();
      return workspacePanel.files;
    },
    /** "starting", "ready" (the engine may still be unusable: `engine.usable`) or "failed". */
    state: () => link.state,
    /** Every setting in effect (null before the worker has started). */
    settings: () => (settingsPanel.info ? { ...settingsPanel.info.values } : null),
    /** The same with the defaults, which settings restart the worker, and the model profile. */
    settingsInfo: () => settingsPanel.info,
    /** Replies for the scripted test engine (only with ?engine=scripted). */
    setScript: (replies) => link.post(toWorker.script(replies)),
    engineCounts: async () => (await link.request(toWorker.engineCounts(), ToUI.ENGINE_COUNTS)).counts,
    /** The MCP servers list (as saved) and a way to replace it, like editing the panel. */
    mcpServers: () => serversPanel.servers(),
    /** Each server's state ({name, state, error?}: "pending", "connected", "error", …; once
     * connected also tool_count, tools and protocol_version, as the panel shows them). */
    serverStates: () => serversPanel.states(),
    setMcpServers: (servers) => serversPanel.setServers(servers),
    bridgePresence: () => tools.relay.presence,
    /** Each preparation's report since the page opened (`prepared` is the last). */
    preparations: [],
    /** Each wait the engine reported ({what, shown}: shown in the model bar once it lasted). */
    waits: () => waitShown.seen,
    /** Runs a task; settles with its RunResult (protocol.js), or null at once when none starts. */
    run: (question) => controls.run(question),
    /** {done: true, result} once the run under way (or the last one) has ended, or
     * {done: false} when it has not within `timeoutMs`. */
    finished: (timeoutMs) => controls.finished(timeoutMs),
    stop: () => controls.stop(),
    sessions: () => conversation.store.sessions(),
    /** The next run continues the session of these stored events ([]: a new session). */
    useSession(events) {
      conversation.remember(events[0]?.session ?? null);
      return conversation.post(Promise.resolve(events));
    },
  };
  return window.agentApp;
}
