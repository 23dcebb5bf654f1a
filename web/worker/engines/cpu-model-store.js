// The CPU engine's model files: a GGUF comes from our origin (web/models/<id>.gguf, fetched by
// scripts/fetch_model.py) or the URL given, and is kept in the origin's Cache Storage
// (MODEL_CACHE) so it is never downloaded again; web/ui/cpu-models.js looks there, by the same
// cache name, to say which models this browser keeps.

const MODEL_CACHE = "agent-py-gguf-v1";

export function bundledUrl(model) {
  return new URL(`../../models/${model}.gguf`, import.meta.url).href;
}

/**
 * The GGUF at `url` as a Blob, from the origin's Cache Storage when it is there, else
 * downloaded and kept there for the next visit. When the origin's storage cannot keep it (its
 * quota, or an ephemeral or private window, where Cache.put fails with "Unexpected internal
 * error"), the model is loaded uncached and that is said: {blob, kept, why}.
 * A blob: URL (a file the user picked) is read as it is. onProgress(loaded, total, note) as
 * bytes arrive; `note` says when the file is not kept.
 */
export async function fetchModel(url, onProgress) {
  const cache = url.startsWith("blob:") || typeof caches === "undefined" ? null : await caches.open(MODEL_CACHE);
  const hit = cache && (await cache.match(url));
  if (hit) {
    const blob = await hit.blob();
    onProgress(blob.size, blob.size, "");
    return { blob, kept: true, why: "" };
  }
  const first = await download(url, onProgress);
  if (!cache) return { blob: await first.blob(""), kept: false, why: "" };
  const room = await freeStorage();
  if (room !== null && first.total > room) {
    const why = `this browser keeps at most ${mb(room)} MB more for the page, and the model is ${mb(first.total)} MB`;
    console.warn(`[cpu engine] the model is loaded without being kept: ${why}`);
    return { blob: await first.blob(`not kept: ${why}`), kept: false, why };
  }
  try {
    await cache.put(url, new Response(first.body, { headers: { "content-type": "application/octet-stream" } }));
    const kept = await cache.match(url);
    if (!kept) throw new Error("the cache dropped it");
    return { blob: await kept.blob(), kept: true, why: "" };
  } catch (error) {
    await cache.delete(url).catch(() => {});
    const why = `the browser's storage refused it (${error.message})`;
    console.warn(`[cpu engine] the model is loaded without being kept: ${why}`);
    const again = await download(url, onProgress);
    return { blob: await again.blob(`not kept: ${why}`), kept: false, why };
  }
}

/** A download of `url` that reports its bytes: {total, body, blob(note)}; `note` goes with
 * the progress reports from then on. */
async function download(url, onProgress) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`HTTP ${response.status} ${response.statusText}`.trim());
  const total = Number(response.headers.get("content-length")) || 0;
  let loaded = 0;
  let note = "";
  const body = response.body.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        loaded += chunk.byteLength;
        onProgress(loaded, total, note);
        controller.enqueue(chunk);
      },
    }),
  );
  const blob = (said) => {
    note = said;
    return new Response(body).blob();
  };
  return { total, body, blob };
}

/** Bytes the origin may still store (its quota less its usage), or null when unknown. */
async function freeStorage() {
  try {
    const { quota, usage } = await navigator.storage.estimate();
    return Number.isFinite(quota) && Number.isFinite(usage) ? Math.max(0, quota - usage) : null;
  } catch {
    return null;
  }
}

export const mb = (bytes) => (bytes / 1e6).toFixed(0);
