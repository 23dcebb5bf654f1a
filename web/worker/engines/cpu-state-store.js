// The CPU engine's saved KV states: the state of a prefilled prompt is kept in the origin's
// Cache Storage (STATE_CACHE, the newest STATES_KEPT), so the next visit starts warm. A state
// is only for the engine build that saved it (buildId, from web/vendor/llama/build.json); its
// key is a URL under web/vendor/llama/state/ named by a hash of what it is the state of.
//
// That URL is also where set-up ships the states of the default planner prompts
// (scripts/ship_prompt_states.py, which lists them in web/vendor/llama/state/index.json): a
// listed state not in this browser's storage is fetched from there, so even a first visit
// restores the planner's prompt instead of computing it, and is then kept like a saved one.

const BUILD_URL = new URL("../../vendor/llama/build.json", import.meta.url).href;
const STATE_CACHE = "agent-py-kv-state-v1";
const STATES_KEPT = 4; // saved prompt states, newest first; each is tens of MB
const SHIPPED_URL = new URL("../../vendor/llama/state/index.json", import.meta.url).href;

let buildPromise = null;

/**
 * The id of one engine build (web/vendor/llama/build.json): saved states are only for it.
 * `key` is the worker's (cpu-worker.js): "build_id_relaxed_simd", "build_id" (threads) or
 * "build_id_single_thread".
 */
export async function buildId(key) {
  buildPromise ??= fetch(BUILD_URL)
    .then((response) => (response.ok ? response.json() : null))
    .catch(() => null);
  return (await buildPromise)?.[key] || null;
}

/** The key of the state `identity` names (a text: build, model, context window, prompt). */
export async function stateKeyFor(identity) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(identity));
  const hex = Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
  return new URL(`../../vendor/llama/state/${hex}`, import.meta.url).href;
}

/** The state under `key`: {bytes, shipped} (shipped: fetched from the page's server), or null. */
export async function readState(key) {
  try {
    const cache = await caches.open(STATE_CACHE);
    const hit = await cache.match(key);
    if (hit) return { bytes: await hit.arrayBuffer(), shipped: false };
  } catch (error) {
    console.warn(`[cpu engine] the saved model state could not be read: ${error.message}`);
  }
  return shippedState(key);
}

/** The shipped state under `key`, if set-up shipped one (its index lists the key). */
async function shippedState(key) {
  // Asked again at each miss (a prefill or two per visit): set-up may have shipped more.
  const { states = [] } = await fetch(SHIPPED_URL, { cache: "no-store" })
    .then((response) => (response.ok ? response.json() : {}))
    .catch(() => ({}));
  if (!states.includes(key.slice(key.lastIndexOf("/") + 1))) return null;
  try {
    const response = await fetch(key, { cache: "no-store" });
    return response.ok ? { bytes: await response.arrayBuffer(), shipped: true } : null;
  } catch {
    return null; // offline and never kept: computed instead
  }
}

/** Keep `bytes` under `key`, and only the newest few states. */
export async function writeState(key, bytes) {
  const cache = await caches.open(STATE_CACHE);
  await cache.delete(key);
  await cache.put(key, new Response(bytes));
  const keys = await cache.keys(); // oldest first
  for (const old of keys.slice(0, Math.max(0, keys.length - STATES_KEPT))) await cache.delete(old);
}
