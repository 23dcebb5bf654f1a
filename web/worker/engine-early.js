// The engine started while Python starts. The CPU engine's settings are Python's (defaults
// included), known only once Python runs, a second or two after the boot begins. What the last
// boot resolved from the same user settings is kept in Cache Storage, so the next boot starts
// that engine and loads its model meanwhile; once Python's settings are known, an engine made
// with others is dropped (agent.js decides, with sameEngineSettings).
import { chooseEngine } from "./engines/gpu.js";
import { createCpuEngine } from "./engine-choice.js";

const BOOT_CACHE = "agent-py-boot-v1"; // not "agent_py-": the service worker clears its old caches by that prefix
const LAST_ENGINE = new URL("./last-engine.json", import.meta.url).href;
const ENGINE_SETTINGS = ["engine", "cpu_model", "cpu_threads", "cpu_seed", "cpu_temperature", "context_window"];

// The user's settings as a digest: they may hold a model server's API key, kept only where the
// UI keeps it.
async function bootKey(settings, override) {
  const text = new TextEncoder().encode(JSON.stringify({ settings, override: override || null }));
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", text));
  return Array.from(digest, (byte) => byte.toString(16).padStart(2, "0")).join("");
}
const engineSettings = (settings) => Object.fromEntries(ENGINE_SETTINGS.map((name) => [name, settings[name] ?? null]));
export const sameEngineSettings = (a, b) => JSON.stringify(engineSettings(a)) === JSON.stringify(engineSettings(b));

/** The CPU engine of the last boot with these user settings, its model loading; else null. */
export async function startEngineEarly(settings, override, gpuFound, sinceBoot, post) {
  try {
    if (typeof caches === "undefined") return null;
    const stored = await (await caches.open(BOOT_CACHE)).match(LAST_ENGINE);
    const record = stored ? await stored.json() : null;
    if (!record || record.key !== (await bootKey(settings, override))) return null;
    const gpu = await gpuFound;
    if (chooseEngine(record.choice, gpu) !== "cpu") return null; // WebLLM checks its cache first
    const created = await createCpuEngine(gpu, record.settings, record.choice === "auto", post);
    if (!created.info.usable) return null;
    created.engine.preload(record.settings.cpu_model);
    return { choice: record.choice, settings: record.settings, created, at_ms: sinceBoot() };
  } catch (error) {
    console.warn(`[agent_py] the engine could not start early: ${error.message || error}`);
    return null;
  }
}

export async function rememberEngine(settings, override, choice, settingsNow) {
  if (typeof caches === "undefined") return;
  try {
    const record = { key: await bootKey(settings, override), choice, settings: engineSettings(settingsNow) };
    const cache = await caches.open(BOOT_CACHE);
    await cache.put(LAST_ENGINE, new Response(JSON.stringify(record), { headers: { "content-type": "application/json" } }));
  } catch (error) {
    console.warn(`[agent_py] the engine's settings could not be kept: ${error.message || error}`);
  }
}
