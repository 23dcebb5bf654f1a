// Session history in IndexedDB, used by the UI thread. Every agent event
// ({ts, session, turn, step, type, content, meta}) is stored as it arrives, one transaction per
// event, so whatever the UI has shown survives a reload or a crash of the page.
//
//   const store = await SessionStore.open();
//   await store.append(event);            // resolves once the event is committed
//   await store.sessions();               // [{session, title, started, updated, events, lastState}]
//   downloadJsonl("run.jsonl", await store.exportJsonl(id));
//
// Layout: "events" holds the events under an auto-increment key (arrival order) with an index
// on `session`; once a turn has ended its events are packed into one record (packTurn) at the
// key of its first; "sessions" holds one summary per session, updated in the same transaction
// as each event, so listing sessions never reads every event.

const DB_VERSION = 1;
const EVENTS = "events";
// The type of a record that holds a finished turn's events (packTurn); no agent event has it.
const PACKED = "packed_turn";
const SESSIONS = "sessions";
const OPEN_TIMEOUT_MS = 10_000;
// A tool can return megabytes (a page, a file); the history keeps the head and tail of it.
const MAX_CONTENT_CHARS = 1_000_000;
const MAX_META_CHARS = 1_000_000;
const MAX_TITLE_CHARS = 200;
// A lock with this prefix is held while a turn of a session is running in some tab, so
// sessions() can tell a running turn from one cut short by a reload or a crash.
const LOCK_PREFIX = "agent_py-session:";

class SessionHistoryError extends Error {
  constructor(message, cause) {
    super(message, { cause });
    this.name = "SessionHistoryError";
  }
}

function unavailable(detail, cause) {
  return new SessionHistoryError(`Session history is unavailable: ${detail}`, cause);
}

function describe(error) {
  if (!error) return "unknown error";
  return error.name && error.message ? `${error.name}: ${error.message}` : String(error);
}

function failure(action, error) {
  if (error && error.name === "QuotaExceededError") {
    return new SessionHistoryError(
      "Session history is full (the browser's storage quota is used up): export and delete old sessions.",
      error,
    );
  }
  return new SessionHistoryError(`Session history could not ${action}: ${describe(error)}`, error);
}

// Resolves when the transaction commits (the moment the data is safe), rejects on abort.
function committed(tx, action) {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onabort = () => reject(failure(action, tx.error));
  });
}

