// Opens the store and puts it on window: window.store, window.SessionStore,
// window.downloadJsonl. <body data-status="ready|failed"> tells a test when to start.
//
// window.runEvents(session, count) imitates a live run: each event is shown (a list item, and
// its index in sessionStorage, which outlives a reload) only after append() resolved, so a test
// can reload mid-run and check that everything shown was kept.
import { SessionStore, downloadJsonl } from "../ui/sessions.js";

const status = document.getElementById("status");
const shown = document.getElementById("shown");

window.SessionStore = SessionStore;
window.downloadJsonl = downloadJsonl;

window.runEvents = async (session, count) => {
  for (let i = 0; i < count; i += 1) {
    const event = {
      ts: Date.now() / 1000, session, turn: 1, step: null, type: "step_progress",
      content: `event ${i}`, meta: { index: i },
    };
    await window.store.append(event);
    shown.append(Object.assign(document.createElement("li"), { textContent: event.content }));
    sessionStorage.setItem(`shown:${session}`, String(i));
  }
};

SessionStore.open().then(
  (store) => {
    window.store = store;
    status.textContent = "Session history open.";
    document.body.dataset.status = "ready";
  },
  (error) => {
    window.openError = String(error.message || error);
    status.textContent = window.openError;
    document.body.dataset.status = "failed";
  },
);
