"""The loop: plan, run each task's steps concurrently, rethink, answer.

:class:`PlanAndRethink` decides what happens next; what it asks the model is in
``plan_turns``, what a new plan goes through before it runs in ``plan_adoption``, the plan
review in ``review`` and the small profiles' rescues in ``rescues``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agent_py.core.agreement import computed_twice
from agent_py.core.answer_checks import echoes_instructions, unusable_answer
from agent_py.core.checks import Seen, Stage, first_refusal
from agent_py.core.concurrency import run_together
from agent_py.core.conversation import TurnDigest
from agent_py.core.errors import ReplyParseError, RunFailure
from agent_py.core.events import AgentState, EventType
from agent_py.core.execution import CallMemory, FollowUp, StepExecutor, StepOutcome
from agent_py.core.history import EventRecorder
from agent_py.core.llm import ModelRole, Usage
from agent_py.core.messages import Message
from agent_py.core.model_client import ModelClient
from agent_py.core.parsing import RethinkStatus, clean_answer
from agent_py.core.plan import (
    AnswerKind,
    PlanSchema,
    PlanShape,
    TaskSchema,
    declarations_optional,
)
from agent_py.core.plan_adoption import adopt
from agent_py.core.plan_turns import PlanTurns, RepeatedReply
from agent_py.core.profiles import Strategy
from agent_py.core.prompts import render
from agent_py.core.registry import ToolRegistry
from agent_py.core.rescues import (
    chained,
    changes_the_last_result,
    code_written_again,
    describe_failures,
    founded,
    handed_over,
    says_yes_or_no,
)
from agent_py.core.review import PlanReviewer, ReviewPolicy, reviewed
from agent_py.core.step_action import looks_like_code, looks_like_python
from agent_py.core.tool import ToolResult, takes_address


@dataclass
class PlanRun:
    """What a run produced, kept even when it fails part-way."""

    answer: str = ""
    plans: list[PlanSchema] = field(default_factory=list)
    outcomes: list[StepOutcome] = field(default_factory=list)
    replans: int = 0
    plan_reply: str = ""
    """The model's reply that gave the first plan, as it wrote it (a later turn is shown it)."""
    disagreed: bool = False
    """Two computations of a last step disagreed (Strategy.compute_twice)."""

    def answer_kind(self) -> AnswerKind | None:
        """What the question wants back, as the first plan of the turn that declared it
        says: the question is the same in every plan of a turn, and a corrected plan is
        written about failed steps (seen: a number question's re-plan declared text, and a
        printed "the file contains invalid data" became the answer)."""
        return next((plan.answer for plan in self.plans if plan.answer), None)


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
            code_repair=self.strategy.code_repair,
            repair_temperature=self.strategy.retry_temperature,
        )
        self._on_state = on_state
        self.plan_shape = plan_shape or PlanShape()
        self.turns = PlanTurns(
            model, registry, recorder, plan_shape=self.plan_shape, strategy=self.strategy
        )

    def _takes_code(self, tool_name: str) -> bool:
        tool = self.registry.get(tool_name)
        return tool is not None and tool.code_language is not None

    def _own_tool(self, tool_name: str) -> bool:
        """Whether ``tool_name`` is one of the agent's own tools (it writes or computes here),
        not a remote server's, which may act in the world."""
        tool = self.registry.get(tool_name)
        return tool is not None and not tool.remote

    def _reads_data(self, tool_name: str) -> bool:
        tool = self.registry.get(tool_name)
        return tool is not None and tool.reads_data

    def _code_tool_for(self, tool_name: str, text: str) -> str | None:
        """The code tool for a step of a task declared to compute that was given to a tool
        that only writes (the agent's own, asking the model, taking no code), ``text`` its
        input, or None: the Python tool for Python code, else the JavaScript one (or any code
        tool here)."""
        tool = self.registry.get(tool_name)
        if tool is None or tool.remote or not tool.uses_model or tool.code_language is not None:
            return None
        code_tools = {t.code_language.lower(): t.name for t in self.registry if t.code_language}
        language = "python" if looks_like_python(text) else "javascript"
        return code_tools.get(language) or next(iter(code_tools.values()), None)

    def _files_tool_for(self, tool_name: str, text: str) -> str | None:
        """The code tool whose code is written afresh on the user's files (the first that
        sees them: python_execute in the page), for a step of another code tool with
        ``text`` its input: one that cannot open the files, or one that can but was given no
        code (its code call would write it); None when the step keeps its tool.

        Fresh JavaScript on a file from the default model reached for the browser's or
        Node's file APIs the sandbox lacks (FileReader, file.read, require('./fruit.csv')),
        where its Python opens the file: 3 of 8 file tasks failed that way, 2026-12-04."""
        tool = self.registry.get(tool_name)
        files_code = self.registry.files_code
        if tool is None or tool.code_language is None or files_code in (None, tool_name):
            return None
        if tool.sees_files and looks_like_code(text):
            return None  # its own code, which reads the files through its tool
        return files_code

    def _page_reader(self) -> tuple[str, str] | None:
        """The tool that reads the page at a web address, and its parameter for the address."""
        return next(
            ((tool.name, tool.address_input) for tool in self.registry if tool.address_input),
            None,
        )

    def _takes_address(self, tool_name: str) -> bool:
        tool = self.registry.get(tool_name)
        return tool is not None and takes_address(tool)

    def _reader_of(self, question: str) -> str | None:
        """The code tool that opens a file of the user's that ``question`` names (by its
        name, whatever the language around it), or None."""
        asked = question.casefold()
        return next(
            (
                tool.name
                for tool in self.registry
                if tool.sees_files and any(name.casefold() in asked for name in tool.file_names)
            ),
            None,
        )

    def plan_schema(self) -> dict[str, object]:
        return self.turns.plan_schema()

    async def run(
        self, question: str, run: PlanRun, *, earlier_turns: Sequence[TurnDigest] = ()
    ) -> PlanRun:
        """Solve ``question``, filling ``run`` as it goes (the caller keeps it on failure).
        ``earlier_turns``: the session's earlier turns that fit the prompt (a follow-up may
        build on them), oldest first."""
        self._on_state(AgentState.PLANNING)
        conversation = self.turns.opening(question, earlier_turns)
        # What a step's own calls (its arguments, its code) are told the task is.
        step_question = (
            render(
                "followup_question",
                last=earlier_turns[-1].outcome(),
                question=question,
            )
            if earlier_turns
            else question
        )
        follow_up = FollowUp(
            last_result=(
                ToolResult(earlier_turns[-1].answer)
                if earlier_turns and earlier_turns[-1].state == AgentState.COMPLETED.value
                else None
            ),
            questions=tuple(turn.question for turn in earlier_turns),
        )
        system = conversation[0]["content"]
        async with self.model.unit(ModelRole.PLANNER):
            plan = await self._first_plan(conversation)
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
                    self.executor.run(
                        step, task, step_question, earlier, memory, step_ids, follow_up=follow_up
                    )
                    for step in task.steps
                ]
            )
            if not pending:
                last = self._answer_checked(question, run, earlier, last, task, follow_up)
            if self.strategy.code_call_after_failure:
                last = await code_written_again(
                    self.executor,
                    self.recorder,
                    last,
                    task,
                    step_question,
                    earlier,
                    memory,
                    step_ids,
                    follow_up,
                )
                if not pending:
                    last = self._answer_checked(question, run, earlier, last, task, follow_up)
            if self.strategy.compute_twice and not pending:
                agreed = await computed_twice(
                    self.executor,
                    self.recorder,
                    last,
                    task,
                    step_question,
                    earlier,
                    step_ids,
                    follow_up,
                    third_temperature=self.strategy.retry_temperature,
                    always=run.disagreed,
                )
                last, run.disagreed = agreed.outcomes, run.disagreed or agreed.disagreed
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
                decision = await self.turns.rethink(conversation, task, last, pending)
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
            gave_up = self._gave_up_untried(decision.status, succeeded, pending, run)
            if gave_up is not None and not retried:
                # Ask once for a corrected plan that shows the errors (or, where every step
                # ran, the reason given), as the small profiles do, before the rethink's word
                # ends the run.
                retried = True
                corrected = await self._corrected(
                    conversation, last, run, memory, question, gave_up, decision.final
                )
                if corrected is not None:
                    pending = corrected
                    continue
            if decision.status is RethinkStatus.FAILED:
                raise RunFailure(f"the task cannot be done: {decision.final}")
            if decision.status is RethinkStatus.DONE:
                final = self._rethink_answer(decision.final or "", system, question)
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
        last_failed = [o for o in last if not o.ok]
        if final is None and last_failed:
            # An answer from the earlier tasks' results would leave out the last task's part
            # ("the capital is Lutz" for the letters of its name).
            raise RunFailure("the last task failed: " + describe_failures(last_failed))
        if final is None and self.strategy.answer_from_single_step:
            # A remote tool's or a read file's long result is material to read, not an answer.
            tool_name = last[0].step.tool_name if last else ""
            remote = bool(last) and (not self._own_tool(tool_name) or self._reads_data(tool_name))
            final = handed_over(last, run.answer_kind(), remote=remote)
        if final is None:
            async with self.model.unit(ModelRole.PLANNER):
                # Apart from the plan conversation, a follow-up's answer still sees what
                # the question builds on.
                asked = step_question if self.strategy.answer_apart else question
                final = await self.turns.answer(conversation, asked, run.outcomes)
        problem = unusable_answer(final, [system, *self.turns.instructions()], question)
        if problem is None:
            problem = self._answer_refused(final, question, run, earlier_turns)
        if problem is not None:
            raise RunFailure(problem)
        run.answer = final
        return run

    def _answer_refused(
        self, final: str, question: str, run: PlanRun, earlier_turns: Sequence[TurnDigest]
    ) -> str | None:
        """Why the checks of the answer stage (``checks``) refuse ``final``, or None. Their
        data: the task, the conversation, and the results of code and remote tools (the
        writer's text is the model's own)."""
        data = tuple(
            o.result
            for o in run.outcomes
            if o.ok and not getattr(self.registry.get(o.step.tool_name), "uses_model", True)
        )
        seen = Seen(
            question=question,
            asked=tuple(text for turn in earlier_turns for text in (turn.question, turn.answer)),
            results=data,
            answer=final,
            computed=self._computed_last(run),
            kind=run.answer_kind(),
            # The turn's first plan, as for the answer kind: what the question needs.
            plan=run.plans[0] if run.plans else None,
        )
        return first_refusal(Stage.ANSWER, self.strategy, seen)

    def _computed_last(self, run: PlanRun) -> ToolResult | None:
        """The result of the last plan's last step when it is code that ran, else None."""
        if not run.plans or not run.plans[-1].tasks or not run.plans[-1].tasks[-1].steps:
            return None
        last = run.plans[-1].tasks[-1].steps[-1]
        tool = self.registry.get(last.tool_name)
        if tool is None or tool.code_language is None:
            return None
        ran = [o for o in run.outcomes if o.step.step_id == last.step_id]
        return ran[-1].result if ran and ran[-1].ok else None

    async def prefill(self) -> Usage | None:
        """Prefill the plan call's fixed part into the engine's cache (PlanTurns.prefill)."""
        return await self.turns.prefill()

    async def _first_plan(self, conversation: list[Message]) -> PlanSchema:
        try:
            return await self.turns.plan(conversation)
        except RepeatedReply as error:
            raise RunFailure(
                f"no usable plan: {error.reason} (the model repeated the same reply)"
            ) from None
        except ReplyParseError as error:
            raise RunFailure(f"no usable plan after one repair: {error.reason}") from None

    async def _reviewed(self, plan: PlanSchema, question: str) -> PlanSchema:
        return await reviewed(
            plan,
            question,
            reviewer=self.reviewer,
            policy=self.review,
            registry=self.registry,
            schema=declarations_optional(self.plan_schema()),
            recorder=self.recorder,
            on_reviewing=lambda: self._on_state(AgentState.REVIEWING),
        )

    @staticmethod
    def _gave_up_untried(
        status: RethinkStatus, succeeded: bool, pending: list[TaskSchema], run: PlanRun
    ) -> str | None:
        """Why a rethink would end the run before any other plan was tried, or None.

        After a failed step, "continue" with no step left leaves the task undone, and "done"
        answers from what did not run. "failed" before any re-plan takes a model's slip for
        an impossible task, after a failed step or not: a 1.5B model wrote how to fix its
        code (call the function it only defined) as its reason to give up, and gave up on
        42 printed beside "result: null"."""
        first = run.replans == 0
        if status is RethinkStatus.FAILED and first:
            if succeeded:
                return (
                    "the rethink gave up after every step ran, before any other plan: planned again"
                )
            return "a step failed and the rethink gave up before any other plan: planned again"
        if succeeded:
            return None
        if status is RethinkStatus.CONTINUE and not pending:
            return "a step failed and none is left: planned again"
        if status is RethinkStatus.DONE and first:
            return "a step failed and the rethink answered before any other plan: planned again"
        return None

    async def _corrected(
        self,
        conversation: list[Message],
        last: list[StepOutcome],
        run: PlanRun,
        memory: CallMemory,
        question: str,
        why: str,
        reason: str | None = None,
    ) -> list[TaskSchema] | None:
        """The tasks of one corrected plan after ``last``'s failed steps (or, when none
        failed, the rethink's ``reason`` the task is not done), adopted into the run; None
        when the reply is unusable (the run goes on as it was)."""
        failed = [o for o in last if not o.ok]
        failures = describe_failures(failed) or f"every step ran, but: {reason or 'not done'}"
        async with self.model.unit(ModelRole.PLANNER):
            retry = await self.turns.corrected_plan(conversation, failures)
        if retry is None:
            return None
        run.replans += 1
        if run.replans > self.max_replans:
            raise RunFailure(f"stopped after {self.max_replans} re-plans")
        retry = self._adopt(retry, run, conversation, memory, question)
        self._reflected(why, RethinkStatus.CHANGED, retry)
        return list(retry.tasks)

    def _answer_checked(
        self,
        question: str,
        run: PlanRun,
        earlier: list[StepOutcome],
        outcomes: list[StepOutcome],
        task: TaskSchema,
        follow_up: FollowUp,
    ) -> list[StepOutcome]:
        """The last task's outcomes, its one step failed where its result, handed to the user
        as the answer (Strategy.answer_from_single_step), would not answer the task."""
        if not self.strategy.answer_from_single_step:
            return outcomes
        outcomes = self._founded(question, earlier, outcomes, task)
        outcomes = self._chained(run, earlier, outcomes, task)
        outcomes = changes_the_last_result(follow_up, outcomes, task, self.recorder)
        return says_yes_or_no(run.answer_kind(), outcomes, task, self.recorder)

    def _founded(
        self,
        question: str,
        earlier: list[StepOutcome],
        outcomes: list[StepOutcome],
        task: TaskSchema,
    ) -> list[StepOutcome]:
        """The last task's outcomes, checked for the task's data where its result would be
        the answer (:func:`~agent_py.core.rescues.founded`)."""
        if not self.strategy.data_check:
            return outcomes
        return founded(question, earlier, outcomes, task, self.recorder)

    def _chained(
        self,
        run: PlanRun,
        earlier: list[StepOutcome],
        outcomes: list[StepOutcome],
        task: TaskSchema,
    ) -> list[StepOutcome]:
        """The last task's outcomes, checked for earlier results of its plan that its result,
        the answer, leaves out (:func:`~agent_py.core.rescues.chained`)."""
        if not self.strategy.chain_check:
            return outcomes
        ids = {o.step.step_id for o in outcomes}
        plan_steps = next(
            (
                frozenset(s.step_id for s in plan.steps())
                for plan in reversed(run.plans)
                if ids <= {s.step_id for s in plan.steps()}
            ),
            frozenset[str](),
        )
        return chained(earlier, outcomes, plan_steps, task, self.recorder)

    def _rethink_answer(self, text: str, system: str, question: str) -> str | None:
        """The answer a rethink gave with "done", or None where it only copied its reply
        format ("the answer for the user: the result itself, not code", seen from a 1.5B
        model): the task is done, and the answer call writes the answer."""
        final = clean_answer(text)
        if not echoes_instructions(final, [system, *self.turns.instructions()], allowed=question):
            return final
        self.recorder.emit(
            EventType.REFLECTION,
            "the rethink's answer only repeats its reply format: the answer is written in a "
            "call of its own",
            status=RethinkStatus.DONE.value,
            unreadable=True,
        )
        return None

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
        """Record a new plan as it will run (:func:`~agent_py.core.plan_adoption.adopt`);
        from now on a tight window keeps the schemas of the tools the plans use."""
        plan = adopt(
            plan,
            run.plans,
            memory,
            question,
            plan_shape=self.plan_shape,
            merge_duplicates=self.strategy.merge_duplicate_steps,
            takes_code=self._takes_code,
            own_tool=self._own_tool,
            recorder=self.recorder,
            code_tool_for=self._code_tool_for,
            files_tool_for=self._files_tool_for,
            reader_of=self._reader_of,
            files_code=self.registry.files_code,
            page_reader=self._page_reader(),
            takes_address=self._takes_address,
            reads_data=self._reads_data,
        )
        self.turns.focus_on(run.plans, conversation)
        return plan
