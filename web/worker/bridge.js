// What Python calls (agent_py/page/ports.py, Bridge), registered as the Pyodide module
// "agent_bridge": the engine (engine-port.js), the sandbox runs and page readings the UI thread performs, the
// agent's events and an engine's streamed text on their way to the UI (outbox.js), the MCP
// servers' states, and the user's workspace (workspace.js). Every method resolves to a JSON string and never rejects.
import { toUI } from "../protocol.js";
import { createEnginePort } from "./engine-port.js";
import { createWorkspacePort } from "../workspace.js";

/**
 * @param {object} parts
 * @param {ReturnType<import("./outbox.js").createOutbox>} parts.outbox
 * @param {ReturnType<import("./step-clock.js").createStepClock>} parts.stepClock
 * @param {() => object} parts.engine  the worker's engine now
 * @param {(usage: object) => void} parts.onPrefill  the usage of each prefill of the engine
 * @returns {{bridge: object, onSandboxResult: (message: object) => void}}  the module, and
 *   where the UI thread's answers to its sandbox runs go
 */
export function createBridge({ outbox, stepClock, engine, onPrefill }) {
  const post = outbox.post;
  const pendingSandbox = new Map();
  let nextSandboxId = 1;

  const bridge = {
    ...createEnginePort(engine, outbox, stepClock, onPrefill),
    ...createWorkspacePort(),
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
    /** A fetched page's readable text, made on the UI thread (DOMParser and Readability are
     * not in workers): {ok, title, text} or {ok: false, error}. */
    readPage(html, url) {
      const id = nextSandboxId++;
      return new Promise((resolve) => {
        pendingSandbox.set(id, resolve);
        post(toUI.readPage(id, html, url));
      });
    },
    /** Whether the browser thinks it is online (false: offline for sure). */
    online() {
      return JSON.stringify({ ok: true, online: navigator.onLine });
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
    // MCP servers' states, as agent_py.mcp reports them (their HTTP goes through http-port.js).
    mcpStatus(statusJson) {
      post(toUI.mcpStatus(JSON.parse(statusJson)));
    },
  };

  /** A sandbox run's result (sandbox-result, python-result) or a page's text (page-text) for
   * the call that asked. */
  function onSandboxResult(message) {
    const resolve = pendingSandbox.get(message.id);
    pendingSandbox.delete(message.id);
    resolve?.(JSON.stringify(message.result));
  }

  return { bridge, onSandboxResult };
}
