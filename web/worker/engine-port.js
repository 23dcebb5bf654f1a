// The engine port: what Python calls on the model engine (agent_py/page/ports.py, Bridge's
// engine* methods). A factory handed its engine, as createHttpPort is handed its post. Every
// method resolves to a JSON string in the one reply envelope and never rejects.
import { bridgeFailed, bridgeOk, toUI } from "../protocol.js";
import { describeEngineError } from "./engines/errors.js";

/**
 * What every engine (engines/webllm.js, engines/cpu.js, engines/scripted.js) offers the port.
 * @typedef {object} Engine
 * @property {(model: string) => Promise<void>} reload  load `model` (a no-op when it is loaded)
 * @property {() => Promise<void>} unload
 * @property {() => void} interrupt  ends the running chat soon; it resolves with what it has
 * @property {(messages: {role: string, content: string}[], call: CallInfo,
 *   onToken?: (text: string) => void, onNote?: (text: string) => void)
 *   => Promise<{text: string, usage: object, finish_reason: string}>} chat
 * @property {((messages: object[], call: CallInfo,
 *   onProgress?: (p: {done: number, total: number}) => void) => Promise<object>)=} prefill
 *   computes and keeps the prompt's KV cache (engines without one leave it out)
 * @property {((texts: string[]) => Promise<number[]|null>)=} countTokens  each text's token
 *   count by the loaded model's tokenizer (engines without one leave it out)
 * @property {{reloads: number, unloads: number}} counts
 * @property {string} label
 * @property {string|null} loadedModel
 * @property {{contextWindow: number}=} options  the options it was made with
 */
/**
 * A model call, as Python's CallInfo (agent_py/core/llm.py) is written for the engines
 * (agent_py/page/ports.py, call_json): the same names, the unset ones left out.
 * tests/web/test_protocol.py holds these names to CallInfo's fields.
 * @typedef {{purpose: string, model: string, max_tokens: number, thinking: boolean,
 *   schema?: object, tool?: string, step?: string, sampling?: object, grammar?: string}} CallInfo
 */

const engineFailed = (error) => {
  const { kind, message } = describeEngineError(error);
  return bridgeFailed(kind, message);
};

/**
 * @param {() => Engine} engine  the worker's engine now
 * @param {{post: (message: object) => void, token: (purpose: string, step: string|null, text: string) => void}} outbox
 * @param {{engineTime: (work: () => Promise<any>) => Promise<any>}} clock
 * @param {(usage: object) => void} onPrefilled  the usage of each prefill
 */
export function createEnginePort(engine, outbox, clock, onPrefilled = () => {}) {
  const { post } = outbox;
  return {
    async engineReload(model) {
      try {
        post(toUI.progress("model", 0, `Loading ${model}…`));
        await clock.engineTime(() => engine().reload(model));
        post(toUI.progress("model", 1, `${model} loaded`));
        return bridgeOk();
      } catch (error) {
        post(toUI.progress("model", 0, "Model load failed"));
        return engineFailed(error);
      }
    },
    async engineUnload() {
      try {
        await clock.engineTime(() => engine().unload());
        return bridgeOk();
      } catch (error) {
        return engineFailed(error);
      }
    },
    async engineInterrupt() {
      try {
        engine().interrupt();
        return bridgeOk();
      } catch (error) {
        return engineFailed(error);
      }
    },
    async engineChat(messagesJson, callJson) {
      const call = JSON.parse(callJson);
      try {
        const onToken = (text) => outbox.token(call.purpose, call.step, text);
        const onNote = (text) => post(toUI.engineNote(call.purpose, call.step, text));
        const messages = JSON.parse(messagesJson);
        return bridgeOk(await clock.engineTime(() => engine().chat(messages, call, onToken, onNote)));
      } catch (error) {
        return engineFailed(error);
      }
    },
    // Each text's token count by the loaded model's tokenizer (agent_py's ManagedLLM.measure);
    // engines without one answer counts: null, and the agent estimates.
    async engineTokenize(textsJson) {
      if (typeof engine().countTokens !== "function") return bridgeOk({ counts: null });
      try {
        return bridgeOk({ counts: await engine().countTokens(JSON.parse(textsJson)) });
      } catch (error) {
        return engineFailed(error);
      }
    },
    // The planner's fixed prompt into the engine's KV cache, before a task (agent_py's
    // Agent.prepare); engines without a cache to fill answer prefilled: false.
    async enginePrefill(messagesJson, callJson) {
      if (typeof engine().prefill !== "function") return bridgeOk({ prefilled: false });
      const call = JSON.parse(callJson);
      try {
        const onProgress = ({ done, total }) => {
          if (total) post(toUI.progress("prefill", done / total, `Preparing the model: ${done} of ${total} prompt tokens`));
        };
        const usage = await clock.engineTime(() => engine().prefill(JSON.parse(messagesJson), call, onProgress));
        onPrefilled(usage);
        return bridgeOk({ prefilled: true, usage });
      } catch (error) {
        return engineFailed(error);
      }
    },
  };
}
