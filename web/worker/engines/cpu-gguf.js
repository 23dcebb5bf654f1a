// What the CPU engine reads from a GGUF file before llama.cpp loads it: the few header keys it
// needs (readGgufHeader), and from them the chat template the model gets (chatTemplateFor):
// {source: "gguf" | "builtin" | "default", name, architecture, option, warning?}, where
// `option` is the template llama.cpp is asked for ("" for the GGUF's own).

// Architectures whose GGUFs may lack a template but are known to want llama.cpp's built-in
// one: the Gemma 3 270M GGUF we bundle has none, and ChatML (the fallback) gives garbage.
const BUILTIN_FOR_ARCHITECTURE = [[/^gemma/, "gemma"]];

// Names of llama.cpp's built-in templates, recognised in a GGUF's template by their markers;
// llama.cpp applies a GGUF's template by recognising it the same way (it has no jinja here).
const TEMPLATE_MARKERS = [
  ["<|im_start|>", "chatml"],
  ["<start_of_turn>", "gemma"],
  ["<|start_header_id|>", "llama3"],
  ["[INST]", "llama2"],
  ["<|user|>", "zephyr"],
];

/**
 * Which chat template a model gets, from its GGUF header:
 *  - the GGUF has one: llama.cpp applies it (source "gguf"; `option` "" means the model's own);
 *  - it has none and its architecture is known to need a built-in one (Gemma): that built-in
 *    (source "builtin");
 *  - otherwise ChatML, with a warning (source "default").
 */
export function chatTemplateFor({ architecture, chatTemplate }) {
  if (chatTemplate) {
    const marker = TEMPLATE_MARKERS.find(([text]) => chatTemplate.includes(text));
    return { source: "gguf", name: marker ? marker[1] : "custom", architecture, option: "" };
  }
  const builtin = BUILTIN_FOR_ARCHITECTURE.find(([pattern]) => pattern.test(architecture || ""));
  if (builtin) return { source: "builtin", name: builtin[1], architecture, option: builtin[1] };
  return unknownTemplate(architecture, `The GGUF has no chat template and its architecture (${architecture || "unknown"}) is not one we know`);
}

export function unknownTemplate(architecture, why) {
  return {
    source: "default",
    name: "chatml",
    architecture,
    option: "chatml",
    warning: `${why}: using ChatML. Replies may be poor; prefer a GGUF with a template llama.cpp knows.`,
  };
}

const GGUF_STRING = 8;
const GGUF_ARRAY = 9;
const GGUF_SCALAR_BYTES = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };

/**
 * The few header keys we need from a GGUF file (general.architecture, general.name,
 * tokenizer.chat_template), read from the start of the Blob. The template comes after the
 * vocabulary (1.8 MB into SmolLM2's file, 6.5 MB into Gemma's), so the slice read grows
 * until the key/value section fits.
 */
export async function readGgufHeader(blob) {
  for (let size = 4 << 20; ; size *= 2) {
    const bytes = new Uint8Array(await blob.slice(0, Math.min(size, blob.size)).arrayBuffer());
    const header = parseGgufHeader(bytes);
    if (header) return header;
    if (size >= blob.size) throw new Error("the file ends inside its GGUF header");
  }
}

const TRUNCATED = new Error("the GGUF header runs past the bytes read");

/** The header keys from `bytes`, or null when the key/value section runs past its end. */
function parseGgufHeader(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const decoder = new TextDecoder();
  let at = 0;
  const need = (n) => {
    if (at + n > bytes.length) throw TRUNCATED;
  };
  const u32 = () => (need(4), (at += 4), view.getUint32(at - 4, true));
  const u64 = () => (need(8), (at += 8), Number(view.getBigUint64(at - 8, true)));
  const string = () => {
    const length = u64();
    need(length);
    at += length;
    return decoder.decode(bytes.subarray(at - length, at));
  };
  const skip = (type) => {
    if (type === GGUF_STRING) return void (need(8), (at += 8 + Number(view.getBigUint64(at, true))));
    if (type === GGUF_ARRAY) {
      const itemType = u32();
      const count = u64();
      if (itemType in GGUF_SCALAR_BYTES) return void (need(count * GGUF_SCALAR_BYTES[itemType]), (at += count * GGUF_SCALAR_BYTES[itemType]));
      for (let i = 0; i < count; i++) skip(itemType);
      return;
    }
    if (!(type in GGUF_SCALAR_BYTES)) throw new Error(`unknown GGUF value type ${type}`);
    need(GGUF_SCALAR_BYTES[type]);
    at += GGUF_SCALAR_BYTES[type];
  };
  try {
    need(4);
    if (decoder.decode(bytes.subarray(0, 4)) !== "GGUF") throw new Error("not a GGUF file (bad magic)");
    at = 4;
    const version = u32();
    u64(); // tensor count
    const keys = u64();
    const wanted = { "general.architecture": "architecture", "general.name": "name", "tokenizer.chat_template": "chatTemplate" };
    const header = { version, architecture: null, name: null, chatTemplate: null };
    for (let i = 0; i < keys; i++) {
      const key = string();
      const type = u32();
      if (key in wanted && type === GGUF_STRING) header[wanted[key]] = string();
      else skip(type);
    }
    return header;
  } catch (error) {
    if (error === TRUNCATED) return null;
    throw error;
  }
}
