"""Reloads and unloads under each residency policy, counted on a scripted engine."""

from __future__ import annotations

import asyncio

import pytest
from support import CONTINUE, make_agent, plan_reply, step

from agent_py import (
    AgentConfig,
    AgentState,
    CallInfo,
    MemoryPressureError,
    Message,
    ModelRoles,
    ResidencyPolicy,
    ScriptedLLM,
)
from agent_py.core.llm import CallOptions, CallPurpose, ModelNotLoadedError
from agent_py.core.managed_llm import ManagedLLM
from agent_py.tools import LLMGenerator

# Two tasks of one generator step each: plan, step, rethink, step, rethink, answer
# = six units of model work.
TWO_GENERATOR_TASKS = plan_reply(
    [step("s1", "llm_generator", {"prompt": "write a"})],
    [step("s2", "llm_generator", {"prompt": "write b"})],
)


def two_step_llm() -> ScriptedLLM:
    return ScriptedLLM.replaying(
        {"plan": TWO_GENERATOR_TASKS, "generate": "text", "rethink": CONTINUE, "answer": "done"}
    )


async def run(
    llm: ScriptedLLM, policy: ResidencyPolicy, executor: str | None = None
) -> tuple[int, int, int, int]:
    config = AgentConfig(
        models=ModelRoles(planner="planner-model", executor=executor), residency=policy
    )
    agent, _ = make_agent(llm, LLMGenerator(), config=config)
    result = await agent.task("write two things")
    assert result.state is AgentState.COMPLETED, result.error
    await agent.close()
    return (
        result.stats.reloads,
        result.stats.unloads,
        agent.llm.stats.reloads,
        agent.llm.stats.unloads,
    )


async def test_per_step_reloads_and_unloads_around_every_unit() -> None:
    llm = two_step_llm()
    assert await run(llm, ResidencyPolicy.PER_STEP) == (6, 6, 6, 6)
    assert llm.loaded_model is None


async def test_keep_warm_loads_once_and_unloads_on_close() -> None:
    llm = two_step_llm()
    assert await run(llm, ResidencyPolicy.KEEP_WARM) == (1, 0, 1, 1)
    assert llm.loaded_model is None


async def test_auto_with_one_model_keeps_it_warm() -> None:
    assert await run(two_step_llm(), ResidencyPolicy.AUTO) == (1, 0, 1, 1)


async def test_auto_with_two_models_switches_to_per_step() -> None:
    llm = two_step_llm()
    assert await run(llm, ResidencyPolicy.AUTO, executor="executor-model") == (6, 6, 6, 6)
    p, e = "planner-model", "executor-model"
    assert llm.load_history == [p, e, p, e, p, p]


async def test_keep_warm_with_two_models_reloads_only_on_a_switch() -> None:
    llm = two_step_llm()
    assert await run(llm, ResidencyPolicy.KEEP_WARM, executor="executor-model") == (5, 0, 5, 1)


def pressure_once() -> ScriptedLLM:
    raised = []

    def generate(messages: list[Message], call: CallInfo) -> str:
        if not raised:
            raised.append(True)
            raise MemoryPressureError("out of GPU memory")
        return "text"

    return ScriptedLLM.replaying(
        {"plan": TWO_GENERATOR_TASKS, "generate": generate, "rethink": CONTINUE, "answer": "ok"}
    )


async def test_auto_under_memory_pressure_retries_and_then_unloads_between_units() -> None:
    llm = pressure_once()
    # plan: load (1). s1: pressure -> unload (1), reload (2), retry. Then per_step for the
    # four units left: rethink, s2, rethink, answer -> 4 reloads, 4 unloads.
    assert await run(llm, ResidencyPolicy.AUTO) == (6, 5, 6, 5)


async def test_keep_warm_under_memory_pressure_fails_the_step_with_the_reason() -> None:
    config = AgentConfig(residency=ResidencyPolicy.KEEP_WARM)
    agent, _ = make_agent(pressure_once(), LLMGenerator(), config=config)
    result = await agent.task("write")
    assert result.steps[0].ok is False
    assert result.steps[0].output == "llm_generator raised MemoryPressureError: out of GPU memory"


async def test_calls_to_one_engine_are_serialized() -> None:
    active = 0
    peak = 0

    async def script(messages: list[Message], call: CallInfo) -> str:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.02)
        active -= 1
        return "x"

    llm = ManagedLLM(ScriptedLLM(script), ModelRoles(planner="m"))
    await asyncio.gather(
        *(
            llm.chat(
                [{"role": "user", "content": "hi"}],
                CallPurpose.GENERATE,
                CallOptions(),
                max_tokens=8,
            )
            for _ in range(5)
        )
    )
    assert peak == 1
    assert llm.stats.calls["generate"] == 5


async def test_scripted_engine_refuses_a_call_for_a_model_that_is_not_loaded() -> None:
    llm = ScriptedLLM(lambda messages, call: "x")
    with pytest.raises(ModelNotLoadedError):
        await llm.chat([], CallInfo(purpose=CallPurpose.PLAN, model="m", max_tokens=8))
