// The agent in the worker: Python's PageSession and the model engine, made by the boot and kept
// for the worker's lifetime, and what the UI's messages ask of them (settings, MCP servers, the
// model's preparation, a run, a stop). worker.js routes each message to one method here; this
// class holds the worker's state.
import { toUI } from "../protocol.js";
import { createEngine } from "./engine-choice.js";
import { rememberEngine, sameEngineSettings, startEngineEarly } from "./engine-early.js";
import { detectWebGPU } from "./engines/gpu.js";
import { pythonMessage, startPageSession } from "./page-session.js";
import { startPython } from "./python-boot.js";
import { deleteModel, sendModels, webllmModelCached } from "./webllm-cache.js";

const PYODIDE_URL = new URL("../vendor/pyodide/", import.meta.url).href;

// The UI sends its servers' list right after ready. The boot's preparation waits for that list
// to connect, for a bounded while, so a page with saved servers prefills the planner's prompt
// once, with their tools: not once without them, and again from the tool list on. A server
// slower than that joins the prompt later, through preparedAfter.
const SERVERS_WAIT_MS = 3000;

export class Agent {
  /** The model engine (engine-port.js's Engine; null for a model server, reached from Python). */
  engine = null;
  /** The usage of the engine's last prefill, as engine-port.js reports it. */
  lastPrefill = null;
  #pyodide = null;
  #page = null; // agent_py.page.session.PageSession (a PyProxy, kept for the worker's lifetime)
  #loopDrains = null; // agent_py.page.loop.drains: runs of the event loop's ready queue
  #engineInfo = null;
  #userSettings = {}; // what the user changed, as the UI last sent it (boot or configure)
  #settingsNow = null; // every setting in effect (PageSettings, from Python)
  #settings = () => this.#settingsNow; // the same, read when it is needed (webllm-cache.js)
  #running = false;
  #bootPrepared = false; // the boot's own preparation of the model has begun
  #serversListed;
  #firstServerList = new Promise((resolve) => (this.#serversListed = resolve));
  #post;
  #stepClock;

  /**
   * @param {(message: object) => void} post  the outbox's post (outbox.js)
   * @param {ReturnType<import("./step-clock.js").createStepClock>} stepClock
   */
  constructor(post, stepClock) {
    this.#post = post;
    this.#stepClock = stepClock;
  }

