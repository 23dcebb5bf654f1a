// The options page: the user's consent, as it stands, and the way to undo it. Pages that may
// use the bridge (each with the servers it may reach, and what was denied), the pause switch,
// and the activity log the service worker writes. Answers themselves are given in
// consent.html; this page only adds pages and takes permissions back.
import {
  activityEntries,
  originPattern,
  pairKey,
  parseOrigin,
  readPolicy,
  releaseAccess,
} from "./policy.js";

const $ = (id) => document.getElementById(id);

function say(text, { error = false } = {}) {
  $("message").textContent = text;
  $("message").classList.toggle("error", error);
}

function element(tag, properties = {}, children = []) {
  const node = Object.assign(document.createElement(tag), properties);
  node.append(...children);
  return node;
}

function button(text, label, onClick) {
  const node = element("button", { type: "button", textContent: text });
  node.setAttribute("aria-label", label);
  node.addEventListener("click", onClick);
  return node;
}

function serverItem(server, how, undoText, undoLabel, undo) {
  return element("li", {}, [element("code", { textContent: server }), ` ${how} `, button(undoText, undoLabel, undo)]);
}

async function render() {
  const policy = await readPolicy();
  $("paused").checked = policy.paused;
  await renderAccess(policy);
  const pages = Object.keys(policy.pages);
  if (!pages.length) {
    $("pages").replaceChildren(element("li", { className: "muted", textContent: "No page may use the bridge." }));
    return;
  }
  $("pages").replaceChildren(
    ...pages.map((page) => {
      const servers = [
        ...policy.pages[page].map((server) =>
          serverItem(server, "always", "Revoke", `Revoke ${server} for ${page}`, () => revokeAlways(page, server)),
        ),
        ...policy.once
          .filter((grant) => grant.page === page)
          .map((grant) =>
            serverItem(grant.server, "once (until its tab closes)", "Revoke", `Revoke ${grant.server} for ${page}`, () =>
              revokeOnce(page, grant.server),
            ),
          ),
        ...policy.denied
          .filter((key) => key.startsWith(`${page} `))
          .map((key) => key.slice(page.length + 1))
          .map((server) =>
            serverItem(server, "denied", "Forget", `Forget the denial of ${server} for ${page}`, () => forgetDenial(page, server)),
          ),
      ];
      return element("li", { className: "page" }, [
        element("code", { textContent: page }),
        button("Remove", `Remove page ${page}`, () => removePage(page)),
        element("ul", {}, servers.length ? servers : [element("li", { className: "muted", textContent: "No server yet: the page's first request asks you." })]),
      ]);
    }),
  );
}

// The browser's host access for what the rules list: asked for one origin at a time at consent,
// but missing after an update from 0.3 (whose manifest held every loopback port) or when taken
// back in the browser's own settings. Without it the page's content script does not run and
// requests to that server are refused, so the page offers to ask for it again.
async function renderAccess(policy) {
  const listed = [...new Set([...Object.keys(policy.pages), ...Object.values(policy.pages).flat()])];
  const held = await Promise.all(listed.map((origin) => chrome.permissions.contains({ origins: [originPattern(origin)] })));
  const missing = listed.filter((_, i) => !held[i]);
  const notice = $("access");
  notice.hidden = !missing.length;
  if (!missing.length) return notice.replaceChildren();
  notice.replaceChildren(
    `The browser gives the bridge no access to ${missing.join(", ")}, which your rules list: those pages get no bridge and requests to those servers are refused.`,
    button("Give access", `Give the bridge access to ${missing.join(", ")}`, () => giveAccess(missing)),
  );
}

function giveAccess(origins) {
  // chrome.permissions.request needs the click's user activation: nothing is awaited before it.
  chrome.permissions.request({ origins: origins.map(originPattern) }).then(
    (granted) => say(granted ? "Access given: reload the bridge's pages." : "The browser did not give access.", { error: !granted }),
    (error) => say(`Could not ask for access: ${error.message || error}`, { error: true }),
  );
}

async function shownActivity() {
  const { activity } = await chrome.storage.session.get("activity");
  const entries = activityEntries(activity);
  const page = $("activity-page").value;
  return { entries: page ? entries.filter((entry) => entry.page === page) : entries, pages: Object.keys(activity || {}) };
}

