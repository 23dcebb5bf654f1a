// The bridge's service worker: performs HTTP requests for allowed pages, to the servers the
// user let each page reach.
//
// The messages (a runtime port per request from the content script, one-off messages for hello
// and the consent prompt) are in protocol.js.
//
// Disconnecting the port (the page went away, or it aborted) aborts the fetch; so does a change
// of the policy that no longer allows it (revoked, page removed, bridge paused).
//
// Every request is checked here, whatever the content script already checked: the page's
// origin (from the browser, not from the page) must be one the user added; the user must have
// allowed that page to reach the target (asked in consent.html the first time), and every
// redirect hop. Requests go out without cookies or other credentials, without a referrer, and
// with only the allowed headers. Each one is written to the activity log.
//
// This module (the manifest's "type": "module" service worker) wires the browser's events to
// the modules that do each job: relay.js (one request, start to end), grants.js (the consent
// prompt and the grants it records), web-request.js (redirects and addresses as webRequest saw
// them), content-scripts.js (where the content script runs; the policy closed to it),
// activity-log.js (the log and the badge), with the rules in policy.js. Each module registers
// the listeners of its own job when it loads; those shared by several jobs are here. Every
// listener is added in the worker's first turn, as MV3 requires.
import { showRefusals } from "./activity-log.js";
import { syncContentScripts, trustedStorage } from "./content-scripts.js";
import { promptOf, recordAnswer } from "./grants.js";
import { readPolicy } from "./policy.js";
import "./protocol.js";
import { cutWhatIsNoLongerAllowed, relayPort } from "./relay.js";

const { RuntimeMessage } = globalThis.agentPyBridgeProtocol;

chrome.runtime.onInstalled.addListener(async () => {
  // Version 0.1 trusted two page origins from install and shared one server list among
  // pages; nothing of that is carried over: every page and server is asked for again.
  await chrome.storage.local.remove(["pageOrigins", "approvedTargets"]);
  // Registrations outlive an update: made again, they load this version's files.
  await syncContentScripts({ again: true });
});

chrome.action.onClicked.addListener(() => chrome.runtime.openOptionsPage());

syncContentScripts();

// --- policy changes cut what they no longer allow, at once ---------------------------------------
chrome.storage.onChanged.addListener(async (changes, area) => {
  if (area === "session" && "refusals" in changes) showRefusals(changes.refusals.newValue || 0);
  if (area === "local" && "pages" in changes) syncContentScripts();
  const keys = area === "local" ? ["pages", "paused"] : area === "session" ? ["once", "denied"] : [];
  if (!keys.some((key) => key in changes)) return;
  cutWhatIsNoLongerAllowed(await readPolicy());
});

// --- one-off messages: hello from content scripts, the prompt's question and answer ---------------
chrome.runtime.onMessage.addListener((message, sender, reply) => {
  if (sender.id !== chrome.runtime.id) return false;
  const fromExtensionPage = sender.origin === self.location.origin;
  if (message?.type === RuntimeMessage.HELLO && !fromExtensionPage) {
    hello(sender).then(reply, () => reply(null));
    return true;
  }
  if (!fromExtensionPage) return false; // a content script may only say hello
  const prompt = promptOf(message?.id);
  if (message?.type === RuntimeMessage.CONSENT_QUESTION) {
    reply(prompt ? { page: prompt.page, server: prompt.server, kind: prompt.kind } : null);
  } else if (message?.type === RuntimeMessage.CONSENT_ANSWER && prompt) {
    const answer = ["once", "always", "deny", "no-permission"].includes(message.answer) ? message.answer : "deny";
    recordAnswer(prompt, answer).then(() => reply({ ok: true }), () => reply({ ok: false }));
    return true;
  }
  return false;
});

// Only pages the user added learn that the bridge exists; others get no answer at all.
async function hello(sender) {
  if (!(await trustedStorage)) return null;
  if (!sender.tab || sender.frameId !== 0) return null;
  const policy = await readPolicy();
  if (!(sender.origin in policy.pages)) return null;
  return { version: chrome.runtime.getManifest().version, allowed: !policy.paused };
}

// --- one request ----------------------------------------------------------------------------------
chrome.runtime.onConnect.addListener(relayPort);