  // --- the boot ----------------------------------------------------------------------------------
  /**
   * Starts Python and the engine, configures the session once and says "ready"; then warms up
   * and prepares the model while the user types.
   * @param {{settings?: object, engine?: string}} message  the boot message (protocol.js)
   * @param {{agent_bridge: object, agent_http: object, agent_user: object}} modules  what Python
   *   calls (bridge.js, http-port.js, user-port.js)
   */
  async boot({ settings, engine: override }, modules) {
    const post = this.#post;
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
    const early = startEngineEarly(settings, override, gpuFound, () => Math.round(performance.now() - t0), post);
    const started = await startPython(PYODIDE_URL);
    this.#pyodide = started.pyodide;
    Object.assign(phases, started.phases);
    phases.python_started_at = Math.round(performance.now() - t0);
    last = performance.now();
    post(toUI.progress("packages", 1, "Python and packages loaded"));

    const session = await startPageSession(this.#pyodide, modules);
    Object.assign(phases, session.phases);
    this.#loopDrains = session.loopDrains;
    last = performance.now();
    this.#page = session.page;
    // The engine to create comes from the settings in effect (their defaults are Python's); the
    // session is configured once, below, when the engine's kind is known.
    try {
      this.#settingsNow = JSON.parse(this.#page.resolve_settings(JSON.stringify(settings))).values;
    } catch (error) {
      post(toUI.error(`The saved settings cannot be used, so the defaults apply: ${pythonMessage(error)}`));
      settings = {};
      this.#settingsNow = JSON.parse(this.#page.resolve_settings("{}")).values;
    }
    const gpu = await gpuFound;
    const choice = override || this.#settingsNow.engine;
    const earlyEngine = await early;
    let created;
    let engineEarly = null; // "used", or "dropped" when Python's settings differ from the last boot's
    if (earlyEngine && earlyEngine.choice === choice && sameEngineSettings(earlyEngine.settings, this.#settingsNow)) {
      created = earlyEngine.created;
      engineEarly = "used";
      phases.engine_early_at = earlyEngine.at_ms; // its model load began then
    } else {
      if (earlyEngine) {
        engineEarly = "dropped";
        earlyEngine.created.engine.exit();
      }
      created = await createEngine(choice, this.#settingsNow, gpu, post);
    }
    rememberEngine(settings, override, choice, this.#settingsNow); // not awaited: for the next boot
    phase("engine");
    this.engine = created.engine;
    // The window the engine was made with (read once, at start: a change restarts the worker).
    this.#engineInfo = { ...created.info, context_window: this.engine?.options?.contextWindow ?? null };
    const info = await this.#configure(settings); // once, with the engine's kind (it picks the profile)
    phase("configure");
    const timings = { agent_ready_ms: Math.round(performance.now() - t0), phases, engine_early: engineEarly };
    post(toUI.ready({ engine: this.#engineInfo, gpu, timings, settings: info }));

    // What the first task would do on its way (jsonschema, the tools' validators, the prompt
    // templates) is done now, while the user types (a run sent meanwhile waits for it).
    const warming = performance.now();
    this.#page.warm_up();
    post(toUI.warmed(Math.round(performance.now() - warming)));
    await Promise.race([this.#firstServerList, new Promise((resolve) => setTimeout(resolve, SERVERS_WAIT_MS))]);
    this.#bootPrepared = true;
    // Not awaited: a run sent from now on waits for the engine (Python's lock). A run sent
    // during the wait has prefilled the same prompt for its plan: nothing is left to prepare.
    if (!this.#running) this.#prepareModel();
  }

  // --- settings ----------------------------------------------------------------------------------
  // Settings go to Python as the user's, with the engine's kind (which chooses the model
  // profile); what comes back is every setting in effect, the defaults and the profile.
  async #configure(settings) {
    this.#userSettings = settings;
    const info = JSON.parse(await this.#page.configure(JSON.stringify({ ...this.#userSettings, engine_kind: this.#engineInfo?.name || "" })));
    this.#settingsNow = info.values;
    return info;
  }

  /** The user changed settings: Python's answer goes to the UI ("settings"). */
  async changeSettings(settings) {
    try {
      this.#post(toUI.settings(await this.#configure(settings)));
    } catch (error) {
      this.#post(toUI.error(`The settings were not changed: ${pythonMessage(error)}`));
      return;
    }
    // A new profile or budget may change the planner's prompt: prefill it again (llama.cpp
    // keeps what is unchanged of the cache, so an unchanged prompt costs nothing).
    if (this.#bootPrepared && !this.#running) this.#prepareModel();
  }

  // --- MCP servers: agent_py.mcp in Python, HTTP through http-port.js ---------------------------
  setAuthRecords(records) {
    this.#page?.set_auth_records(JSON.stringify(records || {}));
  }

  async forgetSignIn(name) {
    if (this.#page) await this.#preparedAfter(() => this.#page.forget_sign_in(name));
  }

  async configureServers(servers) {
    try {
      if (this.#page) await this.#preparedAfter(() => this.#page.configure_servers(JSON.stringify(servers || [])));
    } finally {
      this.#serversListed();
    }
  }

  async reconnectServer(name) {
    if (this.#page) await this.#preparedAfter(() => this.#page.reconnect_server(name));
  }

  // The planner's prompt lists the tools: when a server's tools came or went (a server added,
  // removed, reconnected or signed out), prefill it again while the user types, so the next task
  // does not compute it (llama.cpp keeps the unchanged start of the cache). Before the boot's
  // own preparation has begun, that one comes after.
  async #preparedAfter(change) {
    const before = this.#page.mcp_tools_key();
    await change();
    if (this.#bootPrepared && !this.#running && this.#page.mcp_tools_key() !== before) this.#prepareModel();
  }

  // --- the model ---------------------------------------------------------------------------------
  // Load the model and prefill the planner's fixed prompt while the user types, so the first
  // task computes only its own words. WebLLM only when its weights are cached already: a first
  // download of gigabytes waits for the user's Run. A failure here is only reported: the run
  // meets it again and says it in its own events.
  async #prepareModel() {
    const post = this.#post;
    if (!this.#engineInfo.usable) return;
    if (this.#engineInfo.name === "webllm" && !(await webllmModelCached(this.#settings))) {
      post(toUI.prepared({ prefilled: false, skipped: "the model's weights are not in this browser yet: they load at the first run" }));
      return;
    }
    const started = performance.now();
    post(toUI.progress("prefill", 0, "Preparing the model…"));
    try {
      this.lastPrefill = null;
      const done = JSON.parse(await this.#page.prepare());
      if (done.stopped) {
        post(toUI.prepared({ prefilled: false, skipped: "the preparation was stopped; the first run prepares it", ms: Math.round(performance.now() - started) }));
        return;
      }
      // The CPU engine keeps the prefilled state in the browser's storage: whether it came from
      // there (or from the page's server, shipped by set-up), and why a saved one was not used.
      const lastPrefill = this.lastPrefill;
      const state = lastPrefill ? { restored_tokens: lastPrefill.restored_tokens || 0, state: lastPrefill.state } : {};
      if (lastPrefill?.state_source) state.state_source = lastPrefill.state_source;
      if (lastPrefill?.state_warning) state.warning = lastPrefill.state_warning;
      post(toUI.prepared({ ...done, ...state, ...this.#serverModels(), ms: Math.round(performance.now() - started) }));
    } catch (error) {
      post(toUI.prepared({ prefilled: false, error: pythonMessage(error), ...this.#serverModels(), ms: Math.round(performance.now() - started) }));
    }
  }

  // A model server's models (what its /v1/models listed), for the Settings' model field.
  #serverModels() {
    return this.#engineInfo.name === "openai" ? { server_models: JSON.parse(this.#page.server_models()) } : {};
  }

  /** WebLLM's models, prebuilt and cached, to the UI ("models"). */
  sendModels() {
    return sendModels(this.#settings, this.#post);
  }

  async deleteModel(id) {
    await deleteModel(id, this.#settings);
    return this.sendModels();
  }

  /** The engine's counts of loads and unloads (a copy), or null without an engine. */
  engineCounts() {
    return this.engine ? { ...this.engine.counts } : null;
  }

  /** Replies for the scripted test engine. */
  setScript(replies) {
    if (this.#engineInfo?.name !== "scripted") throw new Error("Scripts are for the scripted test engine only.");
    this.engine.setScript(replies);
  }

  // --- runs --------------------------------------------------------------------------------------
  async run(question) {
    const post = this.#post;
    if (this.#running) {
      post(toUI.error("A task is already running."));
      return;
    }
    if (!this.#engineInfo.usable) {
      post(toUI.error(this.#engineInfo.reason || "No model engine can run in this browser."));
      post(toUI.runFinished(null, this.engine?.counts ?? null));
      return;
    }
    this.#running = true;
    const drainsBefore = this.#loopDrains();
    this.#stepClock.reset();
    try {
      const resultJson = await this.#page.run(question);
      const overhead = { step_ms: this.#stepClock.finish(), drains: drainsBefore === undefined ? null : this.#loopDrains() - drainsBefore };
      post(toUI.runFinished(JSON.parse(resultJson), this.engine?.counts ?? null, overhead));
    } catch (error) {
      post(toUI.error(`The agent failed: ${error.message || error}`));
      post(toUI.runFinished(null, this.engine?.counts ?? null));
    } finally {
      this.#running = false;
    }
  }

  /** The session the next run continues: its stored events (the UI's session message). */
  useSession(events) {
    if (!this.#page) throw new Error("The agent is still starting: no session can be chosen yet.");
    if (this.#running) throw new Error("The session cannot change while a task runs.");
    this.#page.use_session(JSON.stringify(events));
  }

  /** Stops the run, or the model's preparation, soon. */
  stop() {
    this.#page?.cancel();
    this.engine?.interrupt();
  }
}
