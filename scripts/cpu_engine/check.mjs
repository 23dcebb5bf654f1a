// Checks the CPU engine's WebAssembly build (web/vendor/llama/, scripts/cpu_engine/build.sh) under
// Node, through the same C API the page's worker uses: model info, chat formatting, greedy,
// grammar- and schema-constrained generation, prefix reuse in the KV cache, state save and
// restore (and refusal of damaged states), and the speed of prefill and decode.
//
//   node --no-experimental-fetch scripts/cpu_engine/check.mjs [MODEL.gguf] [THREADS=2]
//   AGENT_LLAMA_BUILD=agent-llama-rs node --no-experimental-fetch --experimental-wasm-relaxed-simd \
//     --no-liftoff scripts/cpu_engine/check.mjs   # the relaxed SIMD build (agent-llama by default;
//     Node 20's baseline compiler gets relaxed SIMD's dot product wrong, see kernel_check.sh)
//
// Prints what it sees; exits 1 when a check fails. Speeds are printed, never asserted.
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
const modelPath = process.argv[2] || `${root}web/models/smollm2-135m-instruct-q4_1.gguf`;
// A sliding-window model with no template of its own: checked too when it is there.
const gemmaPath = `${root}web/models/gemma3-270m-q4_k_m.gguf`;
const threads = Number(process.argv[3] || 2);
const N_CTX = 2048;
const N_BATCH = 512;

const require = createRequire(import.meta.url);
const build = process.env.AGENT_LLAMA_BUILD || "agent-llama";
console.log(`build: web/vendor/llama/${build}.js`);
const createAgentLlama = require(`${root}web/vendor/llama/${build}.js`);
const M = await createAgentLlama({ print: () => {}, printErr: (text) => process.stderr.write(`[llama.cpp] ${text}\n`) });

const { bindLlamaApi } = require(`${root}web/worker/engines/cpu-api.js`);
const al = bindLlamaApi(M);
const heap = () => new Uint8Array(M.wasmMemory.buffer);
const result = () => M.UTF8ToString(al.result());
const lastError = () => M.UTF8ToString(al.lastError());

