// The scripted test engine: replays replies a test gave it. It exists for the tests only, is
// chosen only by the explicit test switch (?engine=scripted), and the page labels it.
// Replies per purpose (plan, arguments, generate, rethink, answer): a string, or a list used
// in order (the last repeats); an item may be {text, delay_ms} to simulate a slow model, or
// {text, match, otherwise}: when the regular expression `match` finds its group in the call's
// last message, `text` with that group for $1 (a test that the prompt holds it), else `otherwise`.
// {text, busy_ms} holds the worker's thread for busy_ms before replying: a wedged engine that
// no message, Stop included, reaches meanwhile.

export class ScriptedEngine {
  /** @param {{contextWindow?: number}} options the page's context_window, as other engines get it */
  constructor(options = {}) {
    this.options = { contextWindow: options.contextWindow };
    this.script = {};
    this.loadedModel = null;
    this.counts = { reloads: 0, unloads: 0 };
    this.calls = [];
    this.label = "Scripted test engine (replies supplied by a test; no language model)";
    this.interrupted = false;
    this.cached = ""; // the last prompt, kept as llama.cpp keeps its KV cache
  }

  setScript(replies) {
    this.script = {};
    for (const [purpose, given] of Object.entries(replies)) {
      this.script[purpose] = Array.isArray(given) ? [...given] : [given];
    }
    this.calls = [];
  }

  async reload(model) {
    this.loadedModel = model;
    this.cached = "";
    this.counts.reloads += 1;
  }

  async unload() {
    this.loadedModel = null;
    this.cached = "";
    this.counts.unloads += 1;
  }

  /** Keeps the prompt as a KV cache; a script's "prefill" item {delay_ms} makes it slow,
   * reporting progress in 4 steps and honouring interrupt(). */
  async prefill(messages, call, onProgress) {
    if (this.loadedModel !== call.model) {
      throw new Error(`model ${call.model} is not loaded (loaded: ${this.loadedModel})`);
    }
    const delay = this.script.prefill?.[0]?.delay_ms || 0;
    const usage = usageOf(messages, "", this.cached);
    this.interrupted = false;
    for (let quarter = 1; quarter <= 4; quarter++) {
      if (delay) await new Promise((r) => setTimeout(r, delay / 4));
      if (this.interrupted) throw new DOMException("the prefill was interrupted", "AbortError");
      onProgress?.({ done: Math.round((usage.prompt_tokens * quarter) / 4), total: usage.prompt_tokens });
    }
    this.cached = rendered(messages);
    return usage;
  }

  interrupt() {
    this.interrupted = true;
  }

  async chat(messages, call, onToken) {
    if (this.loadedModel !== call.model) {
      throw new Error(`model ${call.model} is not loaded (loaded: ${this.loadedModel})`);
    }
    const queue = this.script[call.purpose];
    if (!queue || queue.length === 0) throw new Error(`the test script has no reply for a ${call.purpose} call`);
    const item = queue.length > 1 ? queue.shift() : queue[0];
    const text = replyText(item, messages);
    const { delay_ms: delay = 0, busy_ms: busy = 0 } = typeof item === "string" ? {} : item;
    for (const until = Date.now() + busy; Date.now() < until; );
    this.calls.push({ purpose: call.purpose, step: call.step, tool: call.tool });
    this.interrupted = false;
    // Stream in a few chunks, honouring interrupt() like a real engine.
    const pieces = text.match(/[\s\S]{1,24}/g) || [""];
    let sent = "";
    for (const piece of pieces) {
      if (delay) await new Promise((r) => setTimeout(r, delay / pieces.length));
      if (this.interrupted) return { text: sent, finish_reason: "abort", usage: this.usage(messages, sent) };
      sent += piece;
      onToken?.(piece);
    }
    return { text, finish_reason: "stop", usage: this.usage(messages, text) };
  }

  usage(messages, text) {
    const usage = usageOf(messages, text, this.cached);
    this.cached = rendered(messages) + text;
    return usage;
  }
}

const rendered = (messages) => messages.map((m) => `<${m.role}>${m.content}</${m.role}>`).join("");

// Tokens counted as 3 characters each; cached: those of the text shared with the last prompt.
function usageOf(messages, text, cached) {
  const prompt = messages.reduce((n, m) => n + Math.ceil(m.content.length / 3), 0);
  const now = rendered(messages);
  let shared = 0;
  while (shared < now.length && shared < cached.length && now[shared] === cached[shared]) shared++;
  return { prompt_tokens: prompt, completion_tokens: Math.ceil(text.length / 3), cached_prompt_tokens: Math.ceil(shared / 3) };
}

function replyText(item, messages) {
  if (typeof item === "string") return item;
  if (!item.match) return item.text;
  const found = new RegExp(item.match).exec(String(messages[messages.length - 1]?.content ?? ""));
  return found ? item.text.replaceAll("$1", found[1]) : item.otherwise ?? `(no match for ${item.match})`;
}
