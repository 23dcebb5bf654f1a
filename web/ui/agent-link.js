// The UI thread's line to the agent worker (../worker/worker.js): starts it, starts a fresh one
// when it is replaced (a Stop it did not honour, new engine settings), posts to the one running
// now, and knows whether it has booted. The messages are protocol.js's (ToWorker, ToUI).
import { toWorker } from "../protocol.js";

// ?engine= overrides the Engine setting for this visit; "scripted" is the explicit test switch,
// and nothing else ever selects the scripted engine.
const ENGINES = ["auto", "webllm", "cpu", "openai", "scripted"];
const params = new URLSearchParams(location.search);
const engineOverride = ENGINES.includes(params.get("engine")) ? params.get("engine") : null;

export class AgentLink {
  /** The worker running now (a restart replaces it). */
  worker = null;
  /** Whether the worker running now has booted: it takes tasks and settings. */
  ready = false;
  /** For the page's drivers: "starting" until the worker has booted, then "ready" or "failed". */
  state = "starting";
  #waiters = new Map(); // message type -> resolve, for request()
  #onMessage;
  #onError;
  #firstBootSettled;
  /** Settled when the first worker has booted (or failed to): the offline copy waits for it. */
  firstBoot = new Promise((resolve) => { this.#firstBootSettled = resolve; });

  /**
   * @param {{onMessage: (message: object, answer: (message: object) => void) => void,
   *   onError: (event: ErrorEvent) => void}} handlers
   *   onMessage: each message of a worker, with `answer` posting to that worker;
   *   onError: a worker's script failed (after `state` became "failed")
   */
  constructor({ onMessage, onError }) {
    this.#onMessage = onMessage;
    this.#onError = onError;
  }

  /** Starts a worker that boots with the user's settings (one running is terminated first). */
  start(userSettings) {
    const target = new Worker(new URL("../worker/worker.js", import.meta.url), { type: "module" });
    this.worker = target;
    // Answers go to the worker that asked: a restarted one must not get the old one's.
    const answer = (message) => target.postMessage(message);
    target.onmessage = (message) => {
      const waiter = this.#waiters.get(message.data.type);
      if (waiter) {
        this.#waiters.delete(message.data.type);
        waiter(message.data);
      }
      this.#onMessage(message.data, answer);
    };
    target.onerror = (event) => {
      this.failed();
      this.#onError(event);
    };
    this.state = "starting";
    target.postMessage(toWorker.boot(userSettings, engineOverride));
  }

  /** Posts to the worker running now. */
  post(message) {
    this.worker.postMessage(message);
  }

  /** Posts `message`; resolves with the worker's next message of type `answerType`. */
  request(message, answerType) {
    return new Promise((resolve) => {
      this.#waiters.set(answerType, resolve);
      this.worker.postMessage(message);
    });
  }

  /** Ends the worker running now, whatever it is doing; start() makes the next one. */
  terminate() {
    this.worker.terminate();
    this.ready = false;
  }

  /** The worker said it is ready. */
  booted() {
    this.ready = true;
    this.state = "ready";
    this.#firstBootSettled();
  }

  /** The worker could not boot. */
  failed() {
    this.state = "failed";
    this.#firstBootSettled();
  }
}