let failures = 0;
function check(ok, what, detail = "") {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}${detail ? `: ${detail}` : ""}`);
  if (!ok) failures += 1;
}
function must(code, what) {
  if (code < 0) throw new Error(`${what} failed: ${lastError()}`);
  return code;
}

/** Prefill then sample until the end; returns the text, the counts and the timings. */
function generate(prompt, params = {}, { maxBatch = N_BATCH } = {}) {
  const n = must(al.begin(prompt, JSON.stringify(params)), "al_begin");
  const { n_prompt: nPrompt, n_cached: nCached } = JSON.parse(result());
  const t0 = performance.now();
  while (must(al.prefill(maxBatch), "al_prefill") > 0);
  const t1 = performance.now();
  let text = "";
  let steps = 0;
  while (must(al.next(), "al_next") === 1) {
    text += result();
    steps += 1;
  }
  const t2 = performance.now();
  const nGenerated = must(al.end(), "al_end");
  const { n_forced: nForced } = JSON.parse(result());
  return { n, nPrompt, nCached, text, nGenerated, nForced, steps, prefillS: (t1 - t0) / 1000, decodeS: (t2 - t1) / 1000 };
}

function load(nThreads = threads) {
  must(al.load("/model.gguf", N_CTX, nThreads, N_BATCH), "al_load");
}

// The heap is shared memory that may grow: copy bytes out, and in through malloc.
function saveState() {
  const size = must(al.save(), "al_state_save");
  const start = al.buffer();
  return heap().slice(start, start + size);
}
function restoreState(bytes) {
  const ptr = M._malloc(Math.max(bytes.length, 1));
  heap().set(bytes, ptr);
  const code = al.restore(ptr, bytes.length);
  M._free(ptr);
  return code;
}

// --- model and formatting ---
M.FS.writeFile("/model.gguf", readFileSync(modelPath));
let t = performance.now();
load(64);
must(al.info(), "al_model_info");
const pool = M.PThread.unusedWorkers.length;
check(JSON.parse(result()).n_threads === Math.min(64, pool + 1), "n_threads is capped by the pthread pool", `pool of ${pool}`);
al.free();
t = performance.now();
load();
console.log(`model loaded in ${((performance.now() - t) / 1000).toFixed(2)} s`);
must(al.info(), "al_model_info");
const info = JSON.parse(result());
console.log("model info:", JSON.stringify({ ...info, chat_template: info.chat_template && `${info.chat_template.slice(0, 40)}...` }));
check(info.n_ctx === N_CTX && info.n_vocab > 0 && typeof info.architecture === "string", "model info has the context, vocabulary and architecture");
check(info.kv_type === "f32", "a small model's KV cache is F32 (no half-precision arithmetic in WebAssembly)", info.kv_type);

const question = [
  { role: "system", content: "You are a helpful assistant." },
  { role: "user", content: "What is 6 times 7?" },
];
const nFormatted = must(al.format(JSON.stringify(question), ""), "al_format_chat");
const chat = result();
check(
  chat.includes("<|im_start|>user\nWhat is 6 times 7?<|im_end|>\n") && chat.endsWith("<|im_start|>assistant\n") && nFormatted === Buffer.byteLength(chat),
  "al_format_chat renders ChatML with the model's template",
  JSON.stringify(chat),
);
check(al.format(JSON.stringify(question), "no-such-template") < 0, "an unknown template name is an error", lastError());
check(al.format("not json", "") < 0, "messages that are not JSON are an error", lastError());

// --- greedy generation ---
const greedy = generate(chat, { temperature: 0, max_tokens: 32 });
console.log(`greedy (${greedy.nGenerated} tokens): ${JSON.stringify(greedy.text)}`);
check(greedy.text.length > 0 && greedy.nGenerated <= 32, "greedy generation produces text within max_tokens");
const again = generate(chat, { temperature: 0, max_tokens: 32 });
check(again.nCached === again.nPrompt - 2, "the same prompt again reuses all but its last two tokens (no batch of one)", `n_cached ${again.nCached} of ${again.nPrompt}`);
check(again.text === greedy.text, "the reused prefix gives the same greedy text");

// --- prefix reuse on an extended prompt ---
must(al.begin(chat, "{}"), "al_begin");
const nChat = JSON.parse(result()).n_prompt;
while (must(al.prefill(N_BATCH), "al_prefill") > 0);
al.end();
const extended = `${chat}The answer is<|im_end|>\n<|im_start|>user\nAnd 6 times 8?<|im_end|>\n<|im_start|>assistant\n`;
must(al.begin(extended, "{}"), "al_begin");
const ext = JSON.parse(result());
al.end();
check(ext.n_cached === nChat, "an extended prompt reuses the whole old prompt", `n_cached ${ext.n_cached}, old prompt ${nChat}`);

// --- no prompt batch of one token: a batch that would leave one is cut a token shorter ---
must(al.begin(extended, "{}"), "al_begin");
const tail = ext.n_prompt - ext.n_cached;
const leftAfterFirst = must(al.prefill(tail - 1), "al_prefill");
const leftAfterSecond = must(al.prefill(tail - 1), "al_prefill");
al.end();
check(leftAfterFirst === 2 && leftAfterSecond === 0, "a prompt's last batch is never a single token", `${tail} tokens left ${leftAfterFirst}, then ${leftAfterSecond}`);

// --- constrained generation ---
const grammarOut = generate(chat, { grammar: 'root ::= "{\\"answer\\":" [0-9]+ "}"', temperature: 0.8, seed: 7, max_tokens: 24 });
console.log(`grammar: ${JSON.stringify(grammarOut.text)}`);
check(/^\{"answer":[0-9]+\}$/.test(grammarOut.text), "a GBNF grammar constrains the text");
check(al.begin(chat, JSON.stringify({ grammar: "root ::= (" })) < 0, "a bad grammar is an error", lastError());
// Text the grammar allows alone is written without sampling and decoded in one batch with the
// token before it; the reply ends once the grammar is complete, without a step for the end.
const literal = '{"answer": "the product of the two numbers is ';
const forcedGrammar = `root ::= ${JSON.stringify(literal)} [0-9]+ "\\"}"`;
const literalTokens = must(al.tokenize(literal, 0, 0), "al_tokenize");
const forcedOut = generate(chat, { grammar: forcedGrammar, temperature: 0, max_tokens: 40 });
console.log(`forced: ${JSON.stringify(forcedOut.text)}, ${forcedOut.nForced} of ${forcedOut.nGenerated} tokens forced in ${forcedOut.steps} steps`);
check(/^\{"answer": "the product of the two numbers is [0-9]+"\}$/.test(forcedOut.text), "forced text keeps the grammar's reply");
check(forcedOut.nForced >= literalTokens && forcedOut.steps < forcedOut.nGenerated, "the grammar's forced text is not sampled token by token",
  `${literalTokens} tokens in the literal`);
