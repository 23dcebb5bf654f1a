// Where content scripts run and what they may read: the content script is registered on the
// pages the user added, and only there; the policy (which pages may reach which servers) is
// closed to every content script.
import { contentScriptId, originPattern, readPolicy } from "./policy.js";

// Content scripts must not read the policy (it says which pages may reach which servers).
// A browser that cannot close it gets no bridge at all (every request is refused).
export const trustedStorage = chrome.storage.local
  .setAccessLevel({ accessLevel: "TRUSTED_CONTEXTS" })
  .then(
    () => true,
    (error) => {
      console.error("storage.local access level:", error);
      return false;
    },
  );

// --- the content script runs only on pages the user added --------------------------------------
let scriptSync = Promise.resolve();

export function syncContentScripts({ again = false } = {}) {
  scriptSync = scriptSync
    .then(async () => {
      await trustedStorage;
      if (again) await chrome.scripting.unregisterContentScripts();
      const { pages } = await readPolicy();
      const wanted = new Map(Object.keys(pages).map((origin) => [contentScriptId(origin), origin]));
      const registered = await chrome.scripting.getRegisteredContentScripts();
      const stale = registered.map((script) => script.id).filter((id) => !wanted.has(id));
      if (stale.length) await chrome.scripting.unregisterContentScripts({ ids: stale });
      const have = new Set(registered.map((script) => script.id));
      const missing = [...wanted].filter(([id]) => !have.has(id));
      for (const [id, origin] of missing) {
        try {
          await chrome.scripting.registerContentScripts([
            { id, matches: [originPattern(origin)], js: ["protocol.js", "content-script.js"], runAt: "document_start", allFrames: false },
          ]);
        } catch (error) {
          console.warn(`content script for ${origin}:`, error); // no host access to that page
        }
      }
    })
    .catch((error) => console.warn("content scripts:", error));
  return scriptSync;
}
