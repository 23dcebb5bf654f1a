// What the engine waits for, in the model bar: a model server that has sent nothing yet (the
// worker's "waiting" messages). Shown once it lasts WAIT_SHOWN_AFTER_MS, with its time, so a
// silent server is told apart from a slow page; Stop ends it, and the silence limit in Settings
// bounds it.
export const WAIT_SHOWN_AFTER_MS = 5_000;

export class WaitShown {
  /** `text`: the model bar's line; `row`: the bar, unhidden when a wait shows. */
  constructor(text, row) {
    this.text = text;
    this.row = row;
    this.ticker = null;
    this.before = null; // the line the wait replaced, put back when it ends
    /** Each wait reported since the page opened (for tests): {what, shown}. */
    this.seen = [];
  }

  /** `what`: "the model server at … to answer …", or null: the wait is over. */
  update(what) {
    clearInterval(this.ticker);
    this.ticker = null;
    if (this.before !== null) {
      this.text.textContent = this.before;
      this.before = null;
    }
    if (!what) return;
    const since = performance.now();
    const record = { what, shown: false };
    this.seen.push(record);
    this.ticker = setInterval(() => {
      const ms = performance.now() - since;
      if (ms < WAIT_SHOWN_AFTER_MS) return;
      if (this.before === null) this.before = this.text.textContent;
      this.row.hidden = false;
      this.text.textContent = `Waiting for ${what} (${Math.round(ms / 1000)} s). Stop ends the wait.`;
      record.shown = true;
    }, 1_000);
  }
}
