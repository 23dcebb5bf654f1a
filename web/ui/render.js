// Draws agent events. A pure function of the event stream: the same code draws a live run and
// a session reopened from IndexedDB. Model output is never inserted as HTML, except the final
// answer, which goes through marked and then DOMPurify.
import { marked } from "../vendor/marked/marked.esm.js";
import DOMPurify from "../vendor/dompurify/purify.es.mjs";
import { downloadFile, sizeText } from "./workspace-panel.js";

const STATUS_TEXT = { pending: "pending", running: "running", completed: "completed", failed: "failed", dropped: "dropped" };

export function renderMarkdown(text) {
  const html = marked.parse(String(text), { async: false, gfm: true });
  // No scripts, no event handlers, no forms; links open safely.
  return DOMPurify.sanitize(html, { USE_PROFILES: { html: true }, FORBID_TAGS: ["style", "form", "input"] });
}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  node.append(...children);
  return node;
}

// Turns drawn in full; older ones fold to their question, state and a Show button, so a long
// session keeps a bounded DOM (a 9-step turn is about 600 nodes). Show draws one again.
export const KEPT_TURNS = 5;

// The files a run's steps wrote, each with a button that downloads it from the workspace (a file
// deleted since, or written again by a later run, says so rather than download another).
function filesWritten(files) {
  const list = el("ul", { class: "answer-files", "aria-label": "Files written" });
  for (const { name, size } of files) {
    const button = el("button", { type: "button", "aria-label": `Download ${name}`, text: "Download" });
    const note = el("span", { class: "muted" });
    button.addEventListener("click", () => {
      note.textContent = "";
      downloadFile(name).catch((error) => { note.textContent = ` ${error.message}`; });
    });
    list.append(el("li", {}, el("span", { class: "tool", text: name }), ` (${sizeText(size)}) `, button, note));
  }
  return list;
}

export class RunView {
  /**
   * @param {HTMLElement} root
   * @param {{onUnfold?: (session: string, turn: number, section: HTMLElement) => void}} options
   *   onUnfold: the Show button of a folded turn (its events are in the session store)
   */
  constructor(root, { onUnfold = null } = {}) {
    this.root = root;
    this.onUnfold = onUnfold;
    this.turn = null;
    this.unfolded = []; // turns drawn in full, oldest first
  }

  clear() {
    this.root.replaceChildren();
    this.turn = null;
    this.unfolded = [];
  }

  apply(event) {
    const handler = this[`on_${event.type}`];
    if (handler) handler.call(this, event);
  }

  // --- turn framing -------------------------------------------------------------------------
  on_turn_start(event) {
    const section = el("article", { class: "turn", "aria-label": `Turn ${event.turn}` });
    const question = el("p", { class: "turn-question", text: event.content });
    const state = el("p", { class: "turn-state", text: "starting" });
    const thinking = el("details", { class: "thinking turn-thinking", hidden: "" },
      el("summary", { text: "Planner thinking" }), el("pre"));
    const plan = el("div", { class: "plan", "aria-label": "Plan" });
    const outcome = el("div", { class: "outcome" });
    section.append(question, state, thinking, plan, outcome);
    this.root.append(section);
    this.turn = { section, state, thinking, plan, outcome, steps: new Map(), session: event.session, number: event.turn };
    this.unfolded.push(this.turn);
    while (this.unfolded.length > KEPT_TURNS) this.fold(this.unfolded.shift());
  }

  /** The turn's article reduced to its question, its state and a Show button. */
  fold(turn) {
    const { section } = turn;
    const question = section.querySelector(".turn-question").textContent;
    const state = section.dataset.state || turn.state.textContent;
    const show = el("button", { type: "button", class: "unfold", text: "Show" });
    show.setAttribute("aria-label", `Show turn ${turn.number}`);
    // Only the names: a closure over `turn` would keep its drawn nodes alive, detached.
    const { session, number } = turn;
    show.onclick = () => this.onUnfold?.(session, number, section);
    section.replaceChildren(
      el("p", { class: "turn-question", text: question }),
      el("p", { class: "turn-state", text: state }),
      show,
    );
    section.dataset.folded = "true";
  }

  ensureTurn(event) {
    if (!this.turn) this.on_turn_start({ turn: event.turn, content: "(earlier task)" });
    return this.turn;
  }

  on_state(event) {
    this.ensureTurn(event).state.textContent = event.content;
  }

  // --- plan and steps -----------------------------------------------------------------------
  on_plan_reviewed(event) {
    const turn = this.ensureTurn(event);
    turn.plan.before(el("p", { class: "review-note muted", text: `Plan review: ${event.content}` }));
  }

  on_plan_started(event) {
    const turn = this.ensureTurn(event);
    turn.plan.replaceChildren(el("h3", { text: "Plan" }));
    this.addTasks(turn, event.meta.plan.tasks);
  }

