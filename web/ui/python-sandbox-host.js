// The page side of the Python sandbox used by the agent's `python_execute` tool.
//
//   const sandbox = new PythonSandbox();
//   const {json, error, timedOut} = await sandbox.run(program, {timeoutMs: 10_000});
//   sandbox.reset(); // the agent's run is over: its Pyodide worker ends
//
// The program runs in a Pyodide worker inside a hidden <iframe sandbox="allow-scripts"> (see
// python-sandbox.html): opaque origin, no network, a hard timeout. The frame cannot fetch
// Pyodide itself, so this module sends it Pyodide's files, read from our own server (or the
// offline copy's cache) once per page.

import { PythonSandboxMessage, pythonSandboxRun } from "../protocol.js";
import { SandboxFrame } from "./sandbox-host.js";

const FRAME_URL = new URL("../python-sandbox.html", import.meta.url);
const PYODIDE_URL = new URL("../vendor/pyodide/", import.meta.url);
const PYODIDE_FILES = ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json"];
// Beyond the code's own time: Pyodide's start in the worker (the first run of an agent run), on
// a busy machine. The frame has its own, shorter limit for the start.
const START_MARGIN_MS = 150_000;

let pyodideFiles = null; // one read per page, shared by every frame

function readPyodideFiles() {
  pyodideFiles ??= Promise.all(
    PYODIDE_FILES.map(async (name) => {
      const response = await fetch(new URL(name, PYODIDE_URL));
      if (!response.ok) throw new Error(`${name}: HTTP ${response.status}`);
      return [name, await response.arrayBuffer()];
    }),
  ).then(Object.fromEntries);
  pyodideFiles.catch(() => {
    pyodideFiles = null; // tried again at the next run
  });
  return pyodideFiles;
}

export class PythonSandbox {
  #frame = new SandboxFrame({
    url: FRAME_URL,
    title: "Python sandbox",
    onReady: (frame) => this.#sendFiles(frame),
  });
  #files = null; // the files the current frame holds: a promise of null or an error text
  #queue = Promise.resolve(); // the runs before this one: the sandbox runs one at a time

  /**
   * Runs `program` (Python source whose last expression is a string) in the sandbox's Pyodide.
   * Resolves, whatever the code does, with {json: that string or null, error, timedOut}. Runs
   * asked for together (the steps of one task) go one after another: the sandbox's one
   * Pyodide refused a second run while the first went on.
   */
  run(program, { timeoutMs = 10_000 } = {}) {
    if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 0) throw new TypeError(`timeoutMs must be a whole number >= 0, got ${timeoutMs}`);
    const turn = this.#queue.then(() => this.#run(program, timeoutMs));
    this.#queue = turn.catch(() => {});
    return turn;
  }

  async #run(program, timeoutMs) {
    // null once the frame holds Pyodide's files; else what went wrong.
    const failure = await this.#frame.ready().then(() => this.#files, (error) => {
      this.#frame.reloadIfFailed(); // the next run tries again
      return error.message;
    });
    if (failure) return { json: null, error: failure, timedOut: false };
    const answer = await this.#frame.ask(
      (id) => pythonSandboxRun(id, String(program), timeoutMs),
      timeoutMs + START_MARGIN_MS,
      { json: null, error: "The Python sandbox stopped answering; restarted.", timedOut: true },
    );
    return {
      json: typeof answer.json === "string" ? answer.json : null,
      error: answer.error == null ? null : String(answer.error),
      timedOut: answer.timedOut === true,
    };
  }

  /** Ends the sandbox's Pyodide worker (the agent's run ended, or was stopped). */
  reset() {
    this.#frame.post({ type: PythonSandboxMessage.RESET });
  }

  close() {
    this.#frame.close();
  }

  #sendFiles(frame) {
    this.#files = readPyodideFiles().then(
      (files) => {
        frame.post({ type: PythonSandboxMessage.FILES, files });
        return null;
      },
      (error) => `Python's files could not be read for the sandbox (${error.message}).`,
    );
  }
}