function result(request) {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

function cut(text, limit) {
  const head = Math.floor(limit * 0.75);
  const tail = limit - head;
  return `${text.slice(0, head)}\n…[${text.length - limit} characters cut]…\n${text.slice(-tail)}`;
}

// A JSON copy of the event, bounded: what is stored is exactly what export gives back.
function normalize(event) {
  if (!event || typeof event !== "object" || typeof event.session !== "string" || !event.session
      || typeof event.type !== "string") {
    throw new TypeError(
      `SessionStore: an event needs a non-empty string "session" and a string "type", got ${
        JSON.stringify(event)?.slice(0, 200)}`,
    );
  }
  const copy = JSON.parse(JSON.stringify(event));
  const truncated = {};
  if (typeof copy.content === "string" && copy.content.length > MAX_CONTENT_CHARS) {
    truncated.content_chars = copy.content.length;
    copy.content = cut(copy.content, MAX_CONTENT_CHARS);
  }
  if (copy.meta && typeof copy.meta === "object") {
    const metaChars = JSON.stringify(copy.meta).length;
    if (metaChars > MAX_META_CHARS) {
      // Keep the one field the listing reads (meta.state) and say what was dropped.
      const kept = "state" in copy.meta ? { state: copy.meta.state } : {};
      copy.meta = { ...kept, meta_chars: metaChars };
      truncated.meta = true;
    }
  }
  if (Object.keys(truncated).length) {
    copy.meta = { ...(copy.meta && typeof copy.meta === "object" ? copy.meta : {}),
      truncated: { ...truncated, limit_chars: MAX_CONTENT_CHARS } };
  }
  return copy;
}

function timestamp(event) {
  return typeof event.ts === "number" ? event.ts : Date.now() / 1000;
}

// The summary of a session after one more event. `turn` is the newest turn started;
// `finalTurn`/`finalState` describe the newest final event.
function summarize(summary, event, key) {
  const ts = timestamp(event);
  const next = summary ?? {
    session: event.session, title: "", started: ts, updated: ts, events: 0, firstKey: key,
    turn: 0, finalTurn: -1, finalState: null,
  };
  next.events += 1;
  next.updated = Math.max(next.updated, ts);
  const turn = Number.isInteger(event.turn) ? event.turn : next.turn;
  if (event.type === "turn_start") {
    next.turn = Math.max(next.turn, turn);
    if (!next.title) next.title = String(event.content ?? "").slice(0, MAX_TITLE_CHARS);
  } else if (event.type === "final") {
    next.finalTurn = turn;
    next.finalState = event.meta?.state ?? "completed";
  }
  return next;
}

// Turns are numbered from 1; events of turn 0 frame the session (session_start, session_end).
function turnIsOpen(summary) {
  return summary.turn > 0 && summary.finalTurn < summary.turn;
}

function lastState(summary, running) {
  if (summary.turn === 0) return "idle";
  if (!turnIsOpen(summary)) return summary.finalState;
  return running.has(summary.session) ? "running" : "interrupted";
}

// Turns running in this page: session id -> function releasing its Web Lock.
const runningHere = new Map();

function holdLock(name) {
  let release = null;
  let released = false;
  navigator.locks.request(name, () => new Promise((resolve) => {
    release = resolve;
    if (released) resolve();
  })).catch(() => {});
  return () => { released = true; release?.(); };
}

function markRunning(summary) {
  const id = summary.session;
  const open = turnIsOpen(summary);
  if (open && !runningHere.has(id)) {
    runningHere.set(id, globalThis.navigator?.locks ? holdLock(LOCK_PREFIX + id) : () => {});
  } else if (!open && runningHere.has(id)) {
    runningHere.get(id)();
    runningHere.delete(id);
  }
}

async function sessionsRunningAnywhere() {
  const names = new Set(runningHere.keys());
  if (globalThis.navigator?.locks?.query) {
    try {
      const { held = [] } = await navigator.locks.query();
      for (const lock of held) {
        if (lock.name?.startsWith(LOCK_PREFIX)) names.add(lock.name.slice(LOCK_PREFIX.length));
      }
    } catch { /* no lock manager (opaque origin): this page's own turns are still known */ }
  }
  return names;
}

function openDatabase(name) {
  return new Promise((resolve, reject) => {
    const idb = globalThis.indexedDB;
    if (!idb) {
      reject(unavailable("this browser gives the page no IndexedDB (private mode or a sandboxed frame?)."));
      return;
    }
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      reject(unavailable(
        `the database did not open within ${OPEN_TIMEOUT_MS / 1000} s; close other tabs of this page and reload.`,
      ));
    }, OPEN_TIMEOUT_MS);
    const done = (fn, value) => { clearTimeout(timer); fn(value); };
    let request;
    try {
      request = idb.open(name, DB_VERSION);
    } catch (error) {
      done(reject, unavailable(describe(error), error));
      return;
    }
    request.onupgradeneeded = () => {
      const db = request.result;
      if (!db.objectStoreNames.contains(EVENTS)) {
        // Out-of-line keys: the stored value is exactly the event, with no key field added.
        db.createObjectStore(EVENTS, { autoIncrement: true }).createIndex("session", "session");
      }
      if (!db.objectStoreNames.contains(SESSIONS)) db.createObjectStore(SESSIONS, { keyPath: "session" });
    };
    request.onsuccess = () => {
      if (timedOut) request.result.close(); // the caller was already told it failed
      else done(resolve, request.result);
    };
    request.onerror = () => done(reject, unavailable(describe(request.error), request.error));
  });
}

export class SessionStore {
  static async open(name = "agent_py") {
    return new SessionStore(await openDatabase(name));
  }

  constructor(db) {
    this.db = db;
    this.closedBecause = null;
    // Another tab upgrading the schema must not wait on us; later calls then say why they fail.
    db.onversionchange = () => {
      db.close();
      this.closedBecause = "a newer version of the page opened it in another tab; reload this page.";
    };
    db.onclose = () => {
      this.closedBecause = "the browser closed the database (site data cleared?); reload the page.";
    };
  }

  transaction(stores, mode) {
    if (this.closedBecause) throw unavailable(this.closedBecause);
    try {
      // "relaxed": committed once the browser has the data (survives a reload or a tab crash)
      // without an fsync per event; only a power cut can lose the last moments of a run.
      return this.db.transaction(stores, mode, { durability: "relaxed" });
    } catch (error) {
      throw unavailable(describe(error), error);
    }
  }

  /** Store one event; resolves once it is committed. */
  async append(event) {
    await this.appendMany([event]);
  }

