// Helpers for tests/web/test_webllm.py. The modules under test are imported as the worker
// imports them; the vendored WebLLM is the real one.
//
// standInModel(engine, modelId, options) makes a real webllm.MLCEngine hold a "loaded" model
// without model files: its pipeline maps get one entry, and the three places that would run
// the model (getLLMStates' type check, prefill, decode) are replaced on that instance. Every
// other part of a chat completion is WebLLM 0.2.86's own code: the request checks, the
// generation config it builds from the request (genConfig, recorded here), the lock, the
// interrupt flag and its reset, the streaming loop, the final and usage chunks.
import * as webllm from "../vendor/web-llm/index.js";
import * as engines from "../worker/engines/webllm.js";
import * as gpu from "../worker/engines/gpu.js";
import * as errors from "../worker/engines/errors.js";

class StandInPipeline {
  constructor(tokenMs) {
    this.tokenMs = tokenMs;
    this.resetRound();
  }
  resetRound() {
    this.message = "";
    this.tokens = 0;
    this.maxTokens = Infinity;
    this.stop = false;
    this.finishReason = undefined;
  }
  stopped() { return this.stop; }
  triggerStop() {
    if (this.stop) return;
    this.stop = true;
    this.finishReason = "abort"; // as LLMChatPipeline.triggerStop
  }
  getMessage() { return this.message; }
  getFinishReason() { return this.finishReason; }
  setSeed() {}
  getTokenLogprobArray() { return []; }
  dispose() { this.disposed = true; }
  async sync() {}
  async token() {
    await new Promise((resolve) => setTimeout(resolve, this.tokenMs));
    this.message += `t${this.tokens} `;
    this.tokens += 1;
    if (this.tokens >= this.maxTokens) {
      this.stop = true;
      this.finishReason = "length";
    }
  }
  getCurRoundCompletionTotalTokens() { return this.tokens; }
  getCurRoundDecodingTotalTokens() { return Math.max(this.tokens - 1, 0); }
  getCurRoundPrefillTotalTokens() { return 10; }
  getCurRoundPrefillTotalTime() { return 0.01; }
  getCurRoundDecodingTotalTime() { return this.tokens * this.tokenMs / 1000; }
  getCurRoundPrefillTokensPerSec() { return 1000; }
  getCurRoundDecodingTokensPerSec() { return 1000 / this.tokenMs; }
  getCurRoundGrammarInitTotalTime() { return 0; }
  getCurRoundGrammarPerTokenTotalTime() { return 0; }
  getCurRoundLatencyBreakdown() { return undefined; }
}

function standInModel(engine, modelId, { tokenMs = 5 } = {}) {
  const pipeline = new StandInPipeline(tokenMs);
  const record = { genConfigs: [], pipeline };
  engine.loadedModelIdToPipeline.set(modelId, pipeline);
  engine.loadedModelIdToChatConfig.set(modelId, {});
  engine.loadedModelIdToModelType.set(modelId, webllm.ModelType.LLM);
  let held = false; // WebLLM's CustomLock is not exported; this one serialises the same way
  const waiting = [];
  engine.loadedModelIdToLock.set(modelId, {
    async acquire() {
      if (!held) { held = true; return; }
      await new Promise((resolve) => waiting.push(resolve));
    },
    async release() {
      const next = waiting.shift();
      if (next) next(); else held = false;
    },
  });
  engine.getLLMStates = () => [modelId, pipeline, engine.loadedModelIdToChatConfig.get(modelId)];
  engine.prefill = async (_request, _pipeline, _chatConfig, genConfig) => {
    record.genConfigs.push({ ...genConfig });
    pipeline.resetRound();
    pipeline.maxTokens = genConfig.max_tokens ?? Infinity;
    await pipeline.token();
  };
  engine.decode = async () => pipeline.token();
  return record;
}

/**
 * Holds engine.reloadInternal (the part of reload() that downloads and builds the model) until
 * release(); it then registers the stand-in model as the real one does at its end. This is
 * the race past WebLLM's last abortable download (the tokenizer and the pipeline build take no
 * abort signal): unload() there cannot stop the load. WebLLM's own reload() and unload() run.
 */
function holdReload(engine) {
  let release;
  const released = new Promise((resolve) => { release = resolve; });
  let entered;
  const enteredPromise = new Promise((resolve) => { entered = resolve; });
  engine.reloadInternal = async (modelId) => {
    entered(modelId);
    await released;
    standInModel(engine, modelId);
  };
  return { entered: enteredPromise, release };
}

/** A WebLLMEngine adapter whose MLCEngine is real and holds `modelId` through standInModel. */
function adapterWithStandIn(modelId, options = {}) {
  const adapter = new engines.WebLLMEngine(options);
  adapter.engine = new webllm.MLCEngine({ appConfig: adapter.appConfig(modelId) });
  const standIn = standInModel(adapter.engine, modelId, options);
  adapter.loadedModel = modelId;
  adapter.loadedRecord = engines.recordOf(modelId, adapter.appConfig(modelId));
  return { adapter, standIn };
}

/** A real GPUPipelineError: a shader that enables f16 on a device without shader-f16. */
async function f16PipelineError() {
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice();
  const code = "enable f16;\n@compute @workgroup_size(1) fn main() { var x: f16 = 1.0h; _ = x; }";
  try {
    await device.createComputePipelineAsync({ layout: "auto", compute: { module: device.createShaderModule({ code }), entryPoint: "main" } });
    return null;
  } catch (error) {
    return error;
  } finally {
    device.destroy();
  }
}

/** {ok: true} or {ok: false, kind, message} as the worker would report the failure. */
function settle(promise) {
  return promise.then(() => ({ ok: true }), (error) => ({ ok: false, ...errors.describeEngineError(error) }));
}

export const harness = { settle, webllm, engines, gpu, errors, standInModel, adapterWithStandIn, holdReload, f16PipelineError };
