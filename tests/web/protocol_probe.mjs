// For tests/web/test_protocol.py: loads web/protocol.js (argv[2], a file URL) as a module and
// extension/protocol.js (argv[3], a path) as the classic script the content script runs, and
// prints what each defines and builds. Each side builds every page <-> extension message from
// the same arguments, and round-trips bytes through its base64 helpers (every byte value, and
// more than one 0x8000 slice).
import { readFileSync } from "node:fs";
import vm from "node:vm";

const page = await import(process.argv[2]);
const context = vm.createContext({ btoa, atob });
vm.runInContext(readFileSync(process.argv[3], "utf8"), context);
const extension = context.agentPyBridgeProtocol;

const bytes = Uint8Array.from({ length: 70000 }, (_, i) => (i * 7919) % 256);
const request = { method: "POST", url: "http://127.0.0.1:1/mcp", headers: { a: "b" }, body: "e30=", timeout_ms: 5 };
const args = {
  hello: [], ready: [], fetch: [request], abort: [], helloReply: ["0.3.0", true, "http://127.0.0.1:2"],
  head: [200, { "content-type": "text/event-stream" }, "http://127.0.0.1:1/mcp"],
  chunk: ["AAEC"], end: [], error: [{ kind: "refused", message: "no" }],
};
function report(side, FromBytes) {
  const made = {};
  for (const [name, make] of Object.entries(side.extensionMessage)) made[name] = make(...(args[name] ?? []));
  const encoded = side.toBase64(bytes);
  const decoded = FromBytes.from(side.fromBase64(encoded));
  return {
    channel: side.EXTENSION_CHANNEL,
    types: { ...side.ExtensionMessage },
    made: JSON.parse(JSON.stringify(made)),
    base64: { encoded, roundTrip: decoded.length === bytes.length && decoded.every((b, i) => b === bytes[i]) },
    sources: [side.toBase64, side.fromBase64].map((f) => String(f).split("\n").map((l) => l.trim()).join("\n")),
  };
}
// The fields `make` reads of the object it is given.
function fieldsRead(make) {
  const read = new Set();
  make(new Proxy({}, { get: (_, key) => (typeof key === "string" && read.add(key), undefined) }));
  return [...read];
}
const sandboxResult = page.toWorker.sandboxResult(1, { value: 1, console: [], error: null, timedOut: false, truncated: false });
const bridgeRequest = page.toUI.bridgeRequest(1, request);
console.log(JSON.stringify({
  page: report(page, Uint8Array),
  extension: report(extension, Uint8Array),
  pageOnly: {
    toWorker: { ...page.ToWorker },
    toUI: { ...page.ToUI },
    sandbox: { ...page.SandboxMessage },
    pythonSandbox: { ...page.PythonSandboxMessage },
    pythonRunFields: Object.keys(page.pythonSandboxRun(1, "", 1)),
    pythonAnswerFields: fieldsRead((answer) => page.toWorker.pythonResult(1, answer)),
    serviceWorker: { ...page.ServiceWorkerMessage },
    oauth: [page.OAUTH_CHANNEL, page.OAUTH_CALLBACK],
    sandboxResult: Object.keys(sandboxResult.result),
    sandboxRunFields: Object.keys(page.sandboxRun(1, "", 1, 1)),
    sandboxAnswerFields: fieldsRead((answer) => page.toWorker.sandboxResult(1, answer)),
    cacheExtraFields: Object.keys(page.cacheExtra([])),
    bridgeRequest: Object.keys(bridgeRequest.request),
  },
  extensionOnly: { port: extension.PORT_NAME, runtime: { ...extension.RuntimeMessage } },
}));
