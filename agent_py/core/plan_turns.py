"""The planner's turns with the model: the plan call's prompt, the plan, a rethink after a
task, a corrected plan after failures and the answer, each asked, read and (once) repaired
in one place.

One append-only conversation holds them all (plan, then each rethink, then the answer), so
an engine that reuses its KV cache for a growing conversation (WebLLM) only prefills what
is new. Results go into it as a digest sized to what the prompt budget leaves free.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TypeVar

from agent_py.core.budget import BYTES_PER_TOKEN, MESSAGE_OVERHEAD_TOKENS, prompt_tokens
from agent_py.core.conversation import TurnDigest
from agent_py.core.errors import ReplyParseError, RunFailure
from agent_py.core.events import EventType
from agent_py.core.execution import StepOutcome, digest_results, result_statuses
from agent_py.core.history import EventRecorder
from agent_py.core.llm import CallOptions, CallPurpose, Sampling, Usage
from agent_py.core.messages import Keep, Message, stand_ins
from agent_py.core.model_client import NO_OPTIONS, ModelClient
from agent_py.core.parsing import (
    RethinkDecision,
    RethinkStatus,
    clean_answer,
    parse_plan,
    parse_rethink,
)
from agent_py.core.plan import PlanSchema, PlanShape, TaskSchema, plan_json_schema
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
from agent_py.core.written import read_written

DIGEST_MARGIN_TOKENS = 64  # the digest's own framing lines, estimated on the safe side
DIGEST_FLOOR_CHARS = 240  # results get at least this much, even in a full window

T = TypeVar("T")


class RepeatedReply(ReplyParseError):
    """The repaired reply was the unreadable one again, word for word."""


class PlanTurns:
    """Asks the model for plans, rethinks and the answer, in one conversation."""

    def __init__(
        self,
        model: ModelClient,
        registry: ToolRegistry,
        recorder: EventRecorder,
        *,
        plan_shape: PlanShape,
        strategy: Strategy,
    ) -> None:
        self.model = model
        self.registry = registry
        self.recorder = recorder
        self.plan_shape = plan_shape
        self.strategy = strategy
        self._focus: set[str] = set()  # the tools the system message keeps whole when tight

    def plan_schema(self) -> dict[str, object]:
        return plan_json_schema(self.registry.names, self.plan_shape)

    async def prefill(self) -> Usage | None:
        """Prefill the plan call's fixed part (system prompt, tools, examples) into the
        engine's cache before a task arrives. The question comes last in the plan prompt, so
        the first plan call computes only the question's tokens."""
        return await self.model.prefill(self.opening(""), CallPurpose.PLAN)

    def opening(self, question: str, earlier: Sequence[TurnDigest] = ()) -> list[Message]:
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

    def focus_on(self, plans: Sequence[PlanSchema], conversation: list[Message]) -> None:
        """From now on a tight window keeps the schemas of the tools ``plans`` use whole."""
        used = {step.tool_name for plan in plans for step in plan.steps()}
        if used != self._focus:  # only its stand-ins keep the focused tools whole
            conversation[0] = self._system_message(used, content=conversation[0]["content"])

    @staticmethod
    def instructions() -> list[str]:
        """Our instructions besides the system prompt, which an answer might repeat."""
        return [
            render(name)
            for name in (
                "rethink_user",
                "answer_system",
                "answer_user",
                "generator_system",
                "arguments_system",
            )
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

    async def _ask_and_read(
        self,
        conversation: list[Message],
        purpose: CallPurpose,
        read: Callable[[str], T],
        options: CallOptions = NO_OPTIONS,
        *,
        repair: str | None,
    ) -> T:
        """Ask, keep the reply in the conversation and read it; when it cannot be read and
        ``repair`` names a prompt, show the model why and ask once more. Raises the last
        ReplyParseError (a RepeatedReply when the repair gave the same reply)."""
        reply = await self.model.ask(conversation, purpose, options)
        conversation.append({"role": "assistant", "content": reply})
        try:
            return read(reply)
        except ReplyParseError as first:
            if repair is None:
                raise
            error = first.reason
        conversation.append({"role": "user", "content": render(repair, error=error)})
        repaired = await self.model.ask(conversation, purpose, options)
        conversation.append({"role": "assistant", "content": repaired})
        if repaired.strip() == reply.strip():
            raise RepeatedReply(error)
        return read(repaired)

    async def plan(self, conversation: list[Message]) -> PlanSchema:
        """The model's plan, repaired once when unreadable; raises ReplyParseError."""
        return await self._ask_and_read(
            conversation,
            CallPurpose.PLAN,
            parse_plan,
            CallOptions(schema=self.plan_schema()),
            repair="plan_repair",
        )

    async def corrected_plan(self, conversation: list[Message], failures: str) -> PlanSchema | None:
        """One corrected plan after ``failures``, or None when the reply is unusable."""
        conversation.append({"role": "user", "content": render("plan_retry", failures=failures)})
        sampling = None
        if self.strategy.retry_temperature is not None:
            base = self.model.sampling or Sampling()
            sampling = base.model_copy(update={"temperature": self.strategy.retry_temperature})
        options = CallOptions(schema=self.plan_schema(), sampling=sampling)
        try:
            return await self._ask_and_read(
                conversation, CallPurpose.PLAN, parse_plan, options, repair=None
            )
        except ReplyParseError as error:
            self.recorder.emit(
                EventType.REFLECTION,
                f"no usable corrected plan ({error.reason}); going on",
                status=RethinkStatus.CONTINUE.value,
                unreadable=True,
            )
            return None

    async def rethink(
        self,
        conversation: list[Message],
        task: TaskSchema,
        outcomes: list[StepOutcome],
        pending: list[TaskSchema],
    ) -> RethinkDecision:
        """The model's decision after ``task``; an unreadable one, repaired once, stands as
        "continue" (the plan still stands)."""
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
        try:
            return await self._ask_and_read(
                conversation, CallPurpose.RETHINK, parse_rethink, repair="rethink_repair"
            )
        except ReplyParseError as error:
            # The plan still stands; an unreadable reflection is no reason to stop.
            self.recorder.emit(
                EventType.REFLECTION,
                f"could not read the reflection ({error.reason}); continuing with the plan",
                task=task.task_id,
                status=RethinkStatus.CONTINUE.value,
                unreadable=True,
            )
            return RethinkDecision(RethinkStatus.CONTINUE, unreadable=True)

    async def answer(
        self, conversation: list[Message], question: str, outcomes: list[StepOutcome]
    ) -> str:
        """The answer from ``outcomes``: the plan conversation's next turn, or with
        ``answer_apart`` a conversation of its own (``question`` then holds what a follow-up
        builds on)."""
        if self.strategy.answer_apart:
            conversation = [{"role": "system", "content": render("answer_system")}]
        conversation.append(
            self._with_results(
                conversation, CallPurpose.ANSWER, "answer_user", outcomes, question=question
            )
        )
        reply = await self.model.ask(conversation, CallPurpose.ANSWER)
        conversation.append({"role": "assistant", "content": reply})
        written = read_written(clean_answer(reply))
        if written.cannot:  # the reply format's status, in any language
            raise RunFailure(f"the model says it cannot do the task: {written.text.strip()}")
        return written.text

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
