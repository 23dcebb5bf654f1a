// The options page: the user's consent lives here. Pages that may use the bridge, servers it
// may reach (each approval also asks the browser for access to that one origin, unless the
// manifest already covers it: loopback), and the activity log the service worker writes.
import {
  STORAGE_DEFAULTS,
  contentScriptBuiltIn,
  coveredByManifest,
  originPattern,
  parseOrigin,
} from "./policy.js";

const $ = (id) => document.getElementById(id);

function say(text, { error = false } = {}) {
  $("message").textContent = text;
  $("message").classList.toggle("error", error);
}

async function settings() {
  const stored = await chrome.storage.local.get(Object.keys(STORAGE_DEFAULTS));
  return { ...STORAGE_DEFAULTS, ...stored };
}

function scriptId(origin) {
  return `page-${origin.replace(/[^A-Za-z0-9]/g, "_")}`;
}

function item(text, buttonLabel, onClick) {
  const li = document.createElement("li");
  const code = Object.assign(document.createElement("code"), { textContent: text });
  const button = Object.assign(document.createElement("button"), { type: "button", textContent: "Remove" });
  button.setAttribute("aria-label", buttonLabel);
  button.addEventListener("click", onClick);
  li.append(code, button);
  return li;
}

function emptyItem(text) {
  return Object.assign(document.createElement("li"), { className: "muted", textContent: text });
}

async function render() {
  const { pageOrigins, approvedTargets } = await settings();
  $("pages").replaceChildren(
    ...(pageOrigins.length
      ? pageOrigins.map((origin) => item(origin, `Remove page ${origin}`, () => removePage(origin)))
      : [emptyItem("No page may use the bridge.")]),
  );
  $("targets").replaceChildren(
    ...(approvedTargets.length
      ? approvedTargets.map((origin) => item(origin, `Remove server ${origin}`, () => removeTarget(origin)))
      : [emptyItem("No server is approved yet.")]),
  );
}

async function renderActivity() {
  const { activity = [] } = await chrome.storage.session.get("activity");
  $("activity").tBodies[0].replaceChildren(
    ...activity.map((entry) => {
      const row = document.createElement("tr");
      const time = new Date(entry.time).toLocaleTimeString();
      for (const [text, className] of [[time], [entry.page], [entry.method], [entry.target], [entry.result, "result"]]) {
        row.append(Object.assign(document.createElement("td"), { textContent: text, className: className || "" }));
      }
      return row;
    }),
  );
}

// chrome.permissions.request needs the click's user activation: call it before other awaits.
function requestAccess(origin) {
  if (coveredByManifest(origin)) return Promise.resolve(true);
  return chrome.permissions.request({ origins: [originPattern(origin)] });
}

async function dropAccess(origin) {
  const { pageOrigins, approvedTargets } = await settings();
  if (coveredByManifest(origin) || pageOrigins.includes(origin) || approvedTargets.includes(origin)) return;
  await chrome.permissions.remove({ origins: [originPattern(origin)] }).catch(() => {});
}

async function approveTarget(event) {
  event.preventDefault();
  const parsed = parseOrigin($("target-url").value);
  if (!parsed.ok) return say(parsed.reason, { error: true });
  const { origin, kind } = parsed;
  const access = requestAccess(origin);
  try {
    if (!(await access)) return say(`The browser did not grant access to ${origin}; it was not approved.`, { error: true });
  } catch (error) {
    return say(`Could not ask for access to ${origin}: ${error.message || error}`, { error: true });
  }
  const { approvedTargets } = await settings();
  if (!approvedTargets.includes(origin)) await chrome.storage.local.set({ approvedTargets: [...approvedTargets, origin] });
  $("target-url").value = "";
  const where = kind === "public" ? "" : ` It is ${kind === "loopback" ? "on this machine" : "on your local network"}.`;
  say(`Approved ${origin}: the allowed pages may now send requests to it.${where}`);
}

async function removeTarget(origin) {
  const { approvedTargets } = await settings();
  await chrome.storage.local.set({ approvedTargets: approvedTargets.filter((o) => o !== origin) });
  await dropAccess(origin);
  say(`${origin} is no longer approved.`);
}

async function allowPage(event) {
  event.preventDefault();
  const parsed = parseOrigin($("page-origin").value);
  if (!parsed.ok) return say(parsed.reason, { error: true });
  const { origin } = parsed;
  const access = requestAccess(origin);
  try {
    if (!(await access)) return say(`The browser did not grant access to ${origin}; the page was not added.`, { error: true });
    if (!contentScriptBuiltIn(origin)) {
      const id = scriptId(origin);
      const existing = await chrome.scripting.getRegisteredContentScripts({ ids: [id] });
      if (!existing.length) {
        await chrome.scripting.registerContentScripts([
          { id, matches: [originPattern(origin)], js: ["content-script.js"], runAt: "document_start", allFrames: false },
        ]);
      }
    }
  } catch (error) {
    return say(`Could not add ${origin}: ${error.message || error}`, { error: true });
  }
  const { pageOrigins } = await settings();
  if (!pageOrigins.includes(origin)) await chrome.storage.local.set({ pageOrigins: [...pageOrigins, origin] });
  $("page-origin").value = "";
  say(`${origin} may now use the bridge (reload that page).`);
}

async function removePage(origin) {
  const { pageOrigins } = await settings();
  await chrome.storage.local.set({ pageOrigins: pageOrigins.filter((o) => o !== origin) });
  if (!contentScriptBuiltIn(origin)) {
    await chrome.scripting.unregisterContentScripts({ ids: [scriptId(origin)] }).catch(() => {});
  }
  await dropAccess(origin);
  say(`${origin} may no longer use the bridge.`);
}

$("extension-origin").textContent = location.origin;
$("target-form").addEventListener("submit", approveTarget);
$("page-form").addEventListener("submit", allowPage);
$("clear-activity").addEventListener("click", () => chrome.storage.session.set({ activity: [] }));
chrome.storage.onChanged.addListener((_changes, area) => (area === "session" ? renderActivity() : render()));
render();
renderActivity();
