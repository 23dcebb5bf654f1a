"""The loop: plan, run each task's steps concurrently, rethink, answer.

The planner keeps one append-only conversation (plan, then each rethink, then the answer)
so an engine that reuses its KV cache for a growing conversation (WebLLM) only prefills
what is new.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from agent_py.core.answer_checks import data_left_out, unusable_answer
from agent_py.core.budget import BYTES_PER_TOKEN, MESSAGE_OVERHEAD_TOKENS, prompt_tokens
from agent_py.core.concurrency import run_together
from agent_py.core.conversation import TurnDigest
from agent_py.core.decline import DECLINE_TOOL, TaskDeclined, declined_because
from agent_py.core.errors import PlanCancelled, PlanParseError, ReplyParseError, RunFailure
from agent_py.core.events import AgentState, EventType
from agent_py.core.execution import (
    CallMemory,
    StepExecutor,
    StepOutcome,
    digest_results,
    result_statuses,
)
from agent_py.core.history import EventRecorder
from agent_py.core.llm import CallOptions, CallPurpose, ModelRole, Sampling, Usage
from agent_py.core.messages import Keep, Message, stand_ins
from agent_py.core.model_client import ModelClient
from agent_py.core.parsing import (
    RethinkDecision,
    RethinkStatus,
    clean_answer,
    parse_plan,
    parse_rethink,
)
from agent_py.core.plan import (
    PlanSchema,
    PlanShape,
    TaskSchema,
    cut_runaway_inputs,
    give_copied_text_whole,
    merge_duplicate_steps,
    plan_json_schema,
    rename_reused_ids,
)
from agent_py.core.plan_prompts import (
    matching_tools,
    nearest_example_turns,
    plan_example_turns,
    plan_system_message,
    relevant_tools,
)
from agent_py.core.profiles import Strategy
from agent_py.core.prompts import render
from agent_py.core.registry import ToolRegistry
from agent_py.core.review import (
    PlanReviewer,
    ReviewPolicy,
    checked_edit,
    needs_review,
    plan_changes,
    remote_tools,
)
from agent_py.core.tool import ToolResult

DIGEST_MARGIN_TOKENS = 64  # the digest's own framing lines, estimated on the safe side
DIGEST_FLOOR_CHARS = 240  # results get at least this much, even in a full window


@dataclass
class PlanRun:
    """What a run produced, kept even when it fails part-way."""

    answer: str = ""
    plans: list[PlanSchema] = field(default_factory=list)
    outcomes: list[StepOutcome] = field(default_factory=list)
    replans: int = 0
    plan_reply: str = ""
    """The model's reply that gave the first plan, as it wrote it (a later turn is shown it)."""


StateListener = Callable[[AgentState], None]