  /** Store events in order in one transaction (an import, or a burst the UI batched). */
  async appendMany(events) {
    const copies = Array.from(events, normalize);
    if (!copies.length) return 0;
    const tx = this.transaction([EVENTS, SESSIONS], "readwrite");
    const done = committed(tx, "save the event");
    const eventStore = tx.objectStore(EVENTS);
    const summaryStore = tx.objectStore(SESSIONS);
    const summaries = new Map();
    // Requests of one transaction run in the order they were made: the summaries are read
    // before the first event is added, and written after the last event's key is known.
    // Callbacks rather than awaits keep the transaction alive.
    for (const id of new Set(copies.map((e) => e.session))) {
      const read = summaryStore.get(id);
      read.onsuccess = () => summaries.set(id, read.result);
    }
    copies.forEach((copy, index) => {
      const added = eventStore.add(copy);
      added.onsuccess = () => {
        summaries.set(copy.session, summarize(summaries.get(copy.session), copy, added.result));
        if (index === copies.length - 1) for (const summary of summaries.values()) summaryStore.put(summary);
      };
    });
    await done;
    for (const summary of summaries.values()) markRunning(summary);
    return copies.length;
  }

  /** Newest session first. `lastState` is meta.state of the last turn's final event; without
   *  one, "running" while a tab is running that turn, else "interrupted" (the page was reloaded
   *  or closed mid-turn); "idle" before any turn started. */
  async sessions() {
    const tx = this.transaction([SESSIONS], "readonly");
    const [summaries, running] = await Promise.all([
      result(tx.objectStore(SESSIONS).getAll()).catch((error) => { throw failure("list sessions", error); }),
      sessionsRunningAnywhere(),
    ]);
    summaries.sort((a, b) => b.started - a.started || b.firstKey - a.firstKey);
    return summaries.map((s) => ({
      session: s.session,
      title: s.title,
      started: s.started,
      updated: s.updated,
      events: s.events,
      lastState: lastState(s, running),
    }));
  }

  /** The events of one session in arrival order, as stored (a packed turn's unpacked). */
  async events(session) {
    const tx = this.transaction([EVENTS], "readonly");
    const records = await result(tx.objectStore(EVENTS).index("session").getAll(session))
      .catch((error) => { throw failure("read the session", error); });
    return records.flatMap((record) => (record.type === PACKED ? record.events : [record]));
  }

  /**
   * Put the events of a finished turn into one record, at the key of its first event, so a
   * long session holds a few records a turn instead of one per event. What events() and the
   * export give back does not change.
   */
  async packTurn(session, turn) {
    const tx = this.transaction([EVENTS], "readwrite");
    const done = committed(tx, "pack the turn's events");
    const eventStore = tx.objectStore(EVENTS);
    const keys = [];
    const events = [];
    const cursor = eventStore.index("session").openCursor(IDBKeyRange.only(session));
    cursor.onsuccess = () => {
      const at = cursor.result;
      if (at) {
        if (at.value.type !== PACKED && at.value.turn === turn) {
          keys.push(at.primaryKey);
          events.push(at.value);
        }
        at.continue();
        return;
      }
      if (events.length < 2) return;
      for (const key of keys) eventStore.delete(key);
      eventStore.put({ session, turn, type: PACKED, events }, keys[0]);
    };
    await done;
  }

  /** One JSON line per stored event ("" for an unknown session). */
  async exportJsonl(session) {
    const events = await this.events(session);
    return events.map((event) => JSON.stringify(event) + "\n").join("");
  }

  async delete(session) {
    const tx = this.transaction([EVENTS, SESSIONS], "readwrite");
    const done = committed(tx, "delete the session");
    const events = tx.objectStore(EVENTS);
    tx.objectStore(SESSIONS).delete(session);
    const keys = events.index("session").getAllKeys(session);
    keys.onsuccess = () => { for (const key of keys.result) events.delete(key); };
    await done;
  }

  async clear() {
    const tx = this.transaction([EVENTS, SESSIONS], "readwrite");
    const done = committed(tx, "clear the history");
    tx.objectStore(EVENTS).clear();
    tx.objectStore(SESSIONS).clear();
    await done;
  }

  close() {
    this.db.close();
    this.closedBecause = "it was closed by the page.";
  }
}

/** Save text as a .jsonl file through the browser's download prompt. */
export function downloadJsonl(filename, text) {
  const url = URL.createObjectURL(new Blob([text], { type: "application/x-ndjson" }));
  const link = Object.assign(document.createElement("a"), { href: url, download: filename });
  link.style.display = "none";
  document.body.append(link);
  link.click();
  link.remove();
  // The download has started reading the Blob by now; revoking later frees it without racing it.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
