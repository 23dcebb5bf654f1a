// Plan review (UI thread): when the settings say so (review_plans), a run pauses after planning
// and the plan comes here (plan-review, from user-port.js). The panel, in the running turn,
// shows each step's tool, goal and input or arguments; the user may edit a goal or an input,
// delete a step, then approve (the edited plan goes back, and Python holds it to the plan's
// rules: agent_py/core/review.py) or cancel the run. A refused edit comes back with the reason and
// the form as the user left it.
//
// "Always allow" is per MCP tool, kept in this browser: a plan whose MCP tools are all allowed
// is approved without being shown (review_plans "remote"; the history says so).
import { ToUI, toWorker } from "../protocol.js";

const ALLOW_KEY = "agent_py.always_allow";

export function alwaysAllowed() {
  try {
    const stored = JSON.parse(localStorage.getItem(ALLOW_KEY) || "[]");
    return new Set(Array.isArray(stored) ? stored.map(String) : []);
  } catch {
    return new Set();
  }
}

function allow(names) {
  const allowed = alwaysAllowed();
  for (const name of names) allowed.add(name);
  localStorage.setItem(ALLOW_KEY, JSON.stringify([...allowed].sort()));
}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "text") node.textContent = value;
    else if (key === "value") node.value = value;
    else if (value === true) node.setAttribute(key, "");
    else if (value !== false && value !== null && value !== undefined) node.setAttribute(key, value);
  }
  node.append(...children);
  return node;
}

export class PlanReview {
  #send;
  #where;
  #onShow;
  #open = null; // {id, section}
  #lastEdit = null; // the plan the user last sent, shown again when it is refused

  /** `send(message)` posts to the worker; `where()` is the element the panel goes into;
   * `onShow()` runs when a plan waits for the user. */
  constructor({ send, where, onShow = () => {} }) {
    this.#send = send;
    this.#where = where;
    this.#onShow = onShow;
  }

  /** Handles the worker's plan-review message; true when it was one. */
  onWorkerMessage(message) {
    if (message.type !== ToUI.PLAN_REVIEW) return false;
    this.#show(message.id, message.request);
    return true;
  }

  /** The run ended (or the worker was replaced): an open review goes away unanswered. */
  close() {
    this.#open?.section.remove();
    this.#open = null;
    this.#lastEdit = null;
  }

  #answer(answer) {
    const { id, section } = this.#open;
    section.remove();
    this.#open = null;
    this.#send(toWorker.planReviewed(id, answer));
  }

  #show(id, { plan, tools, policy, problem, question }) {
    this.#open?.section.remove();
    const remote = Object.keys(tools || {}).filter((name) => tools[name].remote);
    const allowed = alwaysAllowed();
    if (policy === "remote" && !problem && remote.length && remote.every((name) => allowed.has(name))) {
      this.#send(toWorker.planReviewed(id, { action: "approve", auto: true }));
      return;
    }
    const shown = problem && this.#lastEdit ? this.#lastEdit : plan;
    const steps = [];
    const form = el("form", { class: "plan-review-form" });
    for (const task of shown.tasks) {
      const fieldset = el("fieldset", {}, el("legend", { text: `${task.task_id}: ${task.task_goal}` }));
      for (const step of task.steps) {
        const hasInput = typeof step.input === "string";
        const goal = el("input", { type: "text", value: step.step_goal, "aria-label": `Goal of ${step.step_id}` });
        const body = el("textarea", {
          rows: 3,
          "aria-label": hasInput ? `Input of ${step.step_id}` : `Arguments of ${step.step_id}`,
          value: hasInput ? step.input : JSON.stringify(step.arguments ?? {}, null, 1),
        });
        const item = el("div", { class: "review-step", "data-step": step.step_id });
        const remove = el("button", { type: "button", text: `Delete ${step.step_id}` });
        remove.addEventListener("click", () => {
          const deleted = item.classList.toggle("deleted");
          remove.textContent = `${deleted ? "Restore" : "Delete"} ${step.step_id}`;
          goal.disabled = body.disabled = deleted;
        });
        item.append(
          el("p", {}, el("strong", { text: step.step_id }), ` ${step.tool_name}`),
          goal,
          body,
          remove,
        );
        fieldset.append(item);
        steps.push({ task, step, item, goal, body, hasInput });
      }
      form.append(fieldset);
    }
    const checks = remote.map((name) => {
      const box = el("input", { type: "checkbox", name });
      form.append(el("label", { class: "inline" }, box, ` Always allow ${name}`));
      return box;
    });
    const error = el("p", { class: "failure", role: "alert", text: problem ? `Not accepted: ${problem}` : "" });
    const approve = el("button", { type: "submit", text: "Approve and run" });
    const cancel = el("button", { type: "button", text: "Cancel run" });
    form.append(error, el("div", { class: "buttons" }, approve, cancel));
    cancel.addEventListener("click", () => this.#answer({ action: "cancel" }));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      let edited;
      try {
        edited = this.#edited(shown, steps);
      } catch (failure) {
        error.textContent = failure.message;
        return;
      }
      allow(checks.filter((box) => box.checked).map((box) => box.name));
      const changed = JSON.stringify(edited) !== JSON.stringify(plan);
      this.#lastEdit = changed ? edited : null;
      this.#answer({ action: "approve", plan: changed ? edited : null });
    });
    const section = el(
      "section",
      { class: "plan-review", "aria-label": "Plan review" },
      el("h3", { text: "Review the plan" }),
      el("p", { class: "muted", text: `For: ${question}. Edit a goal or an input, delete a step, then approve; or cancel the run.` }),
      form,
    );
    this.#where().append(section);
    this.#open = { id, section };
    this.#onShow();
  }

  /** The plan as the form has it; throws an Error naming a step whose arguments are no JSON. */
  #edited(shown, steps) {
    const tasks = shown.tasks.map((task) => ({ ...task, steps: [] }));
    for (const { task, step, item, goal, body, hasInput } of steps) {
      if (item.classList.contains("deleted")) continue;
      const copy = { ...step, step_goal: goal.value };
      if (hasInput) {
        copy.input = body.value;
      } else {
        try {
          copy.arguments = JSON.parse(body.value);
        } catch (failure) {
          throw new Error(`The arguments of ${step.step_id} are not JSON: ${failure.message}`);
        }
      }
      tasks[shown.tasks.indexOf(task)].steps.push(copy);
    }
    return { tasks: tasks.filter((task) => task.steps.length) };
  }
}
