// The boot and model bars: Python's start with its packages (one bar), the model's load and the
// preparation of its prompt (the other), and what the boot found (the engine's notice, the test
// banner). It draws what the worker reports and decides nothing.
import { setStatus } from "./status-line.js";

const $ = (id) => document.getElementById(id);

/** A "progress" message; `ready`: the worker has booted (the status line then stays). */
export function showProgress({ what, progress, text }, ready) {
  if (what === "model" || what === "prefill") {
    $("model-progress-row").hidden = false;
    $("progress-model").value = progress;
    $("progress-model-text").textContent = text;
    return;
  }
  // Python start and package loading share one bar: half each.
  $("progress-python").value = what === "pyodide" ? progress / 2 : 0.5 + progress / 2;
  $("progress-python-text").textContent = text;
  if (!ready) setStatus(what === "pyodide" ? "Loading Python…" : "Loading packages…");
}

// The quiet line under the model bar once the model is prepared before a task (or why not).
export function showPrepared({ prefilled, prompt_tokens: tokens, ms, skipped, error, restored_tokens: restored, state_source: source, warning, server_models: served }) {
  $("model-progress-row").hidden = false;
  if (served) $("openai-models").replaceChildren(...served.map((id) => new Option(id, id)));
  $("progress-model").value = prefilled ? 1 : 0;
  if (error) {
    $("progress-model-text").textContent = `The model could not be prepared: ${error}`;
  } else if (skipped) {
    $("progress-model-text").textContent = `Model: ${skipped}.`;
  } else {
    const seconds = ((ms || 0) / 1000).toFixed(1);
    const how = !restored ? "prefilled" : source === "shipped" ? "restored from the state shipped with this page" : "restored from this browser's storage";
    $("progress-model-text").textContent = prefilled
      ? `Model ready: the planner's prompt${tokens ? ` (${tokens} tokens)` : ""} is ${how} (${seconds} s)${warning ? `. ${warning}` : ""}`
      : `Model loaded (${seconds} s)`;
  }
}

/** The worker is ready: the full boot bar, the test banner and why the engine was chosen. */
export function showBooted(engine, timings) {
  $("progress-python").value = 1;
  $("progress-python-text").textContent = `agent ready in ${(timings.agent_ready_ms / 1000).toFixed(1)} s`;
  if (engine.name === "scripted") {
    $("test-banner").hidden = false;
    $("test-banner").textContent = `TEST MODE: ${engine.label}`;
  }
  if (engine.reason) {
    $("engine-notice").hidden = false;
    $("engine-notice").textContent = engine.reason;
  }
}
