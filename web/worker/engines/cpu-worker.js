// The CPU engine's own worker (a classic one: emscripten's pthread build loads its threads with
// importScripts). It hosts llama.cpp compiled to WebAssembly by scripts/cpu_engine/build.sh
// (web/vendor/llama/) and runs one model: a pthread build on a cross-origin isolated page
// (threads need SharedArrayBuffer), the one with relaxed SIMD where the browser runs it right,
// otherwise the build without threads. A `build` parameter in the worker's URL picks one ("relaxed",
// "threads", "single": the tests and benches use it), and a `dot` parameter the relaxed build's
// dot product ("i16" or "i32"; left out, llama.cpp takes the faster for this CPU, and the floats are
// the same: scripts/cpu_engine/patch_llama.py). web/worker/engines/cpu-rpc.js talks to it:
//   engine -> worker  {id, op, args}
//     op "load"     args {blob, name, contextWindow, threads, batch}  -> model info, with
//                   `build`: which build runs, the key of its id in build.json, and
//                   `dot_form`: "i16", "i32" or "simd128"
//     op "format"   args {messages, template}                        -> prompt text
//     op "generate" args {prompt, params, batch}                       -> summary (below)
//     op "abort"    args {target}: the generation with that id ends at its next step
//     op "save"     -> ArrayBuffer of the cached sequence (tokens and KV state), transferred
//     op "restore"  args {bytes} -> number of tokens restored
//     op "tokenize" args {text}   -> token count
//   worker -> engine {id, result} | {id, error} | {id, event: "progress", done, total, cached}
//                    | {id, event: "token", text}
// A generation is driven one step at a time (a batch of the prompt, then one token), with a
// turn of the event loop in between, so an abort message is read within one step.
"use strict";

const VENDOR = new URL("../../vendor/llama/", self.location.href).href;
// The scripts define the same factory, createAgentLlama; `build` names the id in build.json.
const BUILDS = {
  relaxed: { script: "agent-llama-rs.js", build: "build_id_relaxed_simd" },
  threads: { script: "agent-llama.js", build: "build_id" },
  single: { script: "agent-llama-st.js", build: "build_id_single_thread" },
};
// A module whose function f returns lane 0 of relaxed SIMD's
// i32x4.relaxed_dot_i8x16_i7x16_add_s([-1, -2, -3, -4, 0...], [1, 2, 3, 4, 0...], 0): -30. The
// relaxed build's kernel uses that instruction, with signed activations in the first operand.
// Validating is not enough: V8's baseline compiler got it wrong before it shipped (Node 20 with
// --experimental-wasm-relaxed-simd returns -60 until the function is optimized), and a first
// call runs in that compiler, so the check runs it.
const RELAXED_DOT_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, // magic, version
  1, 5, 1, 96, 0, 1, 127, // type: () -> i32
  3, 2, 1, 0, // one function of that type
  7, 5, 1, 1, 102, 0, 0, // exported as "f"
  10, 64, 1, 62, 0, // its code: 62 bytes, no locals
  253, 12, 255, 254, 253, 252, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // v128.const a
  253, 12, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // v128.const b
  253, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // v128.const 0
  253, 147, 2, // i32x4.relaxed_dot_i8x16_i7x16_add_s
  253, 27, 0, 11, // i32x4.extract_lane 0; end
]);
function relaxedDotWorks() {
  try {
    return new WebAssembly.Instance(new WebAssembly.Module(RELAXED_DOT_PROBE)).exports.f() === -30;
  } catch {
    return false; // no relaxed SIMD here
  }
}
function chooseBuild() {
  const asked = new URL(self.location.href).searchParams.get("build");
  if (asked) {
    if (!Object.hasOwn(BUILDS, asked)) throw new Error(`unknown CPU engine build "${asked}" (relaxed, threads or single)`);
    return BUILDS[asked];
  }
  if (!self.crossOriginIsolated) return BUILDS.single;
  return relaxedDotWorks() ? BUILDS.relaxed : BUILDS.threads;
}
const BUILD = chooseBuild();
const DOT_FORMS = { i32: 0, i16: 1 };
const DOT = (() => {
  const asked = new URL(self.location.href).searchParams.get("dot");
  if (asked && !Object.hasOwn(DOT_FORMS, asked)) throw new Error(`unknown dot product form "${asked}" (i16 or i32)`);
  return asked ? DOT_FORMS[asked] : -1;
})();
let module = null;
let api = null;
const aborted = new Set();