const cutOut = generate(chat, { grammar: forcedGrammar, temperature: 0, max_tokens: 3 });
check(cutOut.nGenerated <= 3 && literal.startsWith(cutOut.text), "forced text never takes a reply past max_tokens", JSON.stringify(cutOut));
const schema = { type: "object", properties: { answer: { type: "integer" } }, required: ["answer"] };
const schemaOut = generate(chat, { schema, temperature: 0, max_tokens: 48 });
console.log(`schema: ${JSON.stringify(schemaOut.text)}`);
let parsed = null;
try {
  parsed = JSON.parse(schemaOut.text);
} catch {}
check(parsed !== null && Number.isInteger(parsed.answer), "a JSON schema constrains the text to a matching object");
check(al.begin(chat, JSON.stringify({ schema: { type: "object", properties: { a: { $ref: "#/nowhere" } } } })) < 0, "a schema that cannot be converted is an error", lastError());
check(al.begin(chat, JSON.stringify({ temperature: "hot" })) < 0, "a parameter of the wrong type is an error", lastError());

// --- speed: a prompt of about 1,000 tokens, then 32 tokens ---
const para = "The harbour town wakes before dawn: fishing boats leave the quay, the bakery lights its ovens, " +
  "and the ferry to the islands sounds its horn twice. Market stalls fill the square by seven. ";
let long = "";
for (let part = 0; al.tokenize(long, 1, 0) < 1000; part += 1) long += `Part ${part}. ${para}`;
for (const run of [0, 1]) {
  const r = generate(`${run}: ${long}`, { temperature: 0, max_tokens: 32, repeat_penalty: 1.1 });
  const computed = r.nPrompt - r.nCached;
  console.log(
    `speed run ${run} threads=${info.n_threads}: prefill ${computed} tok in ${r.prefillS.toFixed(2)} s = ${(computed / r.prefillS).toFixed(1)} tok/s | ` +
      `decode ${r.nGenerated} tok in ${r.decodeS.toFixed(2)} s = ${(r.nGenerated / r.decodeS).toFixed(1)} tok/s`,
  );
}

// --- state save and restore ---
must(al.begin(chat, "{}"), "al_begin");
while (must(al.prefill(N_BATCH), "al_prefill") > 0);
al.end();
const nSaved = al.cached();
t = performance.now();
const state = saveState();
console.log(`state of ${nSaved} tokens: ${(state.length / 1e6).toFixed(2)} MB, saved in ${(performance.now() - t).toFixed(0)} ms`);
const reference = generate(extended, { temperature: 0, max_tokens: 24 });
check(reference.nCached === nSaved, "before the restore the extended prompt reuses the saved prefix");

al.free();
load();
t = performance.now();
const restored = restoreState(state);
console.log(`restored in ${(performance.now() - t).toFixed(0)} ms`);
check(restored === nSaved, "al_state_load restores the saved token count", `${restored} (${restored < 0 ? lastError() : "ok"})`);
const replay = generate(extended, { temperature: 0, max_tokens: 24 });
check(replay.nCached === nSaved, "after the restore the extended prompt reuses the saved prefix", `n_cached ${replay.nCached}`);
check(replay.text === reference.text, "the greedy continuation after the restore equals the one before", JSON.stringify(replay.text));

