// The UI thread's side of the agent's tools: the agent worker asks, this host answers. Three
// tools need the page itself: `javascript_execute` runs code in the sandbox frame
// (sandbox-host.js), `fetch_page` has a page's readable text made here (page-reader.js: the
// browser's HTML parser, which workers lack), and MCP servers without CORS are reached through
// the bridge extension (extension-relay.js). Data flows one way: worker -> here -> sandbox or extension -> back to
// the worker that asked (messages: protocol.js).
import { ToUI, toWorker } from "../protocol.js";
import { ExtensionRelay } from "./extension-relay.js";
import { readablePage } from "./page-reader.js";
import { PythonSandbox } from "./python-sandbox-host.js";
import { JavaScriptSandbox } from "./sandbox-host.js";

export class ToolHost {
  #sandbox = null;
  #python = null; // made at the first python_execute
  /** The extension relay; the servers panel shows its presence. */
  relay = new ExtensionRelay();

  /**
   * Makes the sandbox frame. Called once the agent has booted, before any run can ask for it:
   * made at load, its document and scripts took the main thread for up to ~80 ms of the boot.
   */
  startSandbox() {
    this.#sandbox ??= new JavaScriptSandbox();
  }

  /** Answers one of the worker's tool messages through `send`; false for any other message. */
  onWorkerMessage(message, send) {
    switch (message.type) {
      case ToUI.SANDBOX_RUN:
        this.#runJavaScript(message, send);
        return true;
      case ToUI.PYTHON_RUN:
        this.#runPython(message, send);
        return true;
      case ToUI.PYTHON_RESET:
        this.#python?.reset();
        return true;
      case ToUI.READ_PAGE:
        readablePage(message.html, message.url).then((result) => send(toWorker.pageText(message.id, result)));
        return true;
      case ToUI.BRIDGE_REQUEST:
        this.#relayRequest(message, send);
        return true;
      case ToUI.BRIDGE_ABORT:
        this.relay.abort(message.id);
        return true;
      default:
        return false;
    }
  }

  /** The worker is being replaced: its requests end here, and so does its Python sandbox. */
  dropRequests() {
    this.relay.abortAll();
    this.#python?.reset();
  }

  async #runJavaScript({ id, code, timeoutMs, outputLimit }, send) {
    this.startSandbox();
    let result;
    try {
      result = await this.#sandbox.run(code, { timeoutMs, outputLimit });
    } catch (error) {
      result = { value: null, console: [], error: `The sandbox failed: ${error.message || error}`, timedOut: false, truncated: false };
    }
    send(toWorker.sandboxResult(id, result));
  }

  async #runPython({ id, program, timeoutMs }, send) {
    this.#python ??= new PythonSandbox();
    let result;
    try {
      result = await this.#python.run(program, { timeoutMs });
    } catch (error) {
      result = { json: null, error: `The Python sandbox failed: ${error.message || error}`, timedOut: false };
    }
    send(toWorker.pythonResult(id, result));
  }

  #relayRequest({ id, request }, send) {
    this.relay.start(id, request, {
      head: (status, headers) => send(toWorker.bridgeHead(id, status, headers)),
      chunk: (chunk) => send(toWorker.bridgeChunk(id, chunk)),
      end: () => send(toWorker.bridgeEnd(id)),
      error: (error) => send(toWorker.bridgeError(id, error)),
    });
  }
}
