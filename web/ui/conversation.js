// The conversation on the page: the agent's events, stored in the session history
// (sessions.js) before they are drawn (render.js); the session the next run continues, kept
// across reloads and sent to every worker that boots; and the Sessions list, to open, continue
// or export an earlier one.
import { toWorker } from "../protocol.js";
import { RunView } from "./render.js";
import { SessionStore, downloadJsonl } from "./sessions.js";
import { setStatus, showError } from "./status-line.js";

const SESSION_KEY = "agent_py.session"; // the conversation the next run continues
// What the worker needs of a stored session to continue it: its turns' framing and digests.
const SESSION_FRAMING = new Set(["session_start", "turn_start", "final", "turn_end"]);

const $ = (id) => document.getElementById(id);

export class Conversation {
  /** The session history (sessions.js): null until it has opened, or when it cannot. */
  store = null;
  #storeFailed = false;
  #storeSettled;
  #storeSettledOnce = new Promise((resolve) => { this.#storeSettled = resolve; });
  /** The session the next run continues (null: a new one). */
  current = localStorage.getItem(SESSION_KEY);
  /** Settles once every event received so far is stored and drawn. */
  drawn = Promise.resolve();
  #unsaved = [];
  /** Settles once the session posted last is with the worker: a run is posted after it. */
  sessionSent = Promise.resolve();
  #link;
  #isRunning;

  /**
   * @param {object} parts
   * @param {HTMLElement} parts.root  where the run view draws
   * @param {import("./agent-link.js").AgentLink} parts.link
   * @param {() => boolean} parts.isRunning  whether a task runs (no session changes meanwhile)
   */
  constructor({ root, link, isRunning }) {
    this.#link = link;
    this.#isRunning = isRunning;
    this.view = new RunView(root, { onUnfold: (session, turn, section) => this.#unfoldTurn(session, turn, section) });
  }

  // --- events: stored first, then drawn ----------------------------------------------------------
  // Events wait in `unsaved` while the store commits earlier ones, then go in one transaction:
  // one per batch the worker sent (a turn of its loop) while the store is idle, fewer when the
  // store is busy (a transaction costs the UI thread and the browser far more than an event).
  onEvents(events) {
    const queued = this.#unsaved.length > 0; // a save is waiting to start: these go with it
    this.#unsaved.push(...events);
    if (queued) return;
    this.drawn = this.drawn.then(async () => {
      const batch = this.#unsaved;
      this.#unsaved = [];
      if (this.store && !this.#storeFailed) {
        try {
          await this.store.appendMany(batch);
          // A finished turn's events go into one record: a long session stays a few records a turn.
          for (const event of batch) if (event.type === "turn_end") await this.store.packTurn(event.session, event.turn);
        } catch (error) {
          this.#storeFailed = true;
          showError(`Session history is not being saved: ${error.message || error}`);
        }
      }
      for (const event of batch) this.#drawEvent(event);
    });
  }

  #drawEvent(event) {
    if (event.type === "turn_start" && event.session !== this.current) this.remember(event.session);
    this.view.apply(event);
    // Automation hook: `python -m agent_py run` exposes this function to follow the run.
    if (typeof window.__agent_py_event === "function") window.__agent_py_event(event);
    if (event.type === "final") {
      const state = event.meta.state;
      setStatus(state === "completed" ? "Completed" : state === "cancelled" ? "Stopped by the user" : `Failed: ${event.content}`);
      this.refreshList();
    }
  }

  // --- the conversation: turns of one session, continued across reloads ----------------------------
  remember(session) {
    this.current = session;
    if (session) localStorage.setItem(SESSION_KEY, session);
    else localStorage.removeItem(SESSION_KEY);
  }

  /** Posts the session the next run continues (its stored events), after any posted before. */
  post(events) {
    const target = this.#link.worker;
    const framing = () => events.then((all) => all.filter((event) => SESSION_FRAMING.has(event.type)));
    this.sessionSent = this.sessionSent.then(framing).then((kept) => target.postMessage(toWorker.session(kept)));
    return this.sessionSent;
  }

  /** Tells the (re)booted worker which session the next run continues: its stored turns. */
  send() {
    return this.post(
      this.#storeSettledOnce.then(() => (this.current && this.store && !this.#storeFailed ? this.store.events(this.current) : [])).catch((error) => {
        showError(`The conversation could not be continued: ${error.message || error}`);
        return [];
      }),
    );
  }

  /** Continue `session` (null: a new one) from the next run. */
  choose(session) {
    this.remember(session);
    if (this.#link.ready) this.send();
  }

  startNew() {
    if (this.#isRunning()) return;
    this.view.clear();
    $("session-notice").hidden = true;
    this.choose(null);
    setStatus("New session");
    $("task").focus();
  }

  // --- sessions ------------------------------------------------------------------------------------
  /** Opens the session history and draws the session the page continues: the last one when a
   * reload cut it short, or the one before the reload. */
  async restore() {
    try {
      this.store = await SessionStore.open();
      const sessions = await this.store.sessions();
      const last = sessions[0];
      if (last && (last.lastState === "running" || last.lastState === "interrupted")) {
        await this.open(last.session);
        this.remember(last.session);
        $("session-notice").hidden = false;
        $("session-notice").textContent = "The last session was interrupted by a page reload; everything shown before is kept below.";
      } else if (this.current && sessions.some((session) => session.session === this.current)) {
        await this.open(this.current); // the conversation as it was before the reload
      } else {
        this.remember(null);
      }
      await this.refreshList();
    } catch (error) {
      showError(String(error.message || error)); // sessions.js says "Session history is unavailable: …"
    } finally {
      this.#storeSettled();
    }
  }

  async refreshList() {
    if (!this.store) return;
    const list = $("sessions");
    let sessions;
    try {
      sessions = await this.store.sessions();
    } catch (error) {
      list.replaceChildren(Object.assign(document.createElement("li"), { textContent: String(error.message || error) }));
      return;
    }
    list.replaceChildren(
      ...sessions.map((session) => {
        const li = document.createElement("li");
        const title = Object.assign(document.createElement("span"), {
          className: "title",
          textContent: `${session.title || "(untitled)"} — ${session.lastState}, ${session.events} events`,
        });
        const open = Object.assign(document.createElement("button"), { type: "button", textContent: "Open" });
        open.setAttribute("aria-label", `Open session ${session.title || session.session}`);
        open.onclick = async () => {
          if (this.#isRunning()) return;
          await this.open(session.session);
          this.choose(session.session); // the next run continues it
        };
        const exportButton = Object.assign(document.createElement("button"), { type: "button", textContent: "Export JSONL" });
        exportButton.setAttribute("aria-label", `Export session ${session.title || session.session} as JSONL`);
        exportButton.onclick = async () => downloadJsonl(`agent_py-${session.session}.jsonl`, await this.store.exportJsonl(session.session));
        li.append(title, open, exportButton);
        return li;
      }),
    );
  }

  async open(session) {
    const events = await this.store.events(session);
    this.view.clear();
    for (const event of events) this.view.apply(event);
    this.view.markInterrupted();
  }

  // A folded turn's Show: its events from the store, drawn in full in its place.
  async #unfoldTurn(session, turn, section) {
    try {
      const events = (await this.store.events(session)).filter((event) => event.turn === turn);
      const drawn = new RunView(document.createElement("div"));
      for (const event of events) drawn.apply(event);
      if (drawn.turn) section.replaceWith(drawn.turn.section);
    } catch (error) {
      showError(String(error.message || error));
    }
  }
}
