// The agent worker: Pyodide, agent_py and the model engine live here, off the UI thread. This
// entry makes the worker's parts and routes each of the UI's messages to one of them; the
// messages it takes and sends are in protocol.js (ToWorker, ToUI).
//
// The parts: agent.js (Python's PageSession and the engine: the boot, settings, runs), bridge.js
// (what Python calls, typed in agent_py/page/ports.py), http-port.js (MCP's HTTP) and
// user-port.js (sign-in and forms), outbox.js (messages to the UI, batched) and step-clock.js.
import { ToWorker, toUI } from "../protocol.js";
import { Agent } from "./agent.js";
import { createBridge } from "./bridge.js";
import { createHttpPort } from "./http-port.js";
import { createOutbox } from "./outbox.js";
import { createStepClock } from "./step-clock.js";
import { createUserPort } from "./user-port.js";

const outbox = createOutbox(
  (message) => self.postMessage(message),
  (events) => {
    for (const event of events) stepClock.onEvent(event.type);
  },
);
const post = outbox.post;
const stepClock = createStepClock();
const agent = new Agent(post, stepClock);
const { bridge, onSandboxResult } = createBridge({
  outbox,
  stepClock,
  engine: () => agent.engine,
  onPrefill: (usage) => {
    agent.lastPrefill = usage;
  },
});

// --- MCP servers: agent_py.mcp in Python, HTTP through http-port.js ---------------------------
// Python calls httpPort.api as the module "agent_http" (fetch, or the extension through the
// UI thread) and reports server states through bridge.mcpStatus.
const httpPort = createHttpPort(post);
const userPort = createUserPort(post); // OAuth sign-in and forms, as "agent_user"

async function handleMcpMessage(message) {
  if (httpPort.onMessage(message) || userPort.onMessage(message)) return true;
  switch (message.type) {
    case ToWorker.MCP_AUTH_RECORDS:
      agent.setAuthRecords(message.records);
      return true;
    case ToWorker.MCP_FORGET:
      await agent.forgetSignIn(message.name);
      return true;
    case ToWorker.MCP_SERVERS:
      await agent.configureServers(message.servers);
      return true;
    case ToWorker.MCP_RECONNECT:
      await agent.reconnectServer(message.name);
      return true;
    default:
      return false;
  }
}

async function handle(message) {
  if (await handleMcpMessage(message)) return;
  switch (message.type) {
    case ToWorker.BOOT:
      return agent.boot(message, { agent_bridge: bridge, agent_http: httpPort.api, agent_user: userPort.api });
    case ToWorker.CONFIGURE:
      return agent.changeSettings(message.settings);
    case ToWorker.RUN:
      return agent.run(message.question);
    case ToWorker.SESSION:
      agent.useSession(message.events);
      return;
    case ToWorker.STOP:
      agent.stop();
      return;
    case ToWorker.SCRIPT:
      agent.setScript(message.replies);
      return;
    case ToWorker.SANDBOX_RESULT:
    case ToWorker.PYTHON_RESULT:
    case ToWorker.PAGE_TEXT:
      onSandboxResult(message);
      return;
    case ToWorker.ENGINE_COUNTS:
      post(toUI.engineCounts(agent.engineCounts()));
      return;
    case ToWorker.MODELS:
      return agent.sendModels();
    case ToWorker.DELETE_MODEL:
      return agent.deleteModel(message.id);
    default:
      throw new Error(`unknown message ${message.type}`);
  }
}

self.onmessage = (event) => {
  handle(event.data).catch((error) => post(toUI.error(String(error?.message || error))));
};
