// The activity log (storage.session: in memory only, gone when the browser closes): one entry
// per request, shown in the options page, and the badge counting refusals since the log was
// cleared.
import { addActivity } from "./policy.js";

let logWrites = Promise.resolve();

export function logActivity(entry) {
  logWrites = logWrites
    .then(async () => {
      const { activity = {}, refusals = 0 } = await chrome.storage.session.get(["activity", "refusals"]);
      const update = { activity: addActivity(activity, entry) };
      if (entry.refused) update.refusals = refusals + 1;
      await chrome.storage.session.set(update);
    })
    .catch((error) => console.warn("activity log:", error));
}

export function showRefusals(count) {
  chrome.action.setBadgeBackgroundColor({ color: "#b42318" }).catch(() => {});
  chrome.action.setBadgeText({ text: count ? String(count) : "" }).catch(() => {});
  chrome.action.setTitle({ title: count ? `agent_py bridge: ${count} refused since the log was cleared` : "agent_py bridge: open the options" }).catch(() => {});
}
chrome.storage.session.get("refusals").then(({ refusals = 0 }) => showRefusals(refusals));

// Where a request went when it was not given: origin and path, never the query string (which
// may hold a key).
export function shortTarget(url) {
  try {
    const parsed = new URL(url);
    return parsed.origin + parsed.pathname;
  } catch {
    return String(url).slice(0, 200);
  }
}
