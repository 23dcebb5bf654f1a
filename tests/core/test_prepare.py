"""Preparing the model before a task: the planner's fixed prompt is prefilled into the
engine's cache, and the first plan call starts with exactly that prompt."""

from __future__ import annotations

import asyncio

import pytest
from support import make_agent, of_type, plan_reply, step

from agent_py import AgentConfig, AgentState, CallInfo, Message, ScriptedLLM
from agent_py.core.llm import LLMError, Usage
from agent_py.core.managed_llm import ResidencyPolicy
from agent_py.core.profiles import SMALL

PLAN = plan_reply([step("s1", "javascript_execute", {"code": "return 6 * 7"})])
SMALL_CONFIG = AgentConfig(
    plan_shape=SMALL.plan_shape, strategy=SMALL.strategy, budgets=SMALL.budgets
)


def small_plan() -> str:
    return (
        '<plan>{"tasks":[{"task_id":"t1","task_goal":"Multiply","steps":[{"step_id":"s1",'
        '"step_goal":"Multiply","tool_name":"javascript_execute","input":"return 6 * 7;"}]}]}'
        "</plan>"
    )


async def test_the_first_plan_call_reuses_the_prefilled_prompt() -> None:
    llm = ScriptedLLM.replaying({"plan": small_plan()})
    agent, sink = make_agent(llm, config=SMALL_CONFIG)

    usage = await agent.prepare()
    result = await agent.task("Use JavaScript to compute 6 times 7.")

    assert usage is not None and usage.prompt_tokens > 0
    assert result.state is AgentState.COMPLETED and "42" in result.answer
    [prefilled] = llm.prefills
    [(plan_messages, call)] = llm.calls
    # The prefilled prompt leads the plan call word for word: the system prompt and the
    # examples, then the start of a task (here the closest example's, shown again).
    fixed = len(prefilled) - 1
    assert plan_messages[:fixed] == prefilled[:-1]
    assert plan_messages[fixed]["content"].startswith(prefilled[-1]["content"])
    assert len(prefilled) > 3  # the system prompt and the worked examples
    [plan_event] = [e for e in of_type(sink.events, "assistant") if e.meta["purpose"] == "plan"]
    cached = plan_event.meta["usage"]["cached_prompt_tokens"]
    assert cached >= usage.prompt_tokens - 5  # all but the task's own words
    # The preparation is not part of the run: no reload, one model call.
    assert result.stats.model_calls == {"plan": 1}
    assert result.stats.reloads == 0
    assert llm.load_history == [call.model]


async def test_without_preparing_nothing_is_cached() -> None:
    llm = ScriptedLLM.replaying({"plan": small_plan()})
    agent, sink = make_agent(llm, config=SMALL_CONFIG)

    await agent.task("Use JavaScript to compute 6 times 7.")

    [plan_event] = [e for e in of_type(sink.events, "assistant") if e.meta["purpose"] == "plan"]
    assert plan_event.meta["usage"]["cached_prompt_tokens"] == 0


async def test_per_step_residency_prepares_nothing() -> None:
    llm = ScriptedLLM.replaying({"plan": PLAN, "rethink": "<status>done</status><final>42</final>"})
    agent, _ = make_agent(llm, config=AgentConfig(residency=ResidencyPolicy.PER_STEP))

    assert await agent.prepare() is None
    assert llm.load_history == [] and llm.prefills == []


class SlowPrefill(ScriptedLLM):
    """A prefill that lasts until the test lets it end."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def prefill(self, messages: list[Message], call: CallInfo) -> Usage | None:
        self.started.set()
        await self.release.wait()
        return await super().prefill(messages, call)


async def test_a_task_started_during_the_preparation_waits_for_it_and_completes() -> None:
    llm = SlowPrefill.replaying({"plan": small_plan()})
    agent, sink = make_agent(llm, config=SMALL_CONFIG)

    preparing = asyncio.create_task(agent.prepare())
    await llm.started.wait()
    running = asyncio.create_task(agent.task("Use JavaScript to compute 6 times 7."))
    for _ in range(200):  # the task has every chance to call the model: it must not
        await asyncio.sleep(0)
    assert agent.state is AgentState.PLANNING
    assert llm.calls == []
    llm.release.set()
    result = await running
    await preparing

    assert result.state is AgentState.COMPLETED and "42" in result.answer
    [plan_event] = [e for e in of_type(sink.events, "assistant") if e.meta["purpose"] == "plan"]
    assert plan_event.meta["usage"]["cached_prompt_tokens"] > 0


async def test_a_prefill_that_never_ends_fails_at_the_model_limit_and_frees_the_engine() -> None:
    """An engine that prefills forever fails the preparation at ``model_timeout_s`` (its load
    is not counted) with that said; a task waiting behind it then runs."""
    llm = SlowPrefill.replaying({"plan": small_plan()})
    config = SMALL_CONFIG.model_copy(update={"model_timeout_s": 0.2})
    agent, _ = make_agent(llm, config=config)

    preparing = asyncio.create_task(agent.prepare())
    await llm.started.wait()
    running = asyncio.create_task(agent.task("Use JavaScript to compute 6 times 7."))
    with pytest.raises(LLMError, match=r"the model did not prefill the plan prompt within 0\.2 s"):
        await asyncio.wait_for(preparing, 30)
    result = await asyncio.wait_for(running, 30)

    assert result.state is AgentState.COMPLETED and "42" in result.answer


class SlowLoad(ScriptedLLM):
    """A model whose load outlasts the model limit (a first download)."""

    async def reload(self, model: str) -> None:
        await asyncio.sleep(0.5)
        await super().reload(model)


async def test_a_long_load_is_not_a_stalled_prefill() -> None:
    llm = SlowLoad.replaying({"plan": small_plan()})
    config = SMALL_CONFIG.model_copy(update={"model_timeout_s": 0.2})
    agent, _ = make_agent(llm, config=config)

    usage = await asyncio.wait_for(agent.prepare(), 30)

    assert usage is not None and usage.prompt_tokens > 0


class SilentTokenizer(ScriptedLLM):
    """An engine whose tokenizer never answers (a wedged worker)."""

    async def count_tokens_exact(self, texts: list[str]) -> list[int] | None:
        await asyncio.Event().wait()
        return None


async def test_a_tokenizer_that_never_answers_fails_the_call_not_hangs_it() -> None:
    llm = SilentTokenizer.replaying({"plan": small_plan()})
    config = SMALL_CONFIG.model_copy(update={"model_timeout_s": 0.2})
    agent, _ = make_agent(llm, config=config)
    await asyncio.wait_for(agent.prepare(), 30)  # the model is loaded: its prompts are counted

    result = await asyncio.wait_for(agent.task("Use JavaScript to compute 6 times 7."), 30)

    assert result.state is AgentState.FAILED
    assert result.error == "the model engine did not count the plan prompt's tokens within 0.2 s"
