// The CPU engine's bundled models in Settings: each with its size, licence, what it is good for,
// where it is now (kept in this browser, on the server, or still to fetch with
// scripts/fetch_model.py) and which one suits this machine. The list is web/models.json, the
// catalog scripts/fetch_model.py fetches from; "Use" puts a model's id in the CPU model field
// (saved with the other settings). UI thread only; it holds no agent logic.
import CATALOG from "../models.json" with { type: "json" };

// The CPU engine's cache of GGUF files (web/worker/engines/cpu-model-store.js, MODEL_CACHE).
const MODEL_CACHE = "agent-py-gguf-v1";

const modelUrl = (id) => new URL(`../models/${id}.gguf`, import.meta.url).href;
const mb = (bytes) => `${Math.round(bytes / 1e6)} MB`;
// The file the page serves: the model as it comes from PyPI, or as set-up rewrote it.
const servedBytes = (model) => (model.engine_format ?? model.source).bytes;

/** What this machine offers the CPU engine: cores, memory (GB, a browser's rounded hint) and
 * whether a WebGPU adapter exists (then WebLLM, not the CPU engine, runs the agent). */
export async function machine() {
  let webgpu = false;
  try {
    webgpu = Boolean(navigator.gpu && (await navigator.gpu.requestAdapter()));
  } catch {
    webgpu = false;
  }
  return {
    cores: navigator.hardwareConcurrency || 1,
    memoryGb: navigator.deviceMemory || null, // Chrome only, rounded and capped at 8
    webgpu,
  };
}

/** The catalog's model for `host`: the largest whose recommended cores and memory it has. */
export function recommendedModel(host, models = CATALOG.models) {
  const fits = models.filter(({ recommended: need }) =>
    need && host.cores >= need.min_cores && (host.memoryGb === null || host.memoryGb >= need.min_memory_gb));
  fits.sort((a, b) => b.parameters - a.parameters);
  return fits[0]?.id ?? null;
}

/** Where a model's file is: "kept" (in this browser), "served" (the page's server has it),
 * "missing" (fetch it with scripts/fetch_model.py). */
export async function modelState(id) {
  const url = modelUrl(id);
  try {
    const cache = await caches.open(MODEL_CACHE);
    if (await cache.match(url)) return "kept";
  } catch {
    // no Cache Storage here (an opaque origin): fall through to the server
  }
  try {
    const response = await fetch(url, { method: "HEAD", cache: "no-store" });
    return response.ok ? "served" : "missing";
  } catch {
    return "missing";
  }
}

const STATE_TEXT = {
  kept: "in this browser",
  served: "on the server: downloaded on first use",
  missing: "not fetched",
};

/** Draw the list into `list` (a <ul>); `field` is the CPU model input; `chosen` the id in effect. */
export async function showCpuModels(list, field, chosen) {
  const host = await machine();
  const best = recommendedModel(host);
  const rows = await Promise.all(
    CATALOG.models.map(async (model) => {
      const state = await modelState(model.id);
      const li = document.createElement("li");
      li.dataset.model = model.id;
      li.dataset.state = state;
      const title = document.createElement("strong");
      title.textContent = `${model.title} (${model.quantization})`;
      const facts = [mb(servedBytes(model)), model.licence, STATE_TEXT[state]];
      if (model.id === best) facts.push(host.webgpu ? "recommended for this machine's CPU" : "recommended for this machine");
      if (model.id === chosen) facts.push("in use");
      const detail = document.createElement("span");
      detail.className = "muted";
      detail.textContent = ` ${facts.join(" · ")}. Good for ${model.good_for}.`;
      li.append(title, detail);
      if (state === "missing") {
        const how = document.createElement("code");
        how.textContent = `python scripts/fetch_model.py --model ${model.id}`;
        li.append(" Fetch it with ", how, ".");
      }
      const use = Object.assign(document.createElement("button"), { type: "button", textContent: "Use" });
      use.setAttribute("aria-label", `Use ${model.title} as the CPU model`);
      use.disabled = model.id === field.value;
      use.onclick = () => {
        field.value = model.id;
        field.dispatchEvent(new Event("input", { bubbles: true }));
        for (const button of list.querySelectorAll("button")) button.disabled = button === use;
      };
      li.append(" ", use);
      return li;
    }),
  );
  const note = document.createElement("li");
  note.className = "muted";
  note.textContent = `This machine: ${host.cores} cores${host.memoryGb ? `, about ${host.memoryGb} GB of memory` : ""}` +
    (host.webgpu ? ", and a WebGPU adapter: WebLLM runs the agent there, the CPU engine is the fallback." : ", no WebGPU adapter: the CPU engine runs the agent.");
  list.replaceChildren(...rows, note);
  return { host, recommended: best };
}
