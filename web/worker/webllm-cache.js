// WebLLM's cached models, for the settings in effect: whether the model is cached (a first
// download waits for the user's Run), the list Settings shows, and deleting one. Each function
// takes `settings`, which returns the settings in effect now (null while the worker boots).
import { toUI } from "../protocol.js";

// WebLLM's app config for the settings: a self-hosted model is looked up in it, not in the
// prebuilt list (WebLLM's cache functions default to that).
async function webllmConfig(settings) {
  const { appConfigFor } = await import("./engines/webllm.js");
  const settingsNow = settings();
  try {
    return appConfigFor(settingsNow.model, { modelUrl: settingsNow.model_url, modelLibUrl: settingsNow.model_lib_url });
  } catch {
    return appConfigFor(settingsNow.model); // no library URL for it: the prebuilt records only
  }
}

export async function webllmModelCached(settings) {
  const { cachedModels } = await import("./engines/webllm.js");
  try {
    return (await cachedModels(await webllmConfig(settings))).includes(settings().model);
  } catch {
    return false;
  }
}

/** Posts WebLLM's prebuilt models and those cached ("models"). */
export async function sendModels(settings, post) {
  if (!settings()) {
    post(toUI.error("The agent is still starting: check the cached models once it is ready."));
    return;
  }
  const { PREBUILT_MODELS, cachedModels } = await import("./engines/webllm.js");
  post(toUI.models(PREBUILT_MODELS, await cachedModels(await webllmConfig(settings))));
}

export async function deleteModel(id, settings) {
  const { deleteCachedModel } = await import("./engines/webllm.js");
  await deleteCachedModel(id, await webllmConfig(settings));
}