importScripts(VENDOR + BUILD.script, new URL("./cpu-api.js", self.location.href).href);

// Started as soon as the worker runs: the wasm compiles and the thread pool starts while the
// engine fetches the model's file.
let starting = null;
function ensureModule() {
  starting ??= createAgentLlama({
    locateFile: (file) => VENDOR + file,
    // The pthread workers load the same script: give them its absolute URL.
    mainScriptUrlOrBlob: VENDOR + BUILD.script,
    print: () => {},
    printErr: (text) => console.warn(`[llama.cpp] ${text}`),
  }).then((made) => {
    module = made;
    api = bindLlamaApi(module);
    readAhead(module.FS.filesystems.WORKERFS);
    return module;
  });
  return starting;
}
ensureModule().catch(() => {}); // a failure is reported by the first op that needs the module

/** The call's return value, or an Error with llama.cpp's own words. */
function check(code, what) {
  if (code < 0) throw new Error(`${what}: ${module.UTF8ToString(api.lastError())}`);
  return code;
}

const resultText = () => module.UTF8ToString(api.result());

// The heap as it is now: a memory that grew has a new buffer, which old views do not see. The
// build without threads exports no wasmMemory, but renews Module.HEAPU8 when its memory grows.
const heap = () => new Uint8Array(module.wasmMemory ? module.wasmMemory.buffer : module.HEAPU8.buffer);

// A turn of the event loop without setTimeout's 4 ms clamp: pending messages (abort) run first.
const channel = new MessageChannel();
const turns = [];
channel.port1.onmessage = () => turns.shift()?.();
const nextTurn = () => new Promise((resolve) => {
  turns.push(resolve);
  channel.port2.postMessage(null);
});

// WORKERFS reads a file with one FileReaderSync call per read, a trip to the browser's blob
// store each; llama.cpp reads a model in thousands of reads (98 MB in about 4,000 for SmolLM2),
// which took 2-4 s in the browser. Reads are served from one slice of READ_AHEAD bytes read
// at once (0.25-0.3 s for SmolLM2; 8 MB slices 0.4-0.5 s); a read as large goes straight to
// the file.
const READ_AHEAD = 32 << 20;
function readAhead(workerfs) {
  const read = workerfs.stream_ops.read;
  let slice = null; // {node, start, bytes}
  workerfs.stream_ops.read = function (stream, buffer, offset, length, position) {
    const { node } = stream;
    if (position >= node.size) return 0;
    const want = Math.min(length, node.size - position);
    if (want >= READ_AHEAD) return read.call(this, stream, buffer, offset, length, position);
    if (!slice || slice.node !== node || position < slice.start || position + want > slice.start + slice.bytes.length) {
      const end = Math.min(node.size, position + READ_AHEAD);
      slice = { node, start: position, bytes: new Uint8Array(workerfs.reader.readAsArrayBuffer(node.contents.slice(position, end))) };
    }
    buffer.set(slice.bytes.subarray(position - slice.start, position - slice.start + want), offset);
    return want;
  };
  workerfs.dropReadAhead = () => {
    slice = null; // after a load: the slice's memory goes
  };
}

let mounted = null;
let contextSize = 0; // the loaded context's tokens: a generation that fills it ends "length"

