// The consent prompt: the extension's own window, opened by the service worker the first time
// a page asks for a server. The web page cannot see or click it. The answer goes back to the
// service worker, which records it (see policy.js) and lets the waiting request go on or not.
import { originPattern } from "./policy.js";
import "./protocol.js";

const { runtimeMessage } = globalThis.agentPyBridgeProtocol;

const $ = (id) => document.getElementById(id);
const id = new URLSearchParams(location.search).get("id");

function ask(message) {
  return chrome.runtime.sendMessage(message);
}

const question = await ask(runtimeMessage.consentQuestion(id));
if (!question) {
  $("question").textContent = "This question was already answered or has expired.";
} else {
  const { page, server, kind } = question;
  $("question").textContent = `Allow ${page} to reach ${server} through the bridge?`;
  const where = { loopback: "on this machine", private: "on a private network", "link-local": "at a link-local address", public: "on the internet" }[kind];
  $("detail").textContent = `The server is ${where}. The page will be able to send it requests (no cookies) and read its answers.`;
  $("answers").hidden = false;
  for (const button of document.querySelectorAll("[data-answer]")) {
    button.addEventListener("click", async () => {
      let answer = button.dataset.answer;
      if (answer !== "deny") {
        // The bridge holds host access only to servers allowed somewhere: the browser is asked
        // for this one now. Needs this click's user activation: before anything else is awaited.
        const granted = await chrome.permissions.request({ origins: [originPattern(server)] }).catch(() => false);
        if (!granted) answer = "no-permission";
      }
      await ask(runtimeMessage.consentAnswer(id, answer));
      window.close();
    });
  }
}
