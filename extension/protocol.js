// Every message the bridge sends or takes, in one place: type names, and one constructor per
// message, so a field is named once. Field names are the agent's Python names (request:
// {method, url, headers, body, timeout_ms}; a body is base64).
//
// This file is a classic script that sets `globalThis.agentPyBridgeProtocol`: the content
// script (registered as ["protocol.js", "content-script.js"]) cannot import modules, and
// the service worker and consent.js load it with `import "./protocol.js"`.
//
//   page <-> content script: the EXTENSION_* part, mirrored in the page's web/protocol.js
//       (tests/web/test_protocol.py checks they agree). The page posts to its own window, on
//       EXTENSION_CHANNEL, with a MessagePort for the answer:
//         page -> window  hello              port <- helloReply {version, allowed, origin}
//         page -> window  fetch {request}    port <- head {status, headers, url}, chunk {chunk}
//                                                    (base64, in order), then end | error {error}
//         page -> port    abort              the extension aborts the fetch
//         content script -> window  ready    it started: a page that asked too early asks again
//   content script <-> service worker: one runtime port named PORT_NAME per request:
//         -> fetch {request}, ping (keeps the service worker awake), abort (then disconnects)
//         <- head, chunk, end as above; error {error: {kind, message}, silent}
//            kind: "refused" (a rule or the user said no), "network", "timeout", "too-large";
//            silent: not one of the bridge's pages, so the content script tells it nothing
//       and one-off runtime messages:
//         content script -> hello            -> {version, allowed} for an added page, else null
//         consent.html -> consentQuestion {id}          -> {page, server, kind} or null
//         consent.html -> consentAnswer {id, answer}    answer: "once" | "always" | "deny" |
//                                                       "no-permission"
(() => {
  // --- page <-> content script (the same in web/protocol.js) -----------------------------------
  const EXTENSION_CHANNEL = "agent_py-bridge";

  const ExtensionMessage = Object.freeze({
    HELLO: "hello",
    READY: "ready",
    FETCH: "fetch",
    ABORT: "abort",
    HEAD: "head",
    CHUNK: "chunk",
    END: "end",
    ERROR: "error",
  });

  const extensionMessage = Object.freeze({
    hello: () => ({ channel: EXTENSION_CHANNEL, type: ExtensionMessage.HELLO }),
    ready: () => ({ channel: EXTENSION_CHANNEL, type: ExtensionMessage.READY }),
    fetch: (request) => ({ channel: EXTENSION_CHANNEL, type: ExtensionMessage.FETCH, request }),
    abort: () => ({ type: ExtensionMessage.ABORT }),
    helloReply: (version, allowed, origin) => ({ type: ExtensionMessage.HELLO, version, allowed, origin }),
    head: (status, headers, url) => ({ type: ExtensionMessage.HEAD, status, headers, url }),
    chunk: (chunk) => ({ type: ExtensionMessage.CHUNK, chunk }),
    end: () => ({ type: ExtensionMessage.END }),
    error: (error) => ({ type: ExtensionMessage.ERROR, error }),
  });

  // Request and response bodies cross every JSON-only channel above as base64.
  function toBase64(bytes) {
    if (typeof bytes.toBase64 === "function") return bytes.toBase64();
    let text = "";
    for (let i = 0; i < bytes.length; i += 0x8000) {
      text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    }
    return btoa(text);
  }

  function fromBase64(text) {
    if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(text);
    const binary = atob(text);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  }

  // --- inside the extension ----------------------------------------------------------------------
  const PORT_NAME = "agent_py-fetch";

  const RuntimeMessage = Object.freeze({
    HELLO: "hello",
    FETCH: "fetch",
    PING: "ping",
    ABORT: "abort",
    CONSENT_QUESTION: "consent-question",
    CONSENT_ANSWER: "consent-answer",
  });

  const runtimeMessage = Object.freeze({
    hello: () => ({ type: RuntimeMessage.HELLO }),
    fetch: (request) => ({ type: RuntimeMessage.FETCH, request }),
    ping: () => ({ type: RuntimeMessage.PING }),
    abort: () => ({ type: RuntimeMessage.ABORT }),
    /** The service worker's failure: `silent` keeps the page from hearing anything. */
    error: (error, silent) => ({ ...extensionMessage.error(error), silent }),
    consentQuestion: (id) => ({ type: RuntimeMessage.CONSENT_QUESTION, id }),
    consentAnswer: (id, answer) => ({ type: RuntimeMessage.CONSENT_ANSWER, id, answer }),
  });

  globalThis.agentPyBridgeProtocol = Object.freeze({
    EXTENSION_CHANNEL,
    ExtensionMessage,
    extensionMessage,
    toBase64,
    fromBase64,
    PORT_NAME,
    RuntimeMessage,
    runtimeMessage,
  });
})();
