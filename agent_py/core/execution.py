"""Running one planned step: find the tool, get its arguments, act, report.

Whatever goes wrong inside a step (unknown tool, bad arguments, a tool that raises or times
out, a repeated call) ends as a failed :class:`StepOutcome` with a readable observation, so
the other steps of the task go on and the rethink can react.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from agent_py.core.budget import truncate_middle
from agent_py.core.checks import Seen, Stage, first_refusal
from agent_py.core.errors import AgentError, LLMError, PromptTooLargeError
from agent_py.core.events import EventType
from agent_py.core.history import EventRecorder
from agent_py.core.llm import CallPurpose, ModelRole
from agent_py.core.model_client import ModelClient
from agent_py.core.plan import StepSchema, TaskSchema, step_references, step_sources
from agent_py.core.registry import ToolRegistry
from agent_py.core.step_action import StepAction, StepBrief, failed_dependency
from agent_py.core.tool import ToolBase, ToolContext, ToolError, ToolResult

EVENT_CONTENT_CHARS = 8_000  # observations in events and history are cut to this


@dataclass
class StepOutcome:
    step: StepSchema
    task_id: str
    result: ToolResult
    arguments: dict[str, Any] | None = None
    thought: bool = False
    seconds: float = 0.0
    engine_failed: bool = False
    """The step failed because the model engine did (a generation or an arguments call),
    not because of the task: a run it fails is the engine's failure (FailureCause.ENGINE)."""

    @property
    def ok(self) -> bool:
        return not self.result.is_error


def engine_failure(error: BaseException) -> bool:
    """Whether ``error``, or what it was raised from, is the engine's failure (an LLMError,
    but a prompt too large for the window, which is the task's size)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, LLMError) and not isinstance(seen, PromptTooLargeError):
            return True
        seen = seen.__cause__
    return False


@dataclass
class CallMemory:
    """Tool calls of the task just run, to catch a model that re-plans the call it made.

    Only a re-plan arms the guard: consecutive tasks of one plan may repeat a call on
    purpose (polling, a tool that is not idempotent)."""

    last: dict[str, str] = field(default_factory=dict)  # signature -> step id
    guarded: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def signature(tool: str, arguments: Mapping[str, Any]) -> str:
        return json.dumps([tool, arguments], sort_keys=True, ensure_ascii=False, default=str)

    def remember(self, outcomes: list[StepOutcome]) -> None:
        self.last = {
            self.signature(o.step.tool_name, o.arguments): o.step.step_id
            for o in outcomes
            if o.arguments is not None
        }
        self.guarded = {}

    def replanned(self) -> None:
        """The next task comes from a new plan made after seeing the last task's results."""
        self.guarded = dict(self.last)


