// The CPU engine's line to llama.cpp, which runs in its own worker (cpu-worker.js, which writes
// out the messages): the engine lives in the agent's worker and owns one CpuWorkerRpc, which
// starts that worker, sends it requests by id and hands their answers and events back. A worker
// that dies fails every waiting call (a "crashed" EngineError) and goes to `onCrash`, which
// forgets it and the model in it.
import { EngineError } from "./errors.js";

const WORKER_URL = new URL("./cpu-worker.js", import.meta.url).href;

export class CpuWorkerRpc {
  /**
   * @param {{build?: string, dot?: string}} options  the worker's URL parameters (cpu-worker.js)
   * @param {(worker: Worker) => void} onCrash  `worker` died
   */
  constructor(options, onCrash) {
    this.options = options;
    this.onCrash = onCrash;
    this.worker = null;
    this.calls = new Map(); // id -> {resolve, reject, onEvent}
    this.generations = new Set(); // ids of running generations
    this.nextId = 1;
  }

  startWorker() {
    const url = new URL(WORKER_URL);
    if (this.options.build) url.searchParams.set("build", this.options.build);
    if (this.options.dot) url.searchParams.set("dot", this.options.dot);
    const worker = new Worker(url.href); // classic: emscripten's threads use importScripts
    worker.onmessage = ({ data }) => {
      const waiting = this.calls.get(data.id);
      if (!waiting) return;
      if (data.event) return waiting.onEvent?.(data);
      this.calls.delete(data.id);
      this.generations.delete(data.id);
      if ("error" in data) waiting.reject(new Error(data.error));
      else waiting.resolve(data.result);
    };
    // The worker died (a crash in llama.cpp, a script that failed to load): every call fails,
    // and the engine forgets it, so the next call loads the model into a new one.
    worker.onerror = (event) => {
      event.preventDefault?.();
      this.failAll(worker, crashError(`the engine's worker stopped: ${event.message || "it crashed"}`));
      this.onCrash(worker);
    };
    this.worker = worker;
  }

  /** Forgets the worker; returns it (null: none). */
  detach() {
    const worker = this.worker;
    this.worker = null;
    return worker;
  }

  /** Ends `worker`, one that detach returned. */
  async close(worker) {
    // Running generations end at their next step; then the worker (and all its memory) goes.
    this.interrupt(worker);
    const running = [...this.calls.values()].map((waiting) => waiting.settled);
    await Promise.allSettled(running);
    worker.terminate();
  }

  interrupt(worker = this.worker) {
    for (const target of this.generations) worker?.postMessage({ id: 0, op: "abort", args: { target } });
  }

  failAll(worker, error) {
    if (this.worker !== worker) return;
    for (const [id, waiting] of this.calls) {
      this.calls.delete(id);
      waiting.reject(error);
    }
    this.generations.clear();
  }

  request(op, args, onEvent = null, isGeneration = false) {
    const worker = this.worker;
    if (!worker) return Promise.reject(new Error("The CPU engine has no model loaded."));
    const id = this.nextId++;
    let settle;
    const settled = new Promise((resolve) => (settle = resolve));
    const result = new Promise((resolve, reject) => {
      this.calls.set(id, {
        onEvent,
        settled,
        resolve: (value) => (settle(), resolve(value)),
        reject: (error) => (settle(), reject(error)),
      });
    });
    if (isGeneration) this.generations.add(id);
    const transfer = args?.bytes instanceof ArrayBuffer ? [args.bytes] : [];
    worker.postMessage({ id, op, args }, transfer);
    return result;
  }
}

/** A crash of llama.cpp or of its worker: the call fails, and the next one loads the model
 * into a new worker (kind "crashed": the Python side then counts the model as not loaded). */
export function crashError(raw, cause = undefined) {
  const message = `The CPU engine crashed (${raw}); the next call loads the model again.`;
  return new EngineError(/memory/i.test(raw) ? "memory" : "crashed", message, { cause });
}
