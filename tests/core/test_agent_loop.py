"""The plan → execute → rethink → answer loop, with a scripted model and real tools."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from support import (
    CONTINUE,
    BrokenTool,
    EchoTool,
    SleepTool,
    calls_for,
    make_agent,
    of_type,
    plan_reply,
    step,
)

from agent_py import (
    AgentConfig,
    AgentState,
    CallInfo,
    Event,
    EventType,
    JavascriptExecutor,
    LLMGenerator,
    Message,
    PlanShape,
    ScriptedLLM,
    ToolContext,
    ToolResult,
)
from agent_py.core.budget import MESSAGE_OVERHEAD_TOKENS, estimate_tokens
from agent_py.core.llm import CallPurpose
from agent_py.tools.node_runner import NodeRunner


async def test_two_task_plan_runs_end_to_end_with_real_javascript() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [step("s1", "javascript_execute", {"code": "console.log('hi'); return 6 * 7"})],
                [step("s2", "llm_generator")],
            ),
            "arguments": '{"prompt": "Explain the number ${s1}"}',
            "generate": "<think>It is 42.</think>The answer is forty-two.",
            "rethink": [CONTINUE, "<status>done</status><final>**42**, explained</final>"],
        }
    )
    agent, sink = make_agent(llm)

    result = await agent.task("What is six times seven?")

    assert result.state is AgentState.COMPLETED
    assert result.answer == "**42**, explained"
    assert [s.step_id for s in result.steps] == ["s1", "s2"]
    assert result.steps[0].output.startswith("result: 42")
    assert "console:\nhi" in result.steps[0].output
    # ${s1} was substituted with the JS result before the generator ran.
    assert result.steps[1].arguments == {"prompt": "Explain the number 42"}
    assert result.steps[1].output == "The answer is forty-two."
    assert result.stats.model_calls == {"plan": 1, "arguments": 1, "generate": 1, "rethink": 2}
    types = [e.type for e in sink.events]
    for expected in (
        "session_start",
        "turn_start",
        "plan_started",
        "step_started",
        "step_thinking",
        "action",
        "observation",
        "step_completed",
        "reflection",
        "plan_completed",
        "final",
        "turn_end",
    ):
        assert expected in types, expected
    assert types.index("plan_started") < types.index("step_started") < types.index("final")
    thinking = of_type(sink.events, EventType.THINKING)
    assert [e.content for e in thinking] == ["It is 42."]
    assert all("<think>" not in e.content for e in of_type(sink.events, EventType.ASSISTANT))


async def test_literal_arguments_skip_the_think_call() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "echo", {"text": "ab", "times": 2})]),
            "rethink": "<status>done</status><final>abab</final>",
        }
    )
    echo = EchoTool()
    agent, sink = make_agent(llm, echo)

    result = await agent.task("repeat ab twice")

    assert result.state is AgentState.COMPLETED
    assert echo.calls == [{"text": "ab", "times": 2}]
    assert calls_for(llm, "arguments") == 0
    assert result.steps[0].thought is False
    assert not of_type(sink.events, EventType.STEP_THINKING)


async def test_plan_arguments_that_break_the_schema_are_filled_by_the_model() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "echo", {"text": "ab", "times": "two"})]),
            "arguments": '{"text": "ab", "times": 2}',
            "rethink": "<status>done</status><final>ok</final>",
        }
    )
    echo = EchoTool()
    agent, _ = make_agent(llm, echo)

    await agent.task("repeat")

    assert echo.calls == [{"text": "ab", "times": 2}]
    prompt = llm.calls[1][0][-1]["content"]
    assert "The plan proposed" in prompt and "is not of type 'integer'" in prompt


async def test_malformed_plan_is_repaired_with_the_parse_error() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": [
                '<plan>{"tasks": [{"task_id": "t1", "steps": [',
                plan_reply([step("s1", "echo", {"text": "x", "times": 1})]),
            ],
            "rethink": "<status>done</status><final>x</final>",
        }
    )
    agent, _ = make_agent(llm, EchoTool())

    result = await agent.task("echo x")

    assert result.state is AgentState.COMPLETED
    assert calls_for(llm, "plan") == 2
    repair_prompt = llm.calls[1][0][-1]["content"]
    assert "cut off" in repair_prompt


async def test_unrepairable_plan_fails_with_the_reason() -> None:
    llm = ScriptedLLM.replaying({"plan": ["no plan here", '<plan>{"tasks": []}</plan>']})
    agent, sink = make_agent(llm, EchoTool())

    result = await agent.task("anything")

    assert result.state is AgentState.FAILED
    assert result.error is not None
    assert "no usable plan after one repair" in result.error
    assert "tasks" in result.error
    final = of_type(sink.events, EventType.FINAL)
    assert len(final) == 1 and final[0].meta["state"] == "failed"


async def test_model_repeating_a_bad_plan_is_caught() -> None:
    llm = ScriptedLLM.replaying({"plan": "I cannot plan."})
    agent, _ = make_agent(llm, EchoTool())

    result = await agent.task("anything")

    assert result.state is AgentState.FAILED
    assert result.error is not None and "repeated the same reply" in result.error


async def test_unknown_tool_becomes_an_observation_then_rethink_and_the_run_fails() -> None:
    seen: list[str] = []

    def rethink(messages: list[Message], call: CallInfo) -> str:
        seen.append(messages[-1]["content"])
        return "<status>done</status><final>gave up on web search</final>"

    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([step("s1", "web_search", {"q": "x"})]), "rethink": rethink}
    )
    agent, _ = make_agent(llm, EchoTool())

    result = await agent.task("search the web")

    # The rethink saw the observation; its answer after a failed step, before any other
    # plan, got one corrected plan (the same, replayed); a run whose every step failed
    # still ends failed.
    assert result.state is AgentState.FAILED
    unknown = "(web_search): unknown tool web_search; available: echo"
    assert result.error == f"every step failed: s1 {unknown}; s2 {unknown}"
    assert calls_for(llm, "plan") == 2
    assert result.steps[0].ok is False
    assert result.steps[0].output == "unknown tool web_search; available: echo"
    assert "unknown tool web_search; available: echo" in seen[0]


async def test_invalid_arguments_are_repaired_once() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "echo")]),
            "arguments": ['{"text": "a"}', '{"text": "a", "times": 3}'],
            "rethink": "<status>done</status><final>aaa</final>",
        }
    )
    echo = EchoTool()
    agent, _ = make_agent(llm, echo)

    result = await agent.task("a three times")

    assert echo.calls == [{"text": "a", "times": 3}]
    assert calls_for(llm, "arguments") == 2
    repair = llm.calls[2][0][-1]["content"]
    assert "'times' is a required property" in repair
    assert result.steps[0].thought is True


async def test_invalid_arguments_not_repaired_fail_the_step_only() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": [
                plan_reply([step("s1", "echo"), step("s2", "sleep", {"seconds": 0})]),
                plan_reply([step("s3", "sleep", {"seconds": 0.01})]),
            ],
            "arguments": ['{"text": 5, "times": 1}', '{"text": "a", "times": 0}'],
            "rethink": "<status>done</status><final>partial</final>",
        }
    )
    echo = EchoTool()
    agent, sink = make_agent(llm, echo, SleepTool())

    result = await agent.task("try")

    assert echo.calls == []
    failed = {s.step_id: s for s in result.steps}
    assert failed["s1"].ok is False
    assert "invalid arguments for echo" in failed["s1"].output
    assert "minimum of 1" in failed["s1"].output
    assert failed["s2"].ok is True
    assert [e.step for e in of_type(sink.events, EventType.STEP_FAILED)] == ["s1"]


async def test_tool_exception_and_timeout_are_observations() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [step("s1", "broken", {}), step("s2", "sleep", {"seconds": 5})],
            ),
            "rethink": "<status>done</status><final>both failed</final>",
        }
    )
    config = AgentConfig(tool_timeout_s=0.3)
    agent, _ = make_agent(llm, BrokenTool(), SleepTool(), config=config)

    started = time.perf_counter()
    result = await agent.task("break things")

    assert time.perf_counter() - started < 3
    outputs = {s.step_id: s.output for s in result.steps}
    assert outputs["s1"] == "broken raised RuntimeError: disk on fire"
    assert outputs["s2"] == "sleep timed out after 0.3 s"
    assert result.state is AgentState.FAILED  # every step failed
    assert result.error is not None and result.error.startswith("every step failed: s1 (broken)")


class MeetingTool(SleepTool):
    """Each call waits until all ``expected`` calls have started: calls that run one after
    another never meet, and the hang guard ends them."""

    name = "sleep"

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.started = 0
        self.all_started = asyncio.Event()

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.started += 1
        if self.started == self.expected:
            self.all_started.set()
        try:
            await asyncio.wait_for(self.all_started.wait(), 60)
        except TimeoutError:
            return ToolResult("ran alone", is_error=True)
        return ToolResult("met the others")


async def test_steps_of_a_task_run_concurrently() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step(f"s{i}", "sleep", {"seconds": 0}) for i in range(1, 4)]),
            "rethink": "<status>done</status><final>rested</final>",
        }
    )
    meeting = MeetingTool(expected=3)
    agent, _ = make_agent(llm, meeting)

    result = await agent.task("rest three times")

    # Each step waited for the other two to start: only steps that run at once get there.
    assert [s.output for s in result.steps] == ["met the others"] * 3


async def test_max_steps_stops_the_run() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [step("s1", "sleep", {"seconds": 0})],
                [step("s2", "sleep", {"seconds": 0}), step("s3", "sleep", {"seconds": 0.01})],
            ),
            "rethink": CONTINUE,
        }
    )
    agent, _ = make_agent(llm, SleepTool(), config=AgentConfig(max_steps=2))

    result = await agent.task("too much")

    assert result.state is AgentState.FAILED
    assert result.error is not None and "max_steps=2" in result.error
    assert [s.step_id for s in result.steps] == ["s1"]


async def test_replans_are_bounded() -> None:
    replan = "<status>changed</status>" + plan_reply([step("s9", "sleep", {"seconds": 0})])
    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([step("s1", "sleep", {"seconds": 0})]), "rethink": replan}
    )
    agent, _ = make_agent(llm, SleepTool(), config=AgentConfig(max_replans=2))

    result = await agent.task("loop forever")

    assert result.state is AgentState.FAILED
    assert result.error == "stopped after 2 re-plans"


async def test_a_repeated_call_is_not_run_again() -> None:
    """A re-plan that repeats the call just made: a failed one fails again without running
    (the model is told why); a successful one gives the same result without running (Qwen2.5-
    Coder-1.5B re-planned multiply(100, 0.5) after it gave 50, and read a failure there as a
    failed calculation)."""
    for text, ok in (("x", True), ("fail", False)):
        replan = "<status>changed</status>" + plan_reply(
            [step("s2", "echo", {"text": text, "times": 1})]
        )
        llm = ScriptedLLM.replaying(
            {
                "plan": plan_reply([step("s1", "echo", {"text": text, "times": 1})]),
                "rethink": [replan, "<status>done</status><final>stop</final>"],
            }
        )
        echo = EchoTool()
        agent, sink = make_agent(llm, echo)

        result = await agent.task("echo")

        assert len(echo.calls) == 1
        assert result.steps[1].ok is ok
        if ok:
            assert result.steps[1].output == result.steps[0].output
            progress = of_type(sink.events, EventType.STEP_PROGRESS)
            assert progress[-1].content.startswith("the same call as step s1 just before")
        else:
            assert result.steps[1].output.startswith(
                "repeated call: echo with the same arguments as step s1"
            )


def set_on(flag: asyncio.Event, type_: EventType) -> Callable[[Event], None]:
    def listener(event: Event) -> None:
        if event.type == type_:
            flag.set()

    return listener


async def test_cancel_mid_run_ends_cleanly_and_the_agent_runs_again() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": [
                plan_reply([step("s1", "sleep", {"seconds": 10})]),
                plan_reply([step("s1", "sleep", {"seconds": 0})]),
            ],
            "rethink": "<status>done</status><final>rested</final>",
        }
    )
    started = asyncio.Event()
    agent, sink = make_agent(llm, SleepTool(), on_event=set_on(started, EventType.STEP_STARTED))

    running = asyncio.create_task(agent.task("sleep long"))
    await started.wait()
    agent.cancel()
    result = await asyncio.wait_for(running, 2)

    assert result.state is AgentState.CANCELLED
    assert result.error == "stopped by the user"
    assert [e.meta["state"] for e in of_type(sink.events, EventType.FINAL)] == ["cancelled"]
    assert of_type(sink.events, EventType.STEP_COMPLETED) == []

    again = await agent.task("sleep short")

    assert again.state is AgentState.COMPLETED
    assert again.answer == "rested"


async def test_cancelling_the_caller_still_emits_final_and_propagates() -> None:
    llm = ScriptedLLM.replaying({"plan": plan_reply([step("s1", "sleep", {"seconds": 10})])})
    started = asyncio.Event()
    agent, sink = make_agent(llm, SleepTool(), on_event=set_on(started, EventType.STEP_STARTED))

    running = asyncio.create_task(agent.task("sleep long"))
    await started.wait()
    running.cancel()

    with pytest.raises(asyncio.CancelledError):
        await running
    assert [e.meta["state"] for e in of_type(sink.events, EventType.FINAL)] == ["cancelled"]


async def test_long_observation_is_cut_and_every_prompt_fits_the_window() -> None:
    big = "A" * 60_000 + "TAIL"
    code = f"return {json.dumps(big)}"
    config = AgentConfig(context_window=2048)
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [step("s1", "javascript_execute", {"code": code})],
                [step("s2", "llm_generator", {"prompt": "Summarise: ${s1}"})],
            ),
            "generate": "a long run of A",
            "rethink": CONTINUE,
            "answer": "many As",
        }
    )
    js = JavascriptExecutor(NodeRunner(), output_limit=100_000)
    agent, _ = make_agent(llm, LLMGenerator(), js, config=config)

    result = await agent.task("make a big string")

    assert result.state is AgentState.COMPLETED
    # The full result stays in Python: the JS value and the substituted prompt are whole.
    assert result.steps[0].output == f"result: {big}"
    assert result.steps[1].arguments is not None
    assert len(result.steps[1].arguments["prompt"]) > 60_000
    for messages, call in llm.calls:
        budget = config.context_window - config.budgets.for_purpose(call.purpose)
        used = sum(estimate_tokens(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)
        assert used <= budget, (call.purpose, used, budget)
    rethink_prompt = next(m for m, c in llm.calls if c.purpose is CallPurpose.RETHINK)
    assert "characters cut" in rethink_prompt[-1]["content"]
    assert "TAIL" in rethink_prompt[-1]["content"]  # head and tail survive


async def test_a_model_that_never_answers_times_out() -> None:
    async def silent(messages: list[Message], call: CallInfo) -> str:
        await asyncio.sleep(30)
        return ""

    agent, _ = make_agent(ScriptedLLM(silent), EchoTool(), config=AgentConfig(model_timeout_s=0.2))

    result = await asyncio.wait_for(agent.task("hello?"), 5)

    assert result.state is AgentState.FAILED
    assert result.error == "the model did not answer the plan call within 0.2 s"


async def test_unreadable_reflection_continues_with_the_plan() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "echo", {"text": "x", "times": 1})]),
            "rethink": ["hmm", "still hmm"],
            "answer": "x",
        }
    )
    agent, sink = make_agent(llm, EchoTool())

    result = await agent.task("echo")

    assert result.state is AgentState.COMPLETED
    assert result.answer == "x"
    reflection = of_type(sink.events, EventType.REFLECTION)[0]
    assert reflection.meta["unreadable"] is True


async def test_a_task_is_refused_while_another_runs() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "sleep", {"seconds": 0.3})]),
            "rethink": "<status>done</status><final>ok</final>",
        }
    )
    agent, _ = make_agent(llm, SleepTool())
    first = asyncio.create_task(agent.task("one"))
    await asyncio.sleep(0.05)
    with pytest.raises(RuntimeError, match="already running"):
        await agent.task("two")
    assert (await first).state is AgentState.COMPLETED


async def test_plans_without_arguments_for_small_models() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "echo")]),
            "arguments": '{"text": "a", "times": 1}',
            "rethink": "<status>done</status><final>a</final>",
        }
    )
    config = AgentConfig(plan_shape=PlanShape(with_arguments=False, max_text_chars=50))
    agent, _ = make_agent(llm, EchoTool(), config=config)

    result = await agent.task("echo a")

    assert result.state is AgentState.COMPLETED
    plan_schema = llm.calls[0][1].schema
    assert plan_schema is not None
    step_schema = plan_schema["properties"]["tasks"]["items"]["properties"]["steps"]["items"]
    assert "arguments" not in step_schema["properties"]
    assert step_schema["properties"]["step_goal"]["maxLength"] == 50
    assert result.steps[0].thought is True