def digest_results(outcomes: list[StepOutcome], max_chars: int) -> str:
    """The results as the model reads them, each cut head-and-tail to share ``max_chars``."""
    if not outcomes:
        return "(none)"
    per_result = max(max_chars // len(outcomes) - 80, 200)
    lines = []
    for outcome in outcomes:
        status = "ok" if outcome.ok else "FAILED"
        text = truncate_middle(
            outcome.result.content,
            per_result,
            note=f"full result kept as ${{{outcome.step.step_id}}}",
        )
        lines.append(f"[{outcome.step.step_id}] {outcome.step.tool_name} ({status}): {text}")
    return "\n".join(lines)


def result_statuses(outcomes: list[StepOutcome]) -> str:
    """The shortest digest: which steps ran and whether they worked."""
    return "\n".join(
        f"[{o.step.step_id}] {o.step.tool_name} ({'ok' if o.ok else 'FAILED'}); "
        f"result kept as ${{{o.step.step_id}}}"
        for o in outcomes
    )


@dataclass(frozen=True)
class FollowUp:
    """What a follow-up's steps know of the turns before it: the last turn's result, when it
    completed (a step's reference to itself stands for it: ``And half of that?`` planned as
    ``return ${s1} / 2`` in s1), and the earlier turns' questions, oldest first, which no
    step's code takes as its data."""

    last_result: ToolResult | None = None
    questions: tuple[str, ...] = ()


NOT_A_FOLLOW_UP = FollowUp()


@dataclass
class _StepRun:
    """One step being run: what its checks read (the step, its task, the user's question, the
    earlier steps' outcomes, the calls of the task before a re-plan) and the outcome it fills."""

    tool: ToolBase
    step: StepSchema
    task: TaskSchema
    question: str
    earlier: list[StepOutcome]
    memory: CallMemory
    outcome: StepOutcome
    follow_up: FollowUp
    code_temperature: float | None = None
    failed_before: str = ""
    """Why an earlier run of this step failed, for its code call."""


class StepExecutor:
    def __init__(
        self,
        registry: ToolRegistry,
        model: ModelClient,
        recorder: EventRecorder,
        *,
        tool_timeout_s: float,
        examples: bool = False,
        fenced_code: bool = False,
        grounded_arguments: bool = False,
        code_repair: bool = False,
        repair_temperature: float | None = None,
    ) -> None:
        self.registry = registry
        self.model = model
        self.recorder = recorder
        self.tool_timeout_s = tool_timeout_s
        self.examples = examples
        self.fenced_code = fenced_code
        self.grounded_arguments = grounded_arguments
        self.code_repair = code_repair
        self.repair_temperature = repair_temperature

    async def run(
        self,
        step: StepSchema,
        task: TaskSchema,
        question: str,
        earlier: list[StepOutcome],
        memory: CallMemory,
        step_ids: frozenset[str] = frozenset(),
        *,
        code_call: bool = False,
        follow_up: FollowUp = NOT_A_FOLLOW_UP,
        code_temperature: float | None = None,
        failed_before: str = "",
    ) -> StepOutcome:
        """Run ``step``; ``step_ids`` are the ids of every planned step, for references.
        ``code_call``: a tool that takes code gets it from a code call (as ``fenced_code``),
        sampled at ``code_temperature`` when one is given, and told ``failed_before``: why
        an earlier run of the step failed.
        ``follow_up``: in a follow-up, what the step knows of the turns before."""
        started = time.perf_counter()
        self.recorder.emit(
            EventType.STEP_STARTED,
            step.step_goal,
            step=step.step_id,
            task=task.task_id,
            tool=step.tool_name,
        )
        outcome = StepOutcome(step, task.task_id, ToolResult(""))
        tool = self.registry.get(step.tool_name)
        try:
            if tool is None:
                raise ToolError(self.registry.unknown_tool_message(step.tool_name))
            run = _StepRun(
                tool,
                step,
                task,
                question,
                earlier,
                memory,
                outcome,
                follow_up,
                code_temperature,
                failed_before,
            )
            await self._call(run, step_ids, code_call)
        except AgentError as exc:  # the one way out of a failed step: its message
            outcome.result = ToolResult(str(exc), is_error=True)
            outcome.engine_failed = engine_failure(exc)
        except Exception as exc:  # a bug of ours in one step must not sink the others
            outcome.result = ToolResult(f"{type(exc).__name__}: {exc}", is_error=True)
        outcome.seconds = time.perf_counter() - started
        await self._report(outcome)
        return outcome

    async def _call(
        self,
        run: _StepRun,
        step_ids: frozenset[str],
        code_call: bool = False,
    ) -> None:
        tool, step, task, question = run.tool, run.step, run.task, run.question
        earlier, outcome = run.earlier, run.outcome
        last_turn = run.follow_up.last_result
        results = {o.step.step_id: o.result for o in earlier}
        own = step.step_id
        if last_turn is not None and own not in results and own in step_references(step):
            # A step cannot use its own result: a follow-up's step that names itself means
            # the last turn's result, as the plan request shows it ("The last result: …").
            results[own] = last_turn
            self.recorder.emit(
                EventType.STEP_PROGRESS,
                f"${{{own}}} in step {own} itself: read as the last turn's result",
                step=own,
            )
        failed = [ref for ref in step_sources(step) if ref in results and results[ref].is_error]
        if failed:
            raise failed_dependency(failed)

        def report_progress(message: str, meta: dict[str, Any]) -> None:
            self.recorder.emit(EventType.STEP_PROGRESS, message, step=step.step_id, **meta)

        ctx = ToolContext(
            model=self.model,
            step_id=step.step_id,
            question=question,
            thinking=self.model.thinking,
            report_progress=report_progress,
        )
        # A tool that asks the model is bounded by the model's own time limit: on two busy
        # CPU cores one generation can outlast the tool limit without anything being wrong.
        limit = max(self.tool_timeout_s, self.model.timeout_s) if tool.uses_model else None
        call = StepAction(tool, ctx, timeout_s=limit or self.tool_timeout_s, examples=self.examples)
        arguments, why_not = call.literal_arguments(step.arguments, results, step_ids, step.input)
        # A code call writes the code afresh: on fenced_code for a step the plan gave no
        # arguments, for a step the plan gave no code at all, or when asked (code_call),
        # also over the plan's code that failed.
        write_code = tool.code_language is not None and (
            code_call or (not step.arguments and (self.fenced_code or not step.input))
        )
        if write_code:
            arguments, why_not = None, f"{tool.name} gets its code from a code call"
        # The model unit covers model work only: under per_step, a tool that does not ask
        # the model runs outside it, at the same time as the other steps' model calls.
        unit = self.model.unit(ModelRole.EXECUTOR)
        async with unit if tool.uses_model else contextlib.nullcontext():
            if arguments is None:
                self.recorder.emit(
                    EventType.STEP_THINKING, why_not or "", step=step.step_id, tool=tool.name
                )
                brief = StepBrief(
                    question=question,
                    task_goal=task.task_goal,
                    step_goal=step.step_goal,
                    tool_intent=step.tool_intent,
                    expected_output=step.expected_output,
                    planned_arguments=step.arguments,
                    results_digest=self._digest_for_arguments(earlier),
                    planned_input=step.input,
                    failed_before=run.failed_before,
                )
                async with self.model.unit(ModelRole.EXECUTOR):
                    if write_code:
                        arguments = await call.write_code(
                            brief, results, step_ids, run.code_temperature
                        )
                    else:
                        arguments = await call.think(brief, results, step_ids, why_not or "")
                outcome.thought = True
            act = functools.partial(self._act, run, call)
            try:
                await act(arguments)
            except ToolError as error:
                if not (write_code and self.code_repair):
                    raise
                self.recorder.emit(
                    EventType.STEP_THINKING,
                    f"the code failed: writing it again with the error ({error})",
                    step=step.step_id,
                    tool=tool.name,
                )
                async with self.model.unit(ModelRole.EXECUTOR):
                    repaired = await call.repair_code(
                        str(error), results, step_ids, self.repair_temperature
                    )
                if repaired == arguments:
                    raise ToolError(
                        f"{error} (the model wrote the same code again when shown the error)"
                    ) from None
                await act(repaired, repaired_after=str(error))

    async def _act(
        self,
        run: _StepRun,
        call: StepAction,
        arguments: dict[str, Any],
        repaired_after: str | None = None,
    ) -> None:
        """Check ``arguments`` (the checks of the call stage), then run the tool with them
        into ``run.outcome`` and check its result (the result stage); a ToolError says why
        the step failed. ``repaired_after``: the error the code was corrected after."""
        tool, step, question, earlier = run.tool, run.step, run.question, run.earlier
        run.outcome.arguments = arguments
        seen = Seen(
            question=question,
            asked=run.follow_up.questions,
            tool=tool,
            arguments=arguments,
            results=tuple(o.result for o in earlier if o.ok),
            meta={"step_goal": step.step_goal, "task_goal": run.task.task_goal},
        )
        refused = first_refusal(Stage.CALL, self, seen)
        if refused is not None:
            raise ToolError(refused)
        repeated = run.memory.guarded.get(CallMemory.signature(tool.name, arguments))
        if repeated is not None:
            before = next((o for o in earlier if o.step.step_id == repeated), None)
            if before is not None and before.ok:
                # The call that just succeeded, planned again: its result stands. Failing
                # it read to a 1.5B model's rethink as a failed calculation.
                self.recorder.emit(
                    EventType.STEP_PROGRESS,
                    f"the same call as step {repeated} just before the re-plan: its result "
                    "is used, and the tool is not run again",
                    step=step.step_id,
                    repeats=repeated,
                )
                run.outcome.result = before.result
                return
            gave = f": {before.result.content[:300]}" if before is not None else ""
            raise ToolError(
                f"repeated call: {tool.name} with the same arguments as step {repeated}, "
                f"just before the re-plan; it was not run again (that step's result{gave})"
            )
        await self.recorder.emit_and_wait(
            EventType.ACTION,
            json.dumps(arguments, ensure_ascii=False, default=str),
            step=step.step_id,
            tool=tool.name,
            arguments=arguments,
        )
        run.outcome.result = await call.act(arguments)
        after = {"repaired": repaired_after is not None, "error": repaired_after}
        seen = replace(seen, results=(run.outcome.result,), meta={**seen.meta, **after})
        refused = first_refusal(Stage.RESULT, self, seen)
        if refused is not None:
            raise ToolError(refused)

    def code_from_plan(self, outcome: StepOutcome) -> bool:
        """Whether the step's tool takes code and the code came from the plan (its input or
        its arguments), not from a model call of the step's own."""
        tool = self.registry.get(outcome.step.tool_name)
        return (
            tool is not None
            and tool.code_language is not None
            and not outcome.thought
            and outcome.arguments is not None
        )

    def _digest_for_arguments(self, earlier: list[StepOutcome]) -> str:
        # Leave room for the instructions and the tool's schema around the results.
        chars = max(self.model.prompt_budget(CallPurpose.ARGUMENTS) * 3 - 3_000, 600)
        return digest_results(earlier, chars) if earlier else ""

    async def _report(self, outcome: StepOutcome) -> None:
        step_id = outcome.step.step_id
        content = truncate_middle(outcome.result.content, EVENT_CONTENT_CHARS)
        await self.recorder.emit_and_wait(
            EventType.OBSERVATION,
            content,
            step=step_id,
            tool=outcome.step.tool_name,
            is_error=outcome.result.is_error,
            chars=len(outcome.result.content),
        )
        self.recorder.emit(
            EventType.STEP_COMPLETED if outcome.ok else EventType.STEP_FAILED,
            content,
            step=step_id,
            task=outcome.task_id,
            tool=outcome.step.tool_name,
            seconds=round(outcome.seconds, 4),
            thought=outcome.thought,
        )