const ops = {
  async load({ blob, name, contextWindow, threads, batch }) {
    await ensureModule();
    api.free();
    if (mounted) module.FS.unmount(mounted);
    // WORKERFS reads the Blob in slices when llama.cpp reads the file: no copy of the weights
    // in memory beyond the tensors themselves.
    mounted = "/model";
    if (!module.FS.analyzePath(mounted).exists) module.FS.mkdir(mounted);
    module.FS.mount(module.FS.filesystems.WORKERFS, { blobs: [{ name, data: blob }] }, mounted);
    try {
      check(api.dotForm(DOT), "dot product form");
      check(api.load(`${mounted}/${name}`, contextWindow, threads, batch), "llama.cpp could not load the model");
    } finally {
      module.FS.filesystems.WORKERFS.dropReadAhead();
    }
    check(api.info(), "model info");
    const info = JSON.parse(resultText());
    contextSize = info.n_ctx;
    return { ...info, build: BUILD.build };
  },

  format({ messages, template }) {
    check(api.format(JSON.stringify(messages), template || ""), "chat template");
    return resultText();
  },

  tokenize({ text }) {
    return check(api.tokenize(text, 0, 1), "tokenize");
  },

  async generate({ prompt, params, batch }, id) {
    const started = performance.now();
    const total = check(api.begin(prompt, JSON.stringify(params)), "prompt");
    const { n_cached: cached } = JSON.parse(resultText());
    let finish = "stop";
    let firstTokenAt = null;
    let prefillEnd = started;
    let generated = 0;
    let forced = 0;
    try {
      // Said before the first batch too, so a long prefill shows its size at once.
      if (total > cached) self.postMessage({ id, event: "progress", done: cached, total, cached });
      for (let pending = total - cached; pending > 0; ) {
        pending = check(api.prefill(batch), "prefill");
        self.postMessage({ id, event: "progress", done: total - pending, total, cached });
        await nextTurn();
        if (aborted.has(id)) return summary("abort");
      }
      prefillEnd = performance.now();
      for (;;) {
        if (aborted.has(id)) {
          finish = "abort";
          break;
        }
        const step = check(api.next(), "generation");
        if (step === 0) break;
        firstTokenAt ??= performance.now();
        const text = resultText();
        if (text) self.postMessage({ id, event: "token", text });
        await nextTurn();
      }
    } finally {
      // llama.cpp's count (a last step may only flush bytes), and how many of those tokens the
      // grammar forced: written without sampling, decoded in the batch of the token before them
      const ended = api.end();
      generated = Math.max(ended, 0);
      if (ended >= 0) forced = JSON.parse(resultText()).n_forced;
    }
    const maxTokens = params.max_tokens;
    const full = total + generated >= contextSize;
    if (finish === "stop" && ((Number.isInteger(maxTokens) && generated >= maxTokens) || full)) finish = "length";
    return summary(finish);

    function summary(finishReason) {
      const end = performance.now();
      const computed = total - cached;
      const prefillS = (prefillEnd - started) / 1000;
      const decodeS = firstTokenAt === null ? 0 : (end - firstTokenAt) / 1000;
      return {
        finish_reason: finishReason,
        prompt_tokens: total,
        cached_prompt_tokens: cached,
        completion_tokens: generated,
        forced_tokens: forced,
        prefill_tokens_per_s: computed > 0 && prefillS > 0 ? computed / prefillS : null,
        decode_tokens_per_s: generated > 1 && decodeS > 0 ? (generated - 1) / decodeS : null,
        time_to_first_token_s: firstTokenAt === null ? null : (firstTokenAt - started) / 1000,
      };
    }
  },

  save() {
    const size = check(api.save(), "saving the model's state");
    const start = api.buffer();
    return heap().slice(start, start + size).buffer;
  },

  restore({ bytes }) {
    const data = new Uint8Array(bytes);
    const ptr = module._malloc(data.length);
    try {
      heap().set(data, ptr);
      return check(api.restore(ptr, data.length), "the saved state was not restored");
    } finally {
      module._free(ptr);
    }
  },
};

self.onmessage = async ({ data: { id, op, args = {} } }) => {
  if (op === "abort") {
    aborted.add(args.target);
    return;
  }
  try {
    const result = await ops[op](args, id);
    const transfer = result instanceof ArrayBuffer ? [result] : [];
    self.postMessage({ id, result }, transfer);
  } catch (error) {
    self.postMessage({ id, error: String(error?.message || error) });
  } finally {
    aborted.delete(id);
  }
};
