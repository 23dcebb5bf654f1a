// The user's grants, pair by pair (a page origin, a server origin): asked for in the consent
// window (consent.html) the first time a page wants a server, recorded as the answer says
// (always, once for that tab, deny), and "once" ended with its tab. The rules that read them
// are policy.js's; every change goes through changePolicy, one at a time.
import { LIMITS, consentState, pairKey, releaseAccess } from "./policy.js";
import { Refusal } from "./refusal.js";

let policyWrites = Promise.resolve();

function changePolicy(change) {
  policyWrites = policyWrites.then(change).catch((error) => console.warn("policy:", error));
  return policyWrites;
}

chrome.tabs.onRemoved.addListener((tabId) => {
  // "Allow once" ends with its tab.
  changePolicy(async () => {
    const { once = [] } = await chrome.storage.session.get("once");
    const kept = once.filter((grant) => grant.tabId !== tabId);
    if (kept.length === once.length) return;
    await chrome.storage.session.set({ once: kept });
    for (const grant of once) if (grant.tabId === tabId) await releaseAccess(grant.server);
  });
});

// --- the consent prompt ------------------------------------------------------------------------
const prompts = new Map(); // id -> {id, page, server, kind, tabId, windowId, waiters}

/** The open question `id` ({page, server, kind, …}), or undefined. */
export function promptOf(id) {
  return prompts.get(id);
}

async function askUser(page, server, kind, tabId, signal) {
  let prompt = [...prompts.values()].find((p) => p.page === page && p.server === server && p.tabId === tabId);
  if (!prompt) {
    if (prompts.size >= LIMITS.maxOpenPrompts) {
      throw new Refusal(`${LIMITS.maxOpenPrompts} questions of the bridge are already waiting for an answer; answer them first.`);
    }
    prompt = { id: crypto.randomUUID(), page, server, kind, tabId, windowId: null, waiters: new Set() };
    prompts.set(prompt.id, prompt);
    try {
      const window = await chrome.windows.create({
        url: `consent.html?id=${prompt.id}`,
        type: "popup",
        width: 560,
        height: 340,
        focused: true,
      });
      prompt.windowId = window.id;
    } catch (error) {
      prompts.delete(prompt.id);
      throw new Refusal(`The bridge could not open its question window (${error.message || error}).`);
    }
  }
  if (signal.aborted) return "aborted";
  return new Promise((resolve) => {
    const done = (answer) => {
      clearTimeout(timer);
      signal.removeEventListener("abort", stop);
      prompt.waiters.delete(done);
      resolve(answer);
    };
    const stop = () => done("aborted");
    const timer = setTimeout(() => done("timeout"), LIMITS.consentWaitMs);
    signal.addEventListener("abort", stop);
    prompt.waiters.add(done);
  });
}

function settle(prompt, answer) {
  prompts.delete(prompt.id);
  for (const done of [...prompt.waiters]) done(answer);
}

chrome.windows.onRemoved.addListener((windowId) => {
  for (const prompt of [...prompts.values()]) if (prompt.windowId === windowId) settle(prompt, "dismissed");
});

/** Records the answer to an open question (consent.html), then lets its requests go on or not. */
export async function recordAnswer(prompt, answer) {
  const { page, server, tabId } = prompt;
  await changePolicy(async () => {
    if (answer === "always") {
      const { pages = {} } = await chrome.storage.local.get("pages");
      if (!(page in pages)) return; // removed while the question was open
      if (!pages[page].includes(server)) pages[page] = [...pages[page], server];
      await chrome.storage.local.set({ pages });
    } else if (answer === "once") {
      const { once = [] } = await chrome.storage.session.get("once");
      await chrome.storage.session.set({ once: [...once, { page, server, tabId }] });
    } else if (answer === "deny") {
      const { denied = [] } = await chrome.storage.session.get("denied");
      if (!denied.includes(pairKey(page, server))) await chrome.storage.session.set({ denied: [...denied, pairKey(page, server)] });
    }
  });
  settle(prompt, answer);
}

/** Resolves when `page` may reach `server` (asking the user if need be); throws a Refusal, or
 * an AbortError when `signal` ends the wait. */
export async function consent(policy, page, server, kind, tabId, signal) {
  const state = consentState(policy, page, server, tabId);
  if (state === "always" || state === "once") return;
  const undo = `Open the bridge's options to change that (under ${page}).`;
  if (state === "denied") throw new Refusal(`You did not allow ${page} to reach ${server}. ${undo}`);
  const answer = await askUser(page, server, kind, tabId, signal);
  if (answer === "always" || answer === "once") return;
  if (answer === "aborted") throw new DOMException("aborted", "AbortError");
  const why = {
    deny: `You did not allow ${page} to reach ${server}. ${undo}`,
    "no-permission": `The browser did not grant the bridge access to ${server}; nothing was sent.`,
    dismissed: `The bridge's question about ${server} was closed without an answer; nothing was sent.`,
    timeout: `Nobody answered the bridge's question about ${server} within ${LIMITS.consentWaitMs / 1000} s; nothing was sent.`,
  };
  throw new Refusal(why[answer] || `Not allowed: ${answer}.`);
}
