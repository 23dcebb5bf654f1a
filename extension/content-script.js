// The bridge's content script: the only way a page reaches the bridge.
//
// It runs in the top frame of http://127.0.0.1 and http://localhost pages (any port), and of
// other page origins the user allowed in the options. It answers only messages the page
// posts to its own window, with the page's own origin, on the channel "agent_py-bridge";
// each message carries a MessagePort for the answer, so nothing is broadcast on the window:
//   page -> here  {channel, type: "hello"}             port <- {type: "hello", version, allowed, origin}
//   page -> here  {channel, type: "fetch", request}    port <- the service worker's messages:
//                                                      head, chunk, end, error (service-worker.js)
//   page -> port  {type: "abort"}                      stops the request
// The service worker decides: it checks the page's origin as the browser reports it (a page
// cannot forge it), so this script only tells a page whether it is allowed ("hello").
(() => {
  const CHANNEL = "agent_py-bridge";
  const PORT_NAME = "agent_py-fetch";
  const PING_MS = 15_000; // a service worker waiting on a slow server must not go idle
  const pageOrigin = location.origin;
  const version = chrome.runtime.getManifest().version;

  async function pageAllowed() {
    try {
      const { pageOrigins = [] } = await chrome.storage.local.get("pageOrigins");
      return pageOrigins.includes(pageOrigin);
    } catch {
      return false; // the extension was reloaded or removed under this page
    }
  }

  function refuse(port, kind, message) {
    port.postMessage({ type: "error", error: { kind, message } });
    port.close();
  }

  function relay(port, request) {
    let runtimePort;
    try {
      runtimePort = chrome.runtime.connect({ name: PORT_NAME });
    } catch {
      refuse(port, "no-bridge", "The agent_py bridge extension was reloaded or removed; reload this page.");
      return;
    }
    let finished = false;
    const ping = setInterval(() => runtimePort.postMessage({ type: "ping" }), PING_MS);
    const finish = () => {
      finished = true;
      clearInterval(ping);
      port.close();
    };
    runtimePort.onMessage.addListener((message) => {
      port.postMessage(message);
      if (message.type === "end" || message.type === "error") {
        finish();
        runtimePort.disconnect();
      }
    });
    runtimePort.onDisconnect.addListener(() => {
      if (finished) return;
      port.postMessage({ type: "error", error: { kind: "network", message: "The agent_py bridge stopped before the answer was complete." } });
      finish();
    });
    port.onmessage = (event) => {
      if (event.data?.type !== "abort" || finished) return;
      finish();
      runtimePort.postMessage({ type: "abort" }); // not gone: it stopped reading
      runtimePort.disconnect(); // the service worker aborts the fetch
    };
    runtimePort.postMessage({ type: "fetch", request });
  }

  window.addEventListener("message", async (event) => {
    if (event.source !== window || event.origin !== pageOrigin) return;
    const data = event.data;
    if (!data || data.channel !== CHANNEL || !event.ports?.length) return;
    const [port] = event.ports;
    if (data.type === "hello") {
      port.postMessage({ type: "hello", version, allowed: await pageAllowed(), origin: pageOrigin });
      port.close();
    } else if (data.type === "fetch") {
      // Even for a page that is not allowed: the service worker refuses it and logs the
      // attempt, so the user sees it in the options page.
      relay(port, data.request);
    }
  });

  // A page that asked before this script ran asks again when it sees this.
  window.postMessage({ channel: CHANNEL, type: "ready" }, pageOrigin);
})();