async function renderActivity() {
  const { entries, pages } = await shownActivity();
  const select = $("activity-page");
  const chosen = select.value;
  select.replaceChildren(
    element("option", { value: "", textContent: "All pages" }),
    ...pages.sort().map((page) => element("option", { value: page, textContent: page })),
  );
  select.value = pages.includes(chosen) ? chosen : "";
  $("activity").tBodies[0].replaceChildren(
    ...entries.map((entry) => {
      const cells = [new Date(entry.time).toLocaleTimeString(), entry.page, entry.method, entry.target, entry.address || "", entry.result];
      return element(
        "tr",
        { className: entry.refused ? "refused" : "" },
        cells.map((text, i) => element("td", { textContent: text, className: i === 5 ? "result" : "" })),
      );
    }),
  );
}

async function exportActivity() {
  const { entries } = await shownActivity();
  const page = $("activity-page").value;
  const blob = new Blob([JSON.stringify({ exported: new Date().toISOString(), page: page || null, entries }, null, 2)], {
    type: "application/json",
  });
  const link = element("a", { href: URL.createObjectURL(blob), download: "agent_py-bridge-activity.json" });
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
}

async function revokeAlways(page, server) {
  const { pages } = await readPolicy();
  if (page in pages) pages[page] = pages[page].filter((s) => s !== server);
  await chrome.storage.local.set({ pages });
  await revokeOnce(page, server); // nothing of that pair stays allowed
}

async function revokeOnce(page, server) {
  const { once } = await readPolicy();
  await chrome.storage.session.set({ once: once.filter((g) => !(g.page === page && g.server === server)) });
  await releaseAccess(server);
  say(`${page} may no longer reach ${server}; its requests there were stopped.`);
}

async function forgetDenial(page, server) {
  const { denied } = await readPolicy();
  await chrome.storage.session.set({ denied: denied.filter((key) => key !== pairKey(page, server)) });
  say(`The bridge will ask again when ${page} wants ${server}.`);
}

async function allowPage(event) {
  event.preventDefault();
  const parsed = parseOrigin($("page-origin").value);
  if (!parsed.ok) return say(parsed.reason, { error: true });
  const { origin } = parsed;
  // chrome.permissions.request needs the click's user activation: call it before other awaits.
  const access = chrome.permissions.request({ origins: [originPattern(origin)] });
  try {
    if (!(await access)) return say(`The browser did not grant access to ${origin}; the page was not added.`, { error: true });
  } catch (error) {
    return say(`Could not add ${origin}: ${error.message || error}`, { error: true });
  }
  const { pages } = await readPolicy();
  if (!(origin in pages)) await chrome.storage.local.set({ pages: { ...pages, [origin]: [] } });
  $("page-origin").value = "";
  say(`${origin} may now use the bridge (reload that page). It will ask you before it reaches each server.`);
}

async function removePage(origin) {
  const { pages, once, denied } = await readPolicy();
  const servers = pages[origin] || [];
  delete pages[origin];
  await chrome.storage.local.set({ pages });
  await chrome.storage.session.set({
    once: once.filter((g) => g.page !== origin),
    denied: denied.filter((key) => !key.startsWith(`${origin} `)),
  });
  for (const server of [origin, ...servers]) await releaseAccess(server);
  say(`${origin} may no longer use the bridge; its requests were stopped.`);
}

$("extension-origin").textContent = location.origin;
$("page-form").addEventListener("submit", allowPage);
$("paused").addEventListener("change", async (event) => {
  await chrome.storage.local.set({ paused: event.target.checked });
  say(event.target.checked ? "The bridge is paused: every request was stopped." : "The bridge works again.");
});
$("activity-page").addEventListener("change", renderActivity);
$("export-activity").addEventListener("click", exportActivity);
$("clear-activity").addEventListener("click", () => chrome.storage.session.set({ activity: {}, refusals: 0 }));
chrome.storage.onChanged.addListener((changes, area) => {
  if (area === "session" && "activity" in changes) renderActivity();
  if (area === "local" || (area === "session" && ("once" in changes || "denied" in changes))) render();
});
chrome.permissions.onAdded.addListener(render);
chrome.permissions.onRemoved.addListener(render);
render();
renderActivity();