const garbage = new Uint8Array(4096).map((_, i) => (i * 7919 + 13) & 255);
check(restoreState(garbage) < 0, "garbage bytes are refused", lastError());
check(restoreState(state.slice(0, state.length >> 1)) < 0, "a truncated state is refused", lastError());
const flipped = state.slice();
flipped[flipped.length - 100] ^= 0xff;
check(restoreState(flipped) < 0, "a damaged state is refused", lastError());
// Damage llama.cpp's own part and fix our checksum: llama.cpp's checks must refuse it too.
const forged = state.slice();
const view = new DataView(forged.buffer);
const nTok = view.getUint32(8, true);
const payload = 20 + 4 * nTok;
view.setUint32(payload, view.getUint32(payload, true) ^ 0x5a5a5a5a, true);
view.setUint32(16, fnv1a32Words(forged.subarray(20)), true);
check(restoreState(forged) < 0, "a state llama.cpp cannot read is refused", lastError());
check(al.cached() === 0, "a refused state leaves an empty cache");
const after = generate(chat, { temperature: 0, max_tokens: 32 });
check(after.text === greedy.text, "the engine still works after refused states");

al.free();

// --- Gemma 3: sliding-window attention, the built-in "gemma" template ---
if (existsSync(gemmaPath)) {
  M.FS.unlink("/model.gguf");
  M.FS.writeFile("/model.gguf", readFileSync(gemmaPath));
  load();
  must(al.info(), "al_model_info");
  const gemma = JSON.parse(result());
  console.log("gemma info:", JSON.stringify(gemma));
  check(gemma.chat_template === null, "Gemma 3 270M's GGUF has no chat template");
  must(al.format(JSON.stringify([{ role: "user", content: "Name three colours." }]), "gemma"), "al_format_chat");
  const gemmaChat = result();
  check(gemmaChat.includes("<start_of_turn>user\nName three colours.<end_of_turn>\n<start_of_turn>model\n"), "the built-in gemma template renders Gemma turns", JSON.stringify(gemmaChat));
  const first = generate(gemmaChat, { temperature: 0, max_tokens: 16 });
  console.log(`gemma greedy: ${JSON.stringify(first.text)}`);
  check(first.text.length > 0, "Gemma generates text");
  const second = generate(gemmaChat, { temperature: 0, max_tokens: 16 });
  check(second.nCached === second.nPrompt - 2 && second.text === first.text, "Gemma reuses its prefix (full-size SWA cache) with the same text", `n_cached ${second.nCached} of ${second.nPrompt}`);
  const gemmaState = saveState();
  const nGemma = al.cached();
  const gemmaNext = `${gemmaChat}${first.text}<end_of_turn>\n<start_of_turn>user\nAnd three more?<end_of_turn>\n<start_of_turn>model\n`;
  const before = generate(gemmaNext, { temperature: 0, max_tokens: 16 });
  al.free();
  load();
  const nRestored = restoreState(gemmaState);
  check(nRestored === nGemma, "Gemma's state is restored", nRestored < 0 ? lastError() : `${nRestored} tokens`);
  const afterRestore = generate(gemmaNext, { temperature: 0, max_tokens: 16 });
  check(afterRestore.nCached === before.nCached && afterRestore.text === before.text, "Gemma continues the same after a restore", `n_cached ${afterRestore.nCached}, ${JSON.stringify(afterRestore.text)}`);
  al.free();
}

console.log(failures ? `${failures} check(s) failed` : "all checks passed");
process.exit(failures ? 1 : 0);

// The checksum of agent_llama.cpp: FNV-1a over little-endian 32-bit words, then the tail bytes.
function fnv1a32Words(bytes) {
  const words = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let h = 2166136261;
  let i = 0;
  for (; i + 4 <= bytes.length; i += 4) h = Math.imul(h ^ words.getUint32(i, true), 16777619) >>> 0;
  for (; i < bytes.length; i += 1) h = Math.imul(h ^ bytes[i], 16777619) >>> 0;
  return h;
}
