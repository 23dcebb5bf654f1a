// Native llama.cpp speed, the yardstick for the CPU engine (scripts/bench_cpu_engine.py).
// Runs node-llama-cpp's prebuilt CPU binary (llama.cpp compiled for this CPU: AVX2 and friends)
// on the same GGUF and prompt as the engine's bench. The bench drives it one run at a time, in
// turns with the engine, so both see the same load from other processes:
//
//   node scripts/bench_native_llama.mjs '{"model": "web/models/x.gguf", "prompt": "...",
//        "max_tokens": 32, "context": 4096, "batch": 512}'
//   stdin:  {"threads": 1}            one line per run
//   stdout: {"ready": true, "llama_cpp": ..., "system": ...}   once, after the model loaded
//           {"threads", "prompt_tokens", "prefill_tok_s", "decode_tok_s", "decode_tokens"}
//
// node-llama-cpp is not a project dependency: bench_cpu_engine.py installs a pinned version
// under .artifacts/bench-native/ and sets NODE_PATH there (see NATIVE_PACKAGES in that file).
// Prefill is the time from handing the prompt over to the first sampled token, as llama.cpp's
// own timings count it; decode is the rate of the tokens after the first, sampled the way
// llama.cpp's server samples by default (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05).
import { createRequire } from "node:module";
import path from "node:path";
import process from "node:process";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const config = JSON.parse(process.argv[2] || "{}");
const moduleDir = process.env.NODE_PATH?.split(path.delimiter)[0];
if (!moduleDir) throw new Error("Set NODE_PATH to the node_modules folder that holds node-llama-cpp.");
// A bare import ignores NODE_PATH in ES modules: resolve the package from that folder.
const entry = createRequire(path.resolve(moduleDir, "noop.js")).resolve("node-llama-cpp");
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);

const llama = await getLlama({
  gpu: false,
  build: "never", // the prebuilt binary or nothing: compiling llama.cpp on 2 cores takes long
  skipDownload: true,
  logLevel: LlamaLogLevel.error,
  maxThreads: 0, // so a context's `threads` is exactly the threads used
});
const model = await llama.loadModel({ modelPath: path.resolve(config.model), gpuLayers: 0 });
const promptTokens = model.tokenize(config.prompt, true);
const sampling = { temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, seed: 1 };
const maxTokens = config.max_tokens ?? 32;
const sequences = new Map(); // threads -> a sequence of its own context

async function once(sequence) {
  const started = performance.now();
  let firstAt = null;
  let lastAt = null;
  let generated = 0;
  for await (const _token of sequence.evaluate(promptTokens, sampling)) {
    lastAt = performance.now();
    firstAt ??= lastAt;
    generated += 1;
    if (generated >= maxTokens) break;
  }
  await sequence.clearHistory(); // the next run prefills the whole prompt again
  return {
    prompt_tokens: promptTokens.length,
    prefill_tok_s: promptTokens.length / ((firstAt - started) / 1000),
    decode_tok_s: generated > 1 ? (generated - 1) / ((lastAt - firstAt) / 1000) : 0,
    decode_tokens: generated - 1,
  };
}

async function sequenceFor(threads) {
  if (!sequences.has(threads)) {
    const context = await model.createContext({
      contextSize: config.context ?? 4096,
      batchSize: config.batch ?? 512,
      threads,
    });
    const sequence = context.getSequence();
    await once(sequence); // first-call costs (allocations, page faults) stay out of the numbers
    sequences.set(threads, sequence);
  }
  return sequences.get(threads);
}

const say = (value) => process.stdout.write(`${JSON.stringify(value)}\n`);
say({ ready: true, llama_cpp: llama.llamaCppRelease, build: llama.buildType, system: llama.systemInfo });
for await (const line of readline.createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const { threads } = JSON.parse(line);
  const sequence = await sequenceFor(threads);
  say({ threads: sequence.context.currentThreads || threads, ...(await once(sequence)) });
}
for (const sequence of sequences.values()) await sequence.context.dispose();
await model.dispose();
await llama.dispose();