  on_reflection(event) {
    const turn = this.ensureTurn(event);
    const note = el("p", { class: "reflection muted", text: `Rethink after ${event.meta.task}: ${event.meta.status}` });
    turn.plan.append(note);
    if (event.meta.status === "changed" && event.meta.plan) {
      for (const item of turn.steps.values()) {
        if (item.li.dataset.status === "pending") this.setStatus(item, "dropped");
      }
      turn.plan.append(el("h3", { text: "Revised plan" }));
      this.addTasks(turn, event.meta.plan.tasks);
    }
  }

  addTasks(turn, tasks) {
    const list = el("ol", { class: "tasks" });
    for (const task of tasks) {
      const steps = el("ol", { class: "steps" });
      for (const step of task.steps) {
        const status = el("span", { class: "status", text: STATUS_TEXT.pending });
        const li = el("li", { class: "step", dataset: { step: step.step_id, status: "pending" } },
          status, " ",
          el("span", { class: "tool", text: step.tool_name }), " ",
          el("span", { class: "goal", text: step.step_goal }));
        const input = el("details", { class: "input", hidden: "" }, el("summary", { text: "Input" }), el("pre"));
        const thinking = el("details", { class: "thinking", hidden: "" }, el("summary", { text: "Thinking" }), el("pre"));
        const output = el("details", { class: "output", hidden: "" }, el("summary", { text: "Output" }), el("pre"));
        li.append(input, thinking, output);
        steps.append(li);
        turn.steps.set(step.step_id, { li, status, input, thinking, output });
      }
      list.append(el("li", { class: "task" }, el("span", { class: "task-goal", text: task.task_goal }), steps));
    }
    turn.plan.append(list);
  }

  step(event) {
    return this.ensureTurn(event).steps.get(event.step);
  }

  setStatus(item, status) {
    item.li.dataset.status = status;
    item.status.textContent = STATUS_TEXT[status];
  }

  on_step_started(event) {
    const item = this.step(event);
    if (item) this.setStatus(item, "running");
  }

  on_action(event) {
    const item = this.step(event);
    if (!item) return;
    item.input.hidden = false;
    item.input.querySelector("pre").textContent = event.content;
  }

  on_observation(event) {
    const item = this.step(event);
    if (!item) return;
    item.output.hidden = false;
    item.output.querySelector("pre").textContent = event.content;
  }

  on_step_completed(event) {
    const item = this.step(event);
    if (item) this.setStatus(item, "completed");
  }

  on_step_failed(event) {
    const item = this.step(event);
    if (!item) return;
    this.setStatus(item, "failed");
    item.output.hidden = false;
    item.output.open = true;
    item.output.querySelector("pre").textContent = event.content;
  }

  on_thinking(event) {
    const turn = this.ensureTurn(event);
    const target = (event.step && turn.steps.get(event.step)?.thinking) || turn.thinking;
    target.hidden = false;
    const pre = target.querySelector("pre");
    pre.textContent += (pre.textContent ? "\n\n" : "") + event.content;
  }

  // --- the end of a turn --------------------------------------------------------------------
  on_final(event) {
    const turn = this.ensureTurn(event);
    const state = event.meta.state;
    turn.state.textContent = state;
    turn.section.dataset.state = state;
    const stats = event.meta.stats;
    if (stats) {
      const calls = Object.values(stats.model_calls || {}).reduce((a, b) => a + b, 0);
      turn.state.textContent = `${state} · ${(stats.wall_time_s ?? 0).toFixed(1)} s · ${calls} model call${calls === 1 ? "" : "s"}`;
    }
    if (state === "completed") {
      const answer = el("div", { class: "answer", "aria-label": "Answer" });
      answer.innerHTML = renderMarkdown(event.content);
      turn.outcome.replaceChildren(el("h3", { text: "Answer" }), answer);
      if (event.meta.files?.length) turn.outcome.append(filesWritten(event.meta.files));
    } else if (state === "cancelled") {
      turn.outcome.replaceChildren(el("p", { class: "failure", text: "Stopped by the user." }));
    } else {
      turn.outcome.replaceChildren(el("p", { class: "failure", text: `The task failed: ${event.content}` }));
    }
    for (const item of turn.steps.values()) {
      if (item.li.dataset.status === "running") this.setStatus(item, state === "cancelled" ? "dropped" : "failed");
    }
  }

  /** The last turn, when it has no final event: the page was reloaded mid-run, or the agent
   * was restarted. `why` is shown as its state. */
  markInterrupted(why = "interrupted by a page reload") {
    if (this.turn && !this.turn.section.dataset.state) {
      this.turn.state.textContent = why;
      this.turn.section.dataset.state = "interrupted";
    }
  }
}
