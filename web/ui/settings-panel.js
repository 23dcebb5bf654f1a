// The Settings panel: its form and the list of cached models. The form's fields are named after
// the settings (PageSettings); what they show is what Python says is in effect. Saving keeps
// what the user changed in this browser and sends it to the worker, or restarts the worker when
// an engine setting changed.
import { toWorker } from "../protocol.js";
import { showCpuModels } from "./cpu-models.js";

// What the user changed in Settings, kept in this browser; every default, and every setting
// in effect, comes from Python (agent_py/page/settings.py, PageSettings) in "ready" and "settings".
const SETTINGS_KEY = "agent_py.settings";

const $ = (id) => document.getElementById(id);

function loadUserSettings() {
  try {
    const stored = JSON.parse(localStorage.getItem(SETTINGS_KEY) || "{}");
    return stored && typeof stored === "object" && !Array.isArray(stored) ? stored : {};
  } catch {
    return {};
  }
}

function settingsFields() {
  return [...$("settings-form").elements].filter((field) => field.name);
}

export class SettingsPanel {
  /** What the user changed, as kept in this browser: each worker boots with it. */
  userSettings = loadUserSettings();
  /** {values, defaults, engine_fields, profile}, from the worker (null before it started). */
  info = null;
  #link;
  #prebuilt;
  #isRunning;
  #restart;

  /**
   * @param {object} parts
   * @param {import("./agent-link.js").AgentLink} parts.link
   * @param {() => string[] | undefined} parts.prebuilt  WebLLM's prebuilt models, once listed
   * @param {() => boolean} parts.isRunning  whether a task runs (an engine change then waits)
   * @param {() => void} parts.restart  replaces the worker by one booted with the new settings
   */
  constructor({ link, prebuilt, isRunning, restart }) {
    this.#link = link;
    this.#prebuilt = prebuilt;
    this.#isRunning = isRunning;
    this.#restart = restart;
  }

  show(info) {
    this.info = info;
    const { values } = info;
    const models = [...new Set([values.model, info.defaults.model, ...(this.#prebuilt() || [])])];
    $("setting-model").replaceChildren(...models.map((id) => new Option(id, id, false, id === values.model)));
    for (const field of settingsFields()) {
      if (field.type === "checkbox") field.checked = Boolean(values[field.name]);
      else field.value = values[field.name] ?? "";
    }
    $("save-settings").disabled = false;
    $("refresh-models").disabled = false; // the worker knows the model settings now
    showCpuModels($("cpu-models"), $("setting-cpu-model"), values.cpu_model).catch((error) =>
      console.warn("the CPU models could not be listed:", error));
  }

  /** What the CPU engine does with its threads setting (the engine's `threads`, from "ready";
   * absent: another engine runs). A setting above `most` is clamped by the engine. */
  showThreads(threads) {
    if (!threads) return;
    const { automatic, most, cores, isolated } = threads;
    const field = $("setting-cpu-threads");
    field.placeholder = `automatic: ${automatic} of ${cores} cores`;
    field.max = String(most);
    const left = automatic < cores ? " (one is left for the page and the agent)" : "";
    $("cpu-threads-hint").textContent = isolated
      ? `0 is automatic: ${automatic} of the ${cores} cores this browser reports${left}; at most ${most}.`
      : "This page is not cross-origin isolated (no COOP/COEP headers): the CPU engine runs on one thread.";
  }

  #formValue(field) {
    if (field.type === "checkbox") return field.checked;
    if (field.type === "number") return field.value === "" ? this.info.defaults[field.name] : Number(field.value);
    return field.value.trim();
  }

  save(event) {
    event.preventDefault();
    if (!this.info) return; // the button is enabled once the worker sent them
    const { values: before, defaults, engine_fields: engineFields } = this.info;
    const wanted = { ...before };
    for (const field of settingsFields()) wanted[field.name] = this.#formValue(field);
    // Only what differs from the defaults is kept, so a changed default reaches this user too;
    // settings the form does not show (set by tests and scripts) stay as they were.
    const kept = { ...this.userSettings };
    for (const key of Object.keys(kept)) if (!(key in before)) delete kept[key]; // an old name
    for (const field of settingsFields()) {
      if (wanted[field.name] === defaults[field.name]) delete kept[field.name];
      else kept[field.name] = wanted[field.name];
    }
    this.userSettings = kept;
    localStorage.setItem(SETTINGS_KEY, JSON.stringify(this.userSettings));
    const restart = engineFields.some((key) => before[key] !== wanted[key]);
    if (restart && !this.#isRunning()) {
      $("settings-saved").textContent = "Saved. Restarting the agent with the new engine settings…";
      this.#restart();
      return;
    }
    $("settings-saved").textContent = restart
      ? "Saved. Engine changes apply when this run ends and the page is reloaded."
      : "Saved. Model changes apply from the next run.";
    if (this.#link.ready) this.#link.post(toWorker.configure(this.userSettings));
  }

  showCachedModels(cached) {
    const list = $("cached-models");
    if (!cached.length) {
      list.replaceChildren(Object.assign(document.createElement("li"), { className: "muted", textContent: "No model is cached." }));
      return;
    }
    list.replaceChildren(
      ...cached.map((id) => {
        const li = document.createElement("li");
        const remove = Object.assign(document.createElement("button"), { type: "button", textContent: "Delete" });
        remove.setAttribute("aria-label", `Delete cached model ${id}`);
        remove.onclick = () => this.#link.post(toWorker.deleteModel(id));
        li.append(`${id} `, remove);
        return li;
      }),
    );
  }
}
