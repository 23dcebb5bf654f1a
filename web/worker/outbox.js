// The worker's messages to the UI thread, batched. Agent events wait until the end of the
// current turn of the event loop, then go in one message; streamed text waits until another
// message is sent or TOKEN_FLUSH_MS has passed, then goes in one message too (an engine streams
// a token at a time, and every message costs the UI thread a task and a redraw). At most one of
// the two holds anything, and anything else posted sends it first, so the UI sees every message
// in the order it was made.
import { toUI } from "../protocol.js";

const TOKEN_FLUSH_MS = 50; // the live output still updates 20 times a second

/**
 * @param {(message: object) => void} send  the worker's postMessage
 * @param {(events: object[]) => void} onEvents  sees each batch of events before it is sent
 */
export function createOutbox(send, onEvents = () => {}) {
  let events = []; // JSON strings, as Python emitted them
  let tokens = null; // {purpose, step, text}
  let tokenTimer = 0;

  function flushEvents() {
    if (!events.length) return;
    const batch = JSON.parse(`[${events.join(",")}]`);
    events = [];
    onEvents(batch);
    send(toUI.events(batch));
  }
  function flushTokens() {
    if (!tokens) return;
    clearTimeout(tokenTimer);
    const { purpose, step, text } = tokens;
    tokens = null;
    send(toUI.token(purpose, step, text));
  }

  return {
    /** Any other message: what waits goes first. */
    post(message) {
      flushEvents();
      flushTokens();
      send(message);
    },
    /** Streamed text of one call. */
    token(purpose, step, text) {
      if (tokens && tokens.purpose === purpose && tokens.step === step) {
        tokens.text += text;
        return;
      }
      flushEvents();
      flushTokens();
      tokens = { purpose, step, text };
      tokenTimer = setTimeout(flushTokens, TOKEN_FLUSH_MS);
    },
    /** An agent event, as Python's JSON. */
    event(eventJson) {
      flushTokens();
      events.push(eventJson);
      if (events.length === 1) queueMicrotask(flushEvents);
    },
  };
}
