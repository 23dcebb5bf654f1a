// The bridge's content script: the only way a page reaches the bridge.
//
// The service worker registers it only for the page origins the user added (exact scheme,
// host and port), in the top frame, after protocol.js (the messages: see there). It answers
// only messages the page posts to its own window, with the page's own origin, on the
// bridge's channel; each message carries a MessagePort for the answer, so nothing is
// broadcast on the window. A page the user has not added (or removed while it was open) gets
// no answer at all, the same as in a browser without the extension. The service worker
// decides everything: it sees the page's origin as the browser reports it (a page cannot
// forge it). This script cannot read the bridge's policy (storage is closed to content
// scripts).
(() => {
  const { EXTENSION_CHANNEL, ExtensionMessage, extensionMessage, PORT_NAME, RuntimeMessage, runtimeMessage } =
    globalThis.agentPyBridgeProtocol;
  const PING_MS = 15_000; // a service worker waiting on a slow server, or on the user, must not go idle
  const pageOrigin = location.origin;

  async function askHello() {
    try {
      return await chrome.runtime.sendMessage(runtimeMessage.hello());
    } catch {
      return null; // the extension was reloaded or removed under this page
    }
  }

  function relay(port, request) {
    let runtimePort;
    try {
      runtimePort = chrome.runtime.connect({ name: PORT_NAME });
    } catch {
      return; // the extension is gone: as silent as if it had never been here
    }
    let finished = false;
    const ping = setInterval(() => runtimePort.postMessage(runtimeMessage.ping()), PING_MS);
    const finish = () => {
      finished = true;
      clearInterval(ping);
    };
    runtimePort.onMessage.addListener((message) => {
      if (message.type === ExtensionMessage.ERROR && message.silent) {
        finish(); // not one of the bridge's pages: say nothing
        runtimePort.disconnect();
        return;
      }
      port.postMessage(message);
      if (message.type === ExtensionMessage.END || message.type === ExtensionMessage.ERROR) {
        finish();
        port.close();
        runtimePort.disconnect();
      }
    });
    runtimePort.onDisconnect.addListener(() => {
      if (finished) return;
      port.postMessage(extensionMessage.error({ kind: "network", message: "The agent_py bridge stopped before the answer was complete." }));
      finish();
      port.close();
    });
    port.onmessage = (event) => {
      if (event.data?.type !== ExtensionMessage.ABORT || finished) return;
      finish();
      port.close();
      runtimePort.postMessage(runtimeMessage.abort()); // not gone: it stopped reading
      runtimePort.disconnect(); // the service worker aborts the fetch
    };
    runtimePort.postMessage(runtimeMessage.fetch(request));
  }

  window.addEventListener("message", async (event) => {
    if (event.source !== window || event.origin !== pageOrigin) return;
    const data = event.data;
    if (!data || data.channel !== EXTENSION_CHANNEL || !event.ports?.length) return;
    const [port] = event.ports;
    if (data.type === ExtensionMessage.HELLO) {
      const answer = await askHello();
      if (!answer) return; // not (or no longer) one of the bridge's pages: no reply
      port.postMessage(extensionMessage.helloReply(answer.version, answer.allowed, pageOrigin));
      port.close();
    } else if (data.type === ExtensionMessage.FETCH) {
      // The service worker refuses and logs a page it does not know; the page hears nothing.
      relay(port, data.request);
    }
  });

  // A page that asked before this script ran asks again when it sees this; only pages the
  // bridge serves see it.
  askHello().then((answer) => {
    if (answer) window.postMessage(extensionMessage.ready(), pageOrigin);
  });
})();
