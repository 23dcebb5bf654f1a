"""The public face: ``Agent(llm=…, tools=…, on_event=…)`` and ``await agent.task(question)``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from pydantic import BaseModel, Field

from agent_py.core.conversation import (
    SessionState,
    TurnDigest,
    make_digest,
    turns_that_fit,
)
from agent_py.core.errors import AgentError, LLMError, PlanCancelled, PromptTooLargeError
from agent_py.core.events import AgentState, Event, EventType, FailureCause
from agent_py.core.execution import StepOutcome
from agent_py.core.history import EventListener, EventRecorder, HistorySink, Hooks, new_session_id
from agent_py.core.llm import LLM, Sampling, Usage
from agent_py.core.managed_llm import ManagedLLM, ModelRoles, ModelStats, ResidencyPolicy
from agent_py.core.model_client import ModelClient, ReplyBudgets, TokenListener
from agent_py.core.plan import PlanSchema, PlanShape
from agent_py.core.planner import PlanAndRethink, PlanRun
from agent_py.core.profiles import Strategy
from agent_py.core.registry import ToolRegistry
from agent_py.core.review import PlanReviewer, ReviewPolicy
from agent_py.core.tool import ToolBase

DEFAULT_MODEL = "Qwen3-4B-q4f16_1-MLC"
EARLIER_TURNS_SHARE = 8
"""Earlier turns of the session take at most this fraction (1/N) of the context window."""


class AgentConfig(BaseModel):
    models: ModelRoles = ModelRoles(planner=DEFAULT_MODEL)
    residency: ResidencyPolicy = ResidencyPolicy.AUTO
    context_window: int = Field(4096, ge=512)
    budgets: ReplyBudgets = ReplyBudgets()
    thinking: bool = False
    plan_shape: PlanShape = PlanShape()
    strategy: Strategy = Strategy()
    sampling: Sampling | None = None
    text_sampling: Sampling | None = None
    """Sampling of free-text calls (generate, answer, rethink); None: ``sampling``."""
    review: ReviewPolicy = "off"
    """Which plans wait for the user's review (needs the agent's ``reviewer``)."""
    max_steps: int = Field(100, ge=1)
    max_replans: int = Field(5, ge=0)
    tool_timeout_s: float = Field(60.0, gt=0)
    model_timeout_s: float = Field(600.0, gt=0)


class WrittenFile(BaseModel):
    """A file a step wrote into the workspace, as the history records it."""

    name: str
    size: int
    sha256: str


class StepRecord(BaseModel):
    step_id: str
    task_id: str
    tool: str
    ok: bool
    thought: bool
    seconds: float
    arguments: dict[str, Any] | None
    output: str
    files: list[WrittenFile] = []
    """What the step wrote into the workspace (python_execute's out/)."""


class RunStats(BaseModel):
    model_calls: dict[str, int] = {}
    reloads: int = 0
    unloads: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_time_s: float = 0.0
    wall_time_s: float = 0.0
    steps_run: int = 0
    replans: int = 0
    step_seconds: dict[str, float] = {}

    @property
    def total_model_calls(self) -> int:
        return sum(self.model_calls.values())


class RunResult(BaseModel):
    answer: str
    state: AgentState
    error: str | None = None
    failure: FailureCause | None = None
    """Why a failed run failed (None unless ``state`` is failed)."""
    plan: PlanSchema | None = None
    """The latest plan (after any re-plan)."""
    steps: list[StepRecord] = []
    stats: RunStats = RunStats()
    files: list[WrittenFile] = []
    """What the run's successful steps wrote into the workspace, the last write of a name."""


class Agent:
    """Plans, executes and rethinks a task with a model and tools.

    ``llm`` is an engine (wrapped with ``config.models`` and ``config.residency``) or an
    already managed one. Events go to ``on_event``, the history sinks and the hooks.
    """

    def __init__(
        self,
        *,
        llm: LLM | ManagedLLM,
        tools: Iterable[ToolBase] | ToolRegistry = (),
        on_event: EventListener | None = None,
        on_token: TokenListener | None = None,
        config: AgentConfig | None = None,
        sinks: Iterable[HistorySink] = (),
        hooks: Hooks | None = None,
        session: str | None = None,
        reviewer: PlanReviewer | None = None,
    ) -> None:
        self.config = config or AgentConfig()
        self.reviewer = reviewer
        self.recorder = EventRecorder(listener=on_event, sinks=sinks, hooks=hooks, session=session)
        self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self.llm = (
            llm
            if isinstance(llm, ManagedLLM)
            else ManagedLLM(
                llm,
                self.config.models,
                self.config.residency,
                on_model_event=self._on_model_event,
            )
        )
        self.model = ModelClient(
            self.llm,
            self.recorder,
            context_window=self.config.context_window,
            budgets=self.config.budgets,
            thinking=self.config.thinking,
            timeout_s=self.config.model_timeout_s,
            on_token=on_token,
            sampling=self.config.sampling,
            text_sampling=self.config.text_sampling,
            compact_json=self.config.strategy.compact_json,
        )
        self.state = AgentState.IDLE
        self._running: asyncio.Task[Any] | None = None
        self._cancel_requested = False
        self._session_started = False
        self._session_active = False  # a turn ran in this session since it was taken up
        self.earlier: list[TurnDigest] = []
        """The session's finished turns, oldest first: what a follow-up task is told."""

    @property
    def session(self) -> str:
        return self.recorder.session

    def start_session(self, events: Iterable[Event] = ()) -> None:
        """End the current session (if it had a turn) and start another: a new one, or the
        recorded session of ``events`` (its JSONL history, or the page's stored events),
        continued: the next task is its next turn, under its id, and sees its earlier turns.
        The model stays loaded."""
        if self._running is not None:
            raise RuntimeError("a session cannot change while a task runs")
        if self._session_active:
            self.recorder.emit(EventType.SESSION_END, turns=self.recorder.turn)
        self.take_over(
            SessionState.recorded(events) or SessionState(new_session_id(), 0, [], started=False)
        )

    def handover(self) -> SessionState:
        """Where this agent's session stands, for an agent that replaces it (new settings)."""
        return SessionState(
            self.recorder.session,
            self.recorder.turn,
            list(self.earlier),
            self._session_started,
            self._session_active,
        )

    def take_over(self, state: SessionState) -> None:
        """Go on with ``state``'s session: its id, its turn count, its earlier turns."""
        self.recorder.session = state.session
        self.recorder.turn = state.turn
        self.earlier = list(state.earlier)
        self._session_started = state.started
        self._session_active = state.active

    async def task(
        self, question: str, *, first: Callable[[], Awaitable[None]] | None = None
    ) -> RunResult:
        """Run ``question`` to an answer. Never raises for a failed run: see ``state``.

        ``first``: awaited before the turn begins (the page waits there for servers still
        connecting, and takes their tools). A :meth:`cancel` meanwhile ends the turn as
        cancelled, with nothing planned."""
        if self._running is not None:
            raise RuntimeError("this agent is already running a task")
        self._running = asyncio.current_task()
        self._cancel_requested = False
        stopped_first = False
        if first is not None:
            try:
                await first()
            except asyncio.CancelledError:
                if not self._cancel_requested or self._running is None:
                    self._running = None
                    raise
                self._running.uncancel()
                stopped_first = True
        self.recorder.turn += 1
        self._session_active = True
        if not self._session_started:
            self._session_started = True
            self.recorder.emit(
                EventType.SESSION_START,
                models=self.config.models.model_dump(),
                residency=self.config.residency.value,
                tools=self.tools.names,
            )
        await self.recorder.emit_and_wait(EventType.TURN_START, question)
        before = self.llm.stats.snapshot()
        started = time.perf_counter()
        run = PlanRun()
        state, error, failure = AgentState.FAILED, None, FailureCause.TASK
        cancelled_from_outside = False
        earlier = turns_that_fit(self.earlier, self.config.context_window // EARLIER_TURNS_SHARE)
        try:
            if stopped_first:
                state, error = AgentState.CANCELLED, "stopped by the user"
            else:
                await self._planner().run(question, run, earlier_turns=earlier)
                state = AgentState.COMPLETED
        except asyncio.CancelledError:
            state, error = AgentState.CANCELLED, "stopped by the user"
            if self._cancel_requested and self._running is not None:
                self._running.uncancel()
            else:
                cancelled_from_outside = True
        except PlanCancelled as exc:
            state, error = AgentState.CANCELLED, str(exc)
        except LLMError as exc:  # the engine, not the task: a scorer must not judge it
            error = str(exc)
            if not isinstance(exc, PromptTooLargeError):
                failure = FailureCause.ENGINE
        except AgentError as exc:  # a failure we know: its message is for the user
            error = str(exc)
        except Exception as exc:  # a bug of ours: still end the turn with a clear event
            error = f"internal error: {type(exc).__name__}: {exc}"
            failure = FailureCause.INTERNAL
        finally:
            self._running = None
        result = self._result(run, state, error, before, started)
        if state is AgentState.FAILED:
            engine_steps = any(o.engine_failed for o in run.outcomes)
            result.failure = FailureCause.ENGINE if engine_steps else failure
        self._set_state(state)
        await self.recorder.emit_and_wait(
            EventType.FINAL,
            result.answer if state is AgentState.COMPLETED else (error or ""),
            state=state.value,
            error=error,
            failure=result.failure.value if result.failure else None,
            failed_steps=[s.step_id for s in result.steps if not s.ok],
            stats=result.stats.model_dump(),
            files=[f.model_dump() for f in result.files],
        )
        digest = make_digest(
            self.recorder.turn,
            question,
            state.value,
            result.answer if state is AgentState.COMPLETED else (error or ""),
            plan=run.plan_reply,
        )
        self.earlier.append(digest)
        self.recorder.emit(EventType.TURN_END, state=state.value, digest=digest.model_dump())
        await self.recorder.flush_hooks()
        if cancelled_from_outside:
            raise asyncio.CancelledError
        return result

    async def prepare(self) -> Usage | None:
        """Load the planner's model and prefill the plan call's fixed part (system prompt,
        tools, examples) while no task runs, so the next task's first call skips it. A task
        started meanwhile waits for it: the prefix is the same, so waiting is never slower
        than starting over. Returns the engine's usage, or None where the engine keeps no
        prompt cache (or the model is unloaded between units)."""
        return await self._planner().prefill()

    def _planner(self) -> PlanAndRethink:
        return PlanAndRethink(
            self.model,
            self.tools,
            self.recorder,
            max_steps=self.config.max_steps,
            max_replans=self.config.max_replans,
            tool_timeout_s=self.config.tool_timeout_s,
            plan_shape=self.config.plan_shape,
            strategy=self.config.strategy,
            on_state=self._set_state,
            reviewer=self.reviewer,
            review=self.config.review,
        )

    def cancel(self) -> None:
        """Stop the running task; ``task()`` then returns with state ``cancelled``."""
        if self._running is not None and not self._running.done():
            self._cancel_requested = True
            self._running.cancel()

    async def close(self, *, end_session: bool = True) -> None:
        """Unload the model and end the session (unless another agent takes it over)."""
        await self.llm.close()
        if self._session_active and end_session:
            self.recorder.emit(EventType.SESSION_END, turns=self.recorder.turn)
        await self.recorder.flush_hooks()

    def _set_state(self, state: AgentState) -> None:
        if state is not self.state:
            self.state = state
            self.recorder.emit(EventType.STATE, state.value, state=state.value)

    def _on_model_event(self, action: str, meta: dict[str, Any]) -> None:
        self.recorder.emit(EventType.MODEL, action, **meta)

    def _result(
        self,
        run: PlanRun,
        state: AgentState,
        error: str | None,
        before: ModelStats,
        started: float,
    ) -> RunResult:
        used = self.llm.stats.since(before)
        stats = RunStats(
            model_calls=dict(used.calls),
            reloads=used.reloads,
            unloads=used.unloads,
            prompt_tokens=used.prompt_tokens,
            completion_tokens=used.completion_tokens,
            model_time_s=used.model_time_s,
            wall_time_s=time.perf_counter() - started,
            steps_run=len(run.outcomes),
            replans=run.replans,
            step_seconds={o.step.step_id: o.seconds for o in run.outcomes},
        )
        steps = [_step_record(o) for o in run.outcomes]
        return RunResult(
            answer=run.answer,
            state=state,
            error=error,
            plan=run.plans[-1] if run.plans else None,
            steps=steps,
            stats=stats,
            files=list({f.name: f for s in steps if s.ok for f in s.files}.values()),
        )


def _step_record(outcome: StepOutcome) -> StepRecord:
    return StepRecord(
        step_id=outcome.step.step_id,
        task_id=outcome.task_id,
        tool=outcome.step.tool_name,
        ok=outcome.ok,
        thought=outcome.thought,
        seconds=outcome.seconds,
        arguments=outcome.arguments,
        output=outcome.result.content,
        files=[WrittenFile.model_validate(f) for f in outcome.result.meta.get("files", [])],
    )
