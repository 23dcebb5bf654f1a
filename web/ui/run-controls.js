// The Run and Stop controls and the run under way: a task is posted to the agent worker after
// the session it continues, its result settles the run's promise for the page's drivers, and a
// Stop the worker does not honour in time restarts the worker. The worker runs the task; this
// only asks and waits.
import { toWorker } from "../protocol.js";
import { setStatus, showError } from "./status-line.js";

const STOP_GRACE_MS = 10_000; // a Stop the worker has not honoured by then restarts it

const $ = (id) => document.getElementById(id);

export class RunControls {
  /** A task is running. */
  running = false;
  /** The model's preparation is under way (Stop ends it too). */
  preparing = false;
  #stopTimer = null;
  #lastRun = null; // the run under way (or the last one): {promise, resolve}, settled with its result
  #link;
  #sessionSent;
  #view;
  #waitShown;
  #restart;

  /**
   * @param {object} parts
   * @param {import("./agent-link.js").AgentLink} parts.link
   * @param {() => Promise<unknown>} parts.sessionSent  settles once the session posted last is
   *   with the worker (conversation.js)
   * @param {import("./render.js").RunView} parts.view  marks a run cut short by a restart
   * @param {import("./waiting.js").WaitShown} parts.waitShown
   * @param {() => void} parts.restart  starts a fresh worker, once this one is terminated
   */
  constructor({ link, sessionSent, view, waitShown, restart }) {
    this.#link = link;
    this.#sessionSent = sessionSent;
    this.#view = view;
    this.#waitShown = waitShown;
    this.#restart = restart;
  }

  setRunning(value) {
    this.running = value;
    $("run").disabled = !this.#link.ready || this.running;
    $("stop").disabled = !this.running && !this.preparing;
    $("new-session").disabled = this.running;
  }

  setPreparing(value) {
    this.preparing = value;
    $("stop").disabled = !this.running && !this.preparing;
  }

  /** Runs a task; settles with its RunResult (protocol.js), or null at once when none starts. */
  run(question) {
    if (!question.trim() || this.running) {
      this.#lastRun = { promise: Promise.resolve(null), resolve() {} };
      return this.#lastRun.promise;
    }
    let resolve;
    const promise = new Promise((settle) => { resolve = settle; });
    this.#lastRun = { promise, resolve };
    showError("");
    $("live").textContent = "";
    setStatus("Running…");
    this.setRunning(true);
    const target = this.#link.worker;
    this.#sessionSent().then(() => target.postMessage(toWorker.run(question)));
    return promise;
  }

  /** The run under way (or the last one): {done: true, result} once it has ended, or
   * {done: false} when it has not within `timeoutMs`. */
  finished(timeoutMs) {
    if (!this.#lastRun) return Promise.resolve({ done: true, result: null });
    const ended = this.#lastRun.promise.then((result) => ({ done: true, result }));
    const late = new Promise((resolve) => setTimeout(() => resolve({ done: false }), timeoutMs));
    return Promise.race([ended, late]);
  }

  stop() {
    if (!this.running && !this.preparing) return;
    setStatus(this.running ? "Stopping…" : "Stopping the model's preparation…");
    this.#link.post(toWorker.stop());
    clearTimeout(this.#stopTimer);
    this.#stopTimer = setTimeout(() => {
      // The worker did not finish the run in time (a stuck engine): restart it rather than hang.
      this.#link.terminate();
      this.#waitShown.update(null);
      this.setPreparing(false);
      this.setRunning(false);
      setStatus("Stopped (the agent was restarted)");
      showError("The agent did not stop in time, so it was restarted.");
      this.#view.markInterrupted("stopped: the agent did not stop in time and was restarted");
      this.#restart();
    }, STOP_GRACE_MS);
  }

  /** The worker has prepared the model (or stopped preparing it). */
  prepared() {
    this.setPreparing(false);
    if (!this.running && document.body.dataset.status === "stopping") {
      clearTimeout(this.#stopTimer); // a Stop of the preparation was honoured
      setStatus("Ready");
    }
  }

  /** The worker has finished the run: a Stop was honoured. */
  runFinished() {
    clearTimeout(this.#stopTimer);
  }

  /** The run's events are stored and drawn: the run settles with `result`. */
  ended(result) {
    this.setRunning(false);
    this.#lastRun?.resolve(result);
  }
}