class PlanAndRethink:
    def __init__(
        self,
        model: ModelClient,
        registry: ToolRegistry,
        recorder: EventRecorder,
        *,
        max_steps: int,
        max_replans: int,
        tool_timeout_s: float,
        on_state: StateListener,
        plan_shape: PlanShape | None = None,
        strategy: Strategy | None = None,
        reviewer: PlanReviewer | None = None,
        review: ReviewPolicy = "off",
    ) -> None:
        self.model = model
        self.reviewer = reviewer
        self.review = review
        self.registry = registry
        self.recorder = recorder
        self.max_steps = max_steps
        self.max_replans = max_replans
        self.strategy = strategy or Strategy()
        self.executor = StepExecutor(
            registry,
            model,
            recorder,
            tool_timeout_s=tool_timeout_s,
            examples=self.strategy.examples,
            fenced_code=self.strategy.fenced_code,
            grounded_arguments=self.strategy.grounded_arguments,
        )
        self._on_state = on_state
        self.plan_shape = plan_shape or PlanShape()
        self._focus: set[str] = set()  # the tools the system message keeps whole when tight

    def _takes_code(self, tool_name: str) -> bool:
        tool = self.registry.get(tool_name)
        return tool is not None and tool.code_language is not None

    def plan_schema(self) -> dict[str, object]:
        return plan_json_schema(self.registry.names, self.plan_shape)

    async def run(
        self, question: str, run: PlanRun, *, earlier_turns: Sequence[TurnDigest] = ()
    ) -> PlanRun:
        """Solve ``question``, filling ``run`` as it goes (the caller keeps it on failure).
        ``earlier_turns``: the session's earlier turns that fit the prompt (a follow-up may
        build on them), oldest first."""
        self._on_state(AgentState.PLANNING)
        conversation = self._opening(question, earlier_turns)
        # What a step's own calls (its arguments, its code) are told the task is.
        step_question = (
            render(
                "followup_question",
                earlier="\n".join(turn.text() for turn in earlier_turns),
                last=earlier_turns[-1].outcome(),
                question=question,
            )
            if earlier_turns
            else question
        )
        system = conversation[0]["content"]
        async with self.model.unit(ModelRole.PLANNER):
            plan = await self._make_plan(conversation)
        run.plan_reply = str(conversation[-1]["content"])
        plan = await self._reviewed(plan, question)
        memory = CallMemory()
        plan = self._adopt(plan, run, conversation, memory, question)
        self.recorder.emit(
            EventType.PLAN_STARTED,
            f"{len(plan.tasks)} tasks, {len(plan.steps())} steps",
            plan=plan.model_dump(exclude_none=True),
        )
        pending = list(plan.tasks)
        final: str | None = None
        last: list[StepOutcome] = []
        retried = False
        while pending:
            task = pending.pop(0)
            if len(run.outcomes) + len(task.steps) > self.max_steps:
                raise RunFailure(
                    f"stopped at max_steps={self.max_steps}: task {task.task_id} would run "
                    f"step {len(run.outcomes) + len(task.steps)}"
                )
            self._on_state(AgentState.EXECUTING)
            earlier = list(run.outcomes)
            step_ids = frozenset(s.step_id for plan in run.plans for s in plan.steps())
            last = await run_together(
                [
                    self.executor.run(step, task, step_question, earlier, memory, step_ids)
                    for step in task.steps
                ]
            )
            if not pending:
                last = self._founded(question, earlier, last, task)
            if self.strategy.code_call_after_failure:
                last = await self._code_written_again(
                    last, task, step_question, earlier, memory, step_ids
                )
                if not pending:
                    last = self._founded(question, earlier, last, task)
            run.outcomes.extend(last)
            memory.remember(last)
            succeeded = all(o.ok for o in last)
            if not succeeded and self.strategy.replan_after_failure and not retried:
                retried = True
                corrected = await self._corrected(
                    conversation, last, run, memory, question, "a step failed: planned again"
                )
                if corrected is not None:
                    pending = corrected
                    continue
            if (succeeded and self.strategy.skip_rethink_on_success) or (
                not succeeded and not self.strategy.rethink_after_failure
            ):
                self.recorder.emit(
                    EventType.REFLECTION,
                    "every step succeeded: going on without a rethink"
                    if succeeded
                    else "a step failed: going on without a rethink",
                    task=task.task_id,
                    status=RethinkStatus.CONTINUE.value,
                    skipped=True,
                )
                continue
            self._on_state(AgentState.REFLECTING)
            async with self.model.unit(ModelRole.PLANNER):
                decision = await self._rethink(conversation, task, last, pending)
            adopted = None
            if decision.status is RethinkStatus.CHANGED and decision.plan is not None:
                run.replans += 1
                if run.replans > self.max_replans:
                    raise RunFailure(f"stopped after {self.max_replans} re-plans")
                changed = await self._reviewed(decision.plan, question)
                adopted = self._adopt(changed, run, conversation, memory, question)
                pending = list(adopted.tasks)
            if not decision.unreadable:
                text = decision.final or decision.status.value
                self._reflected(text, decision.status, adopted, task=task.task_id)
            if (
                decision.status is RethinkStatus.CONTINUE
                and not pending
                and not succeeded
                and not retried
            ):
                # "continue" with no step left after a failure leaves the task undone: ask
                # once for a corrected plan that shows the errors, as the small profiles do.
                retried = True
                corrected = await self._corrected(
                    conversation,
                    last,
                    run,
                    memory,
                    question,
                    "a step failed and none is left: planned again",
                )
                if corrected is not None:
                    pending = corrected
                    continue
            if decision.status is RethinkStatus.FAILED:
                raise RunFailure(f"the task cannot be done: {decision.final}")
            if decision.status is RethinkStatus.DONE:
                final = clean_answer(decision.final or "")
                break
        failed = [o for o in run.outcomes if not o.ok]
        self.recorder.emit(
            EventType.PLAN_COMPLETED,
            f"{len(run.outcomes)} steps run, {len(failed)} failed",
            steps=len(run.outcomes),
            replans=run.replans,
        )
        if run.outcomes and len(failed) == len(run.outcomes):
            raise RunFailure("every step failed: " + describe_failures(failed))
        if final is None and self.strategy.answer_from_single_step:
            final = single_step_answer(last)
        if final is None:
            async with self.model.unit(ModelRole.PLANNER):
                final = await self._answer(conversation, question, run.outcomes)
        problem = unusable_answer(final, [system, *self._instructions()], question)
        if problem is not None:
            raise RunFailure(problem)
        run.answer = final
        return run

    async def prefill(self) -> Usage | None:
        """Prefill the plan call's fixed part (system prompt, tools, examples) into the
        engine's cache before a task arrives. The question comes last in the plan prompt, so
        the first plan call computes only the question's tokens."""
        return await self.model.prefill(self._opening(""), CallPurpose.PLAN)

    def _opening(self, question: str, earlier: Sequence[TurnDigest] = ()) -> list[Message]:
        """The plan call's conversation: the system prompt, the worked examples (and the one
        closest to the task again, when the strategy says so), the session's earlier turns as
        the model's own (each task, the plan it made, its result), then the task. The fixed
        part stays first, so a prefilled cache still serves it."""
        conversation: list[Message] = [
            self._system_message(relevant_tools(self.registry, question))
        ]
        if self.strategy.examples:
            conversation += plan_example_turns(self.registry, self.plan_shape)
            if self.strategy.nearest_example:
                conversation += nearest_example_turns(self.registry, self.plan_shape, question)
        result = ""
        for turn in earlier:
            conversation.append(
                {"role": "user", "content": result + render("plan_user", question=turn.question)}
            )
            conversation.append({"role": "assistant", "content": turn.plan or "(no plan)"})
            result = render("followup_result", result=turn.outcome()) + "\n\n"
        task = render("plan_user", question=question)
        hint = matching_tools(self.registry, question) if self.strategy.tool_hint else []
        if hint:
            task += "\n" + render("plan_tool_hint", tools=", ".join(hint))
        conversation.append({"role": "user", "content": result + task, "keep": Keep.CURRENT})
        return conversation

    async def _reviewed(self, plan: PlanSchema, question: str) -> PlanSchema:
        """The plan as the user approved it, when the review policy shows it (else as it is);
        raises PlanCancelled when the user cancels it. An edit that breaks the plan's rules
        is offered again with the reason."""
        if self.reviewer is None or not needs_review(plan, self.registry, self.review):
            return plan
        self._on_state(AgentState.REVIEWING)
        problem: str | None = None
        while True:
            answer = await self.reviewer.review(plan, question=question, problem=problem)
            if answer.action == "cancel":
                self.recorder.emit(EventType.PLAN_REVIEWED, "cancelled", action="cancel")
                raise PlanCancelled("you cancelled the plan at its review: nothing ran")
            if answer.plan is None:
                allowed = remote_tools(plan, self.registry)
                how = (
                    f"approved (always allowed: {', '.join(allowed)})"
                    if answer.auto
                    else "approved"
                )
                self.recorder.emit(EventType.PLAN_REVIEWED, how, action="approve", auto=answer.auto)
                return plan
            try:
                edited = checked_edit(answer.plan, self.plan_schema(), self.registry)
            except ValueError as error:
                problem = str(error)
                continue
            changes = plan_changes(plan, edited)
            self.recorder.emit(
                EventType.PLAN_REVIEWED,
                "edited: " + ("; ".join(changes) or "no change"),
                action="edit",
                changes=changes,
                plan=edited.model_dump(exclude_none=True),
            )
            return edited

    async def _code_written_again(
        self,
        outcomes: list[StepOutcome],
        task: TaskSchema,
        question: str,
        earlier: list[StepOutcome],
        memory: CallMemory,
        step_ids: frozenset[str],
    ) -> list[StepOutcome]:
        """The task's outcomes, with each failed step whose code came from the plan run
        once more with its code from a code call (Strategy.code_call_after_failure)."""
        again = [o for o in outcomes if not o.ok and self.executor.code_from_plan(o)]
        if not again:
            return outcomes
        self.recorder.emit(
            EventType.REFLECTION,
            "code from the plan failed: writing it again in a separate call: "
            + ", ".join(o.step.step_id for o in again),
            task=task.task_id,
            status=RethinkStatus.CONTINUE.value,
            skipped=True,
        )
        redone = await run_together(
            [
                self.executor.run(o.step, task, question, earlier, memory, step_ids, code_call=True)
                for o in again
            ]
        )
        by_id = {o.step.step_id: o for o in redone}
        return [by_id.get(o.step.step_id, o) for o in outcomes]

    async def _corrected(
        self,
        conversation: list[Message],
        last: list[StepOutcome],
        run: PlanRun,
        memory: CallMemory,
        question: str,
        why: str,
    ) -> list[TaskSchema] | None:
        """The tasks of one corrected plan after ``last``'s failed steps, adopted into the
        run; None when the reply is unusable (the run goes on as it was)."""
        failed = [o for o in last if not o.ok]
        async with self.model.unit(ModelRole.PLANNER):
            retry = await self._retry_plan(conversation, describe_failures(failed))
        if retry is None:
            return None
        run.replans += 1
        if run.replans > self.max_replans:
            raise RunFailure(f"stopped after {self.max_replans} re-plans")
        retry = self._adopt(retry, run, conversation, memory, question)
        self._reflected(why, RethinkStatus.CHANGED, retry)
        return list(retry.tasks)

    async def _retry_plan(self, conversation: list[Message], failures: str) -> PlanSchema | None:
        """One corrected plan after ``failures``, or None when the reply is unusable."""
        conversation.append({"role": "user", "content": render("plan_retry", failures=failures)})
        sampling = None
        if self.strategy.retry_temperature is not None:
            base = self.model.sampling or Sampling()
            sampling = base.model_copy(update={"temperature": self.strategy.retry_temperature})
        reply = await self.model.ask(
            conversation,
            CallPurpose.PLAN,
            CallOptions(schema=self.plan_schema(), sampling=sampling),
        )
        conversation.append({"role": "assistant", "content": reply})
        try:
            plan = parse_plan(reply)
        except PlanParseError as error:
            self.recorder.emit(
                EventType.REFLECTION,
                f"no usable corrected plan ({error.reason}); going on",
                status=RethinkStatus.CONTINUE.value,
                unreadable=True,
            )
            return None
        return plan

    def _founded(
        self,
        question: str,
        earlier: list[StepOutcome],
        outcomes: list[StepOutcome],
        task: TaskSchema,
    ) -> list[StepOutcome]:
        """The last task's ``outcomes``, its one step failed when its result would be handed to
        the user as it is (Strategy.answer_from_single_step) but no call of the run was given
        some of the question's data: that result is about something else."""
        handed_over = self.strategy.answer_from_single_step and self.strategy.data_check
        answer = single_step_answer(outcomes) if handed_over else None
        if answer is None:
            return outcomes
        calls = [o.arguments for o in [*earlier, *outcomes] if o.ok and o.arguments is not None]
        missing = data_left_out(question, calls)
        if not missing:
            return outcomes
        why = (
            f"its result {_shown(answer)} cannot answer the task: no step was given "
            f"{_listed(missing)} from the task"
        )
        outcome = outcomes[0]
        # The step was reported done; it now shows as failed, with the reason.
        self.recorder.emit(
            EventType.STEP_FAILED,
            why,
            step=outcome.step.step_id,
            task=task.task_id,
            tool=outcome.step.tool_name,
            seconds=round(outcome.seconds, 4),
            thought=outcome.thought,
            left_out=missing,
        )
        return [replace(outcome, result=ToolResult(why, is_error=True))]

    def _reflected(
        self,
        text: str,
        status: RethinkStatus,
        plan: PlanSchema | None,
        *,
        task: str | None = None,
    ) -> None:
        """The reflection event, with the plan as adopted (merged, ids renamed)."""
        self.recorder.emit(
            EventType.REFLECTION,
            text,
            task=task,
            status=status.value,
            plan=plan.model_dump(exclude_none=True) if plan is not None else None,
        )

    def _adopt(
        self,
        plan: PlanSchema,
        run: PlanRun,
        conversation: list[Message],
        memory: CallMemory,
        question: str,
    ) -> PlanSchema:
        """Record a new plan: inputs that looped to their length bound cut, inputs that
        copied the request's text up to that bound given it whole, its repeated steps merged
        when the strategy says so, and ids that an earlier plan used renamed. From now on a
        tight window keeps the schemas of the tools the plans use."""
        declined = decline_reason(plan)
        if declined is not None:
            run.plans.append(plan)
            raise TaskDeclined(declined)
        plan, cut = cut_runaway_inputs(plan, self.plan_shape)
        if cut:
            self.recorder.emit(
                EventType.PLAN_CUT,
                "cut inputs that looped to their length bound: "
                + "; ".join(f"{step} keeps {kept!r}" for step, kept in cut.items()),
                cut=cut,
            )
        plan, given = give_copied_text_whole(plan, self.plan_shape, question, self._takes_code)
        if given:
            self.recorder.emit(
                EventType.PLAN_TEXT_WHOLE,
                f"gave the request's text whole to steps whose input copied it up to the "
                f"{self.plan_shape.max_input_chars}-character bound: {', '.join(given)}",
                given=given,
            )
        if self.strategy.merge_duplicate_steps:
            plan, merged = merge_duplicate_steps(plan)
            if merged:
                self.recorder.emit(
                    EventType.PLAN_MERGED,
                    "merged repeated steps: "
                    + ", ".join(f"{dropped} into {kept}" for dropped, kept in merged.items()),
                    merged=merged,
                )
        taken = {step.step_id for earlier in run.plans for step in earlier.steps()}
        plan, renamed = rename_reused_ids(plan, taken)
        if renamed:
            self.recorder.emit(
                EventType.PLAN_RENAMED,
                "new plan reuses step ids: "
                + ", ".join(f"{old} is now {new}" for old, new in renamed.items()),
                renamed=renamed,
            )
        if run.plans:
            memory.replanned()
        run.plans.append(plan)
        used = {step.tool_name for plan in run.plans for step in plan.steps()}
        if used != self._focus:  # only its stand-ins keep the focused tools whole
            conversation[0] = self._system_message(used, content=conversation[0]["content"])
        return plan

    @staticmethod
    def _instructions() -> list[str]:
        """Our instructions besides the system prompt, which an answer might repeat."""
        return [
            render(name)
            for name in ("rethink_user", "answer_user", "generator_system", "arguments_system")
        ]

    def _system_message(self, focus: set[str], content: str | None = None) -> Message:
        self._focus = focus
        return plan_system_message(
            self.registry,
            self.plan_shape,
            with_examples=self.strategy.examples,
            focus=focus,
            content=content,
        )

    async def _make_plan(self, conversation: list[Message]) -> PlanSchema:
        schema = self.plan_schema()
        reply = await self.model.ask(conversation, CallPurpose.PLAN, CallOptions(schema=schema))
        conversation.append({"role": "assistant", "content": reply})
        try:
            return parse_plan(reply)
        except PlanParseError as first:
            error = first.reason
        conversation.append({"role": "user", "content": render("plan_repair", error=error)})
        repaired = await self.model.ask(conversation, CallPurpose.PLAN, CallOptions(schema=schema))
        conversation.append({"role": "assistant", "content": repaired})
        if repaired.strip() == reply.strip():
            raise RunFailure(f"no usable plan: {error} (the model repeated the same reply)")
        try:
            return parse_plan(repaired)
        except PlanParseError as second:
            raise RunFailure(f"no usable plan after one repair: {second.reason}") from None

    async def _rethink(
        self,
        conversation: list[Message],
        task: TaskSchema,
        outcomes: list[StepOutcome],
        pending: list[TaskSchema],
    ) -> RethinkDecision:
        remaining = (
            json.dumps({"tasks": [t.model_dump(exclude_none=True) for t in pending]})
            if pending
            else "(none: this was the last task)"
        )
        conversation.append(
            self._with_results(
                conversation,
                CallPurpose.RETHINK,
                "rethink_user",
                outcomes,
                task_id=task.task_id,
                task_goal=task.task_goal,
                remaining=remaining,
            )
        )
        reply = await self.model.ask(conversation, CallPurpose.RETHINK)
        conversation.append({"role": "assistant", "content": reply})
        try:
            decision = parse_rethink(reply)
        except ReplyParseError as first:
            conversation.append(
                {"role": "user", "content": render("rethink_repair", error=first.reason)}
            )
            repaired = await self.model.ask(conversation, CallPurpose.RETHINK)
            conversation.append({"role": "assistant", "content": repaired})
            try:
                decision = parse_rethink(repaired)
            except ReplyParseError as second:
                # The plan still stands; an unreadable reflection is no reason to stop.
                self.recorder.emit(
                    EventType.REFLECTION,
                    f"could not read the reflection ({second.reason}); continuing with the plan",
                    task=task.task_id,
                    status=RethinkStatus.CONTINUE.value,
                    unreadable=True,
                )
                return RethinkDecision(RethinkStatus.CONTINUE, unreadable=True)
        return decision

    async def _answer(
        self, conversation: list[Message], question: str, outcomes: list[StepOutcome]
    ) -> str:
        conversation.append(
            self._with_results(
                conversation, CallPurpose.ANSWER, "answer_user", outcomes, question=question
            )
        )
        answer = await self.model.ask(conversation, CallPurpose.ANSWER)
        conversation.append({"role": "assistant", "content": answer})
        return clean_answer(answer)

    def _with_results(
        self,
        conversation: list[Message],
        purpose: CallPurpose,
        template: str,
        outcomes: list[StepOutcome],
        **values: object,
    ) -> Message:
        """``template`` rendered with the results digest, as a user message.

        The digest gets what the conversation leaves free of the prompt budget, but at least
        half of what the system prompt and the question leave: older turns give way to the
        newest results when the fitting drops them. As an older turn later, the message
        offers shorter stand-ins: results cut short, then one line per step without the
        instructions."""
        count = self.model.llm.count_tokens
        instructions = count(render(template, results="", **values)) + MESSAGE_OVERHEAD_TOKENS
        essential = [m for m in conversation if m.get("keep", Keep.HISTORY) >= Keep.TOOLS]
        budget = self.model.prompt_budget(purpose) - instructions - DIGEST_MARGIN_TOKENS
        free_tokens = max(
            budget - prompt_tokens(conversation, count),
            (budget - prompt_tokens(essential, count)) // 2,
        )
        digest = digest_results(outcomes, max(free_tokens * BYTES_PER_TOKEN, DIGEST_FLOOR_CHARS))
        shown = list(outcomes)  # as they are now: the stand-ins are made later, if ever
        return {
            "role": "user",
            "content": render(template, results=digest, **values),
            "keep": Keep.DIGEST,
            "compact": stand_ins(
                lambda: [
                    render(template, results=digest_results(shown, len(shown) * 280), **values),
                    render("results_summary", results=result_statuses(shown), **values),
                ]
            ),
        }


def decline_reason(plan: PlanSchema) -> str | None:
    """Why the run ends before it starts, when a step of ``plan`` declines the task."""
    for step in plan.steps():
        if step.tool_name == DECLINE_TOOL:
            reason = step.input if step.input is not None else (step.arguments or {}).get("reason")
            return declined_because(str(reason or step.step_goal))
    return None


def single_step_answer(outcomes: list[StepOutcome]) -> str | None:
    """The result of the last task as the answer, when that task was one successful step."""
    if len(outcomes) != 1 or not outcomes[0].ok:
        return None
    return outcomes[0].result.reference_text().strip() or None


def _shown(answer: str, limit: int = 80) -> str:
    return answer if len(answer) <= limit else answer[:limit] + "..."


def _listed(items: list[str], limit: int = 5) -> str:
    """The first ``limit`` items (a pasted text may hold hundreds of numbers), and how many more."""
    shown = ", ".join(_shown(item, 40) for item in items[:limit])
    return shown if len(items) <= limit else f"{shown} and {len(items) - limit} more"


def describe_failures(failed: list[StepOutcome], limit: int = 200) -> str:
    return "; ".join(
        f"{o.step.step_id} ({o.step.tool_name}): {o.result.content[:limit]}" for o in failed
    )
