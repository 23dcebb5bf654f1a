"""The core's edge cases: context fitting, typed tool results, hooks, ids, references,
residency and cancellation. Each test is named after the behaviour a user relies on."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from typing import Any

import pytest

from agent_py import (
    AgentConfig,
    AgentState,
    CallInfo,
    Event,
    EventType,
    Hooks,
    Message,
    ResidencyPolicy,
    ScriptedLLM,
    ToolBase,
    ToolContext,
    ToolResult,
)
from agent_py.core.budget import MESSAGE_OVERHEAD_TOKENS, estimate_tokens
from agent_py.core.llm import CallPurpose
from agent_py.core.model_client import ReplyBudgets
from tests.support import CONTINUE, EchoTool, SleepTool, make_agent, of_type, plan_reply, step

# The closing words of each purpose's instruction: a prompt that lost them is useless.
INSTRUCTION_ENDS = {
    CallPurpose.PLAN: "Task: ",
    CallPurpose.RETHINK: "<status>failed</status> followed by <final>why</final>",
    CallPurpose.ANSWER: "Use the\nresults only.",
    CallPurpose.ARGUMENTS: "Reply with the JSON arguments object only.",
}


CUT_MARK = "characters cut; to fit the context window"


class BigTool(ToolBase):
    """Returns about ``size`` characters of distinct text, like a verbose JavaScript result."""

    name = "big"
    description = "Returns a long report for a topic."
    input_schema = {
        "type": "object",
        "properties": {"topic": {"type": "string"}},
        "required": ["topic"],
    }

    def __init__(self, size: int = 3_000) -> None:
        self.size = size

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        line = f"{arguments['topic']}: measurement {{}} is fine.\n"
        text = "".join(line.format(i) for i in range(self.size // len(line) + 1))
        return ToolResult(text[: self.size])


def fits(llm: ScriptedLLM, config: AgentConfig) -> None:
    for messages, call in llm.calls:
        budget = config.context_window - config.budgets.for_purpose(call.purpose)
        used = sum(estimate_tokens(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)
        assert used <= budget, (call.purpose, used, budget)


async def test_every_model_call_keeps_its_instruction_over_a_long_run_with_big_results() -> None:
    first = plan_reply(
        [step("s1", "big", {"topic": "alpha"})],
        [step("s2", "big", {"topic": "beta"})],
        [step("s3", "big", {"topic": "gamma"})],
        [step("s4", "big", {"topic": "delta"})],
    )
    revised = "<status>changed</status>" + plan_reply(
        [step("s5", "big", {"topic": "epsilon"})],
        [step("s6", "big", {"topic": "zeta"}), step("s7", "big", {"topic": "eta"})],
    )
    llm = ScriptedLLM.replaying(
        {"plan": first, "rethink": [CONTINUE, revised, CONTINUE], "answer": "all fine"}
    )
    config = AgentConfig()  # the default 4096-token window
    agent, _ = make_agent(llm, BigTool(), config=config)

    result = await agent.task("Collect the reports for every topic")

    assert result.state is AgentState.COMPLETED, result.error
    assert len(llm.calls) == 1 + 4 + 1  # plan, four rethinks, answer
    fits(llm, config)
    for messages, call in llm.calls:
        assert INSTRUCTION_ENDS[call.purpose] in messages[-1]["content"], call.purpose
        # The newest instruction is never the part that gives way: older turns do.
        assert CUT_MARK not in messages[-1]["content"], call.purpose
    last_rethink = [m for m, c in llm.calls if c.purpose is CallPurpose.RETHINK][-1]
    assert "zeta: measurement" in last_rethink[-1]["content"]  # the newest results, in full
    # Older results gave way first: they are down to one line per step.
    assert not any("alpha: measurement" in m["content"] for m in last_rethink)
    assert "[s1] big (ok); result kept as ${s1}" in "".join(m["content"] for m in last_rethink)


async def test_a_huge_question_is_cut_head_and_tail_and_its_instruction_stays() -> None:
    question = "Summarise this report. " + "word " * 11_000 + "THE END"
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "big", {"topic": "report"})]),
            "rethink": CONTINUE,
            "answer": "a summary",
        }
    )
    config = AgentConfig()
    agent, _ = make_agent(llm, BigTool(), config=config)

    result = await agent.task(question)

    assert result.state is AgentState.COMPLETED, result.error
    fits(llm, config)
    for messages, call in llm.calls:
        last = messages[-1]["content"]
        assert INSTRUCTION_ENDS[call.purpose] in last, call.purpose
        assert len(last) > 1_000, call.purpose  # cut, never replaced by a marker
    plan_prompt = llm.calls[0][0][-1]["content"]
    assert plan_prompt.startswith("Task: Summarise this report.")
    assert plan_prompt.endswith("THE END") and CUT_MARK in plan_prompt


async def test_a_prompt_that_cannot_fit_fails_the_run_with_a_clear_message() -> None:
    llm = ScriptedLLM.replaying({"plan": plan_reply([step("s1", "sleep", {"seconds": 0})])})
    budgets = ReplyBudgets(plan=400, arguments=400, generate=400, rethink=400, answer=400)
    config = AgentConfig(context_window=512, budgets=budgets)
    agent, _ = make_agent(llm, SleepTool(), config=config)

    result = await agent.task("sleep a little")

    assert result.state is AgentState.FAILED
    assert result.error is not None
    assert "does not fit the model's context window" in result.error
    assert "internal error" not in result.error
    assert llm.calls == []


def mcp_like_tool(index: int) -> ToolBase:
    """A tool with a schema as large as a typical MCP server's (about 240 tokens)."""

    class Remote(ToolBase):
        name = f"svc{index}__operation_{index}"
        description = f"Runs operation number {index} of service {index}. " + "Details. " * 8
        input_schema = {
            "type": "object",
            "properties": {
                f"field_{n}": {"type": "string", "description": f"value {n} of the operation"}
                for n in range(12)
            },
            "required": ["field_0"],
        }

        async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
            return ToolResult(f"operation {index} done with {arguments['field_0']}")

    return Remote()


async def test_forty_mcp_like_tools_still_plan_and_run() -> None:
    tools = [mcp_like_tool(i) for i in range(40)]
    assert sum(estimate_tokens(json.dumps(t.input_schema)) for t in tools) > 8_000
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "svc7__operation_7", {"field_0": "x"})]),
            "rethink": "<status>done</status><final>operation 7 ran</final>",
        }
    )
    config = AgentConfig()
    agent, _ = make_agent(llm, *tools, config=config)

    result = await agent.task("Use svc7__operation_7 with x")

    assert result.state is AgentState.COMPLETED, result.error
    assert result.steps[0].output == "operation 7 done with x"
    fits(llm, config)
    system = llm.calls[0][0][0]["content"]
    assert all(tool.name in system for tool in tools)  # every tool is still offered
    assert '"field_11"' in system.split("svc7__operation_7", 1)[1].split("\n- ", 1)[0]


async def test_one_hundred_twenty_one_step_tasks_reach_their_end_or_max_steps() -> None:
    tasks = [[step(f"s{i}", "big", {"topic": f"topic {i}"})] for i in range(1, 121)]
    script = {"plan": plan_reply(*tasks), "rethink": CONTINUE, "answer": "all 120 done"}

    llm = ScriptedLLM.replaying(script)
    config = AgentConfig(max_steps=200)
    agent, _ = make_agent(llm, BigTool(600), config=config)
    result = await agent.task("Collect 120 reports")
    assert result.state is AgentState.COMPLETED, result.error
    assert len(result.steps) == 120
    fits(llm, config)

    limited = ScriptedLLM.replaying(script)
    agent, _ = make_agent(limited, BigTool(600), config=AgentConfig(max_steps=100))
    result = await agent.task("Collect 120 reports")
    assert result.state is AgentState.FAILED
    assert result.error is not None and result.error.startswith("stopped at max_steps=100")
    assert len(result.steps) == 100


async def test_a_long_replan_chain_reaches_max_replans() -> None:
    counter = itertools.count(1)

    def replan(messages: list[Message], call: CallInfo) -> str:
        n = next(counter)
        return "<status>changed</status>" + plan_reply([step("s1", "big", {"topic": f"t{n}"})])

    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([step("s1", "big", {"topic": "t0"})]), "rethink": replan}
    )
    agent, _ = make_agent(llm, BigTool(2_000), config=AgentConfig(max_replans=60))

    result = await agent.task("Keep changing the plan")

    assert result.state is AgentState.FAILED
    assert result.error == "stopped after 60 re-plans"
    assert len(result.steps) == 61
    assert len({s.step_id for s in result.steps}) == 61  # every reused s1 was renamed


class OddTool(ToolBase):
    """Returns whatever it was built with, as a buggy tool would."""

    input_schema = {"type": "object", "properties": {}}
    description = "Returns something."

    def __init__(self, name: str, value: object) -> None:
        self.name = name
        self.value = value

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return self.value  # type: ignore[return-value]


async def test_a_tool_that_returns_no_tool_result_fails_its_step_only() -> None:
    odd = [
        OddTool("text", "plain text"),
        OddTool("nothing", None),
        OddTool("mapping", {"a": 1}),
        OddTool("number", ToolResult(123)),  # type: ignore[arg-type]
    ]
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [step("s1", "sleep", {"seconds": 0.05})]
                + [step(f"s{i}", tool.name, {}) for i, tool in enumerate(odd, start=2)]
            ),
            "rethink": "<status>done</status><final>the sleep worked</final>",
        }
    )
    agent, sink = make_agent(llm, SleepTool(), *odd)

    result = await agent.task("try the odd tools")

    assert result.state is AgentState.COMPLETED, result.error
    by_id = {s.step_id: s for s in result.steps}
    assert by_id["s1"].ok and by_id["s1"].output == "slept 0.05"
    for step_id, kind in [("s2", "str"), ("s3", "NoneType"), ("s4", "dict")]:
        assert not by_id[step_id].ok
        assert f"returned {kind}, not a ToolResult" in by_id[step_id].output
    assert "ToolResult with int content" in by_id["s5"].output
    types = [e.type for e in sink.events]
    assert types.index(EventType.FINAL) == len(types) - 2  # only turn_end follows final


async def test_a_literal_think_inside_an_answer_is_kept() -> None:
    answer = "Qwen3 writes its reasoning in a <think> block before the answer."
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "sleep", {"seconds": 0})]),
            "rethink": CONTINUE,
            "answer": answer,
        }
    )
    agent, _ = make_agent(llm, SleepTool())

    result = await agent.task("How does Qwen3 show its reasoning?")

    assert result.state is AgentState.COMPLETED
    assert result.answer == answer


@pytest.mark.parametrize("reply", ["", "   ", "<think>still thinking when the budget ran out"])
async def test_an_empty_or_only_thinking_answer_fails_the_run(reply: str) -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "sleep", {"seconds": 0})]),
            "rethink": CONTINUE,
            "answer": reply,
        }
    )
    agent, _ = make_agent(llm, SleepTool())

    result = await agent.task("sleep, then say so")

    assert result.state is AgentState.FAILED
    assert result.error is not None and "empty" in result.error


class Recording(SleepTool):
    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.log.append("tool ran")
        return await super().run(arguments, ctx)


async def test_async_hooks_are_awaited_in_place_and_bounded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log: list[str] = []

    async def on_action(event: Event) -> None:
        await asyncio.sleep(0.05)
        log.append("hook done")

    async def on_observation(event: Event) -> None:
        raise RuntimeError("the hook broke")

    async def on_final(event: Event) -> None:
        await asyncio.Event().wait()  # never returns

    hooks = Hooks(
        on_action=on_action, on_observation=on_observation, on_final=on_final, timeout_s=0.5
    )
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "sleep", {"seconds": 0})]),
            "rethink": "<status>done</status><final>slept</final>",
        }
    )
    agent, _ = make_agent(llm, Recording(log), hooks=hooks)

    with caplog.at_level(logging.ERROR, logger="agent_py"):
        result = await asyncio.wait_for(agent.task("sleep"), 30)  # hang guard only

    assert result.state is AgentState.COMPLETED
    assert log == ["hook done", "tool ran"]
    assert "async hook failed" in caplog.text and "the hook broke" in caplog.text
    assert "ran past 0.5 s" in caplog.text


async def test_step_ids_reused_by_a_new_plan_are_renamed() -> None:
    revised = "<status>changed</status>" + plan_reply(
        [
            step("s1", "echo", {"text": "new", "times": 1}),
            step("s2", "echo", {"text": "${s1} again", "times": 1}),
        ],
        [step("s3", "echo", {"text": "${s1}!", "times": 1})],
    )
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "echo", {"text": "old", "times": 1})]),
            "rethink": [revised, CONTINUE, "<status>done</status><final>done</final>"],
        }
    )
    echo = EchoTool()
    agent, sink = make_agent(llm, echo)

    result = await agent.task("echo things")

    assert result.state is AgentState.COMPLETED, result.error
    assert [s.step_id for s in result.steps] == ["s1", "s4", "s2", "s3"]
    outputs = {s.step_id: s.output for s in result.steps}
    assert outputs["s2"] == "old again"  # same task as the new s1: the earlier s1 is meant
    assert outputs["s3"] == "new!"  # a later task: the renamed new step is meant
    renamed = of_type(sink.events, EventType.PLAN_RENAMED)
    assert [e.meta["renamed"] for e in renamed] == [{"s1": "s4"}]
    reflection = next(e for e in of_type(sink.events, EventType.REFLECTION) if e.meta["plan"])
    assert reflection.meta["plan"]["tasks"][0]["steps"][0]["step_id"] == "s4"


async def test_a_step_that_uses_its_own_tasks_result_runs_after_it() -> None:
    """A task's steps run together; a plan that fetches and works on it in one task (seen
    from the 0.5B model, twice in a row) gets the use run in a turn of its own after it."""
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [
                    step("s1", "echo", {"text": "page", "times": 1}),
                    step("s2", "echo", {"text": "${s1} read", "times": 1}),
                    step("s3", "echo", {"text": "aside", "times": 1}),
                ]
            ),
            "rethink": CONTINUE,
            "answer": "page read",
        }
    )
    agent, sink = make_agent(llm, EchoTool())

    result = await agent.task("echo things")

    assert result.state is AgentState.COMPLETED, result.error
    assert {s.step_id: s.output for s in result.steps}["s2"] == "page read"
    assert {s.step_id: s.task_id for s in result.steps} == {"s1": "t1", "s3": "t1", "s2": "t1_2"}
    assert [e.meta["ordered"] for e in of_type(sink.events, EventType.PLAN_ORDERED)] == [
        {"s2": "t1_2"}
    ]


async def test_steps_that_use_each_other_fail_saying_what_they_refer_to() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [
                    step("s1", "echo", {"text": "${s2}", "times": 1}),
                    step("s2", "echo", {"text": "${s1}", "times": 1}),
                ]
            ),
            "rethink": "<status>failed</status><final>they wait on each other</final>",
        }
    )
    agent, sink = make_agent(llm, EchoTool())

    result = await agent.task("echo things")

    assert result.state is AgentState.FAILED
    assert "which has no result yet" in " ".join(s.output for s in result.steps)
    assert not of_type(sink.events, EventType.PLAN_ORDERED)


async def test_consecutive_tasks_may_repeat_a_call() -> None:
    poll = {"text": "status?", "times": 1}
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "echo", poll)], [step("s2", "echo", poll)]),
            "rethink": CONTINUE,
            "answer": "polled twice",
        }
    )
    echo = EchoTool()
    agent, _ = make_agent(llm, echo)

    result = await agent.task("poll twice")

    assert result.state is AgentState.COMPLETED
    assert echo.calls == [poll, poll]
    assert all(s.ok for s in result.steps)


class Barrier(ToolBase):
    """Finishes only once ``parties`` runs have started: it proves runs overlap."""

    name = "meet"
    description = "Waits for the others."
    input_schema = {
        "type": "object",
        "properties": {"who": {"type": "string"}},
        "required": ["who"],
    }

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived = 0
        self.everyone = asyncio.Event()

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.arrived += 1
        if self.arrived == self.parties:
            self.everyone.set()
        await self.everyone.wait()
        return ToolResult(f"{arguments['who']} met the others")


async def test_per_step_holds_the_model_for_model_calls_only() -> None:
    llm = ScriptedLLM.replaying(
        {
            # No arguments in the plan: each step needs an arguments call.
            "plan": plan_reply([step("s1", "meet"), step("s2", "meet")]),
            "arguments": '{"who": "a step"}',
            "rethink": "<status>done</status><final>they met</final>",
        }
    )
    config = AgentConfig(residency=ResidencyPolicy.PER_STEP, tool_timeout_s=60)
    agent, _ = make_agent(llm, Barrier(2), config=config)

    result = await asyncio.wait_for(agent.task("meet"), 60)  # hang guard only

    assert [s.ok for s in result.steps] == [True, True], [s.output for s in result.steps]
    assert result.stats.model_calls["arguments"] == 2


async def test_a_step_that_refers_to_a_failed_step_is_skipped() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [step("s1", "echo", {"text": "fail", "times": 1})],
                [step("s2", "echo", {"text": "got ${s1}", "times": 1})],
            ),
            "rethink": CONTINUE,
        }
    )
    echo = EchoTool()
    agent, _ = make_agent(llm, echo)

    result = await agent.task("echo a failure")

    # s2 never ran, in the plan or in the corrected plan (the same plan, replayed).
    assert echo.calls == [{"text": "fail", "times": 1}] * 2
    assert result.steps[1].ok is False
    assert result.steps[1].output == "skipped: depends on s1, which failed"
    assert result.state is AgentState.FAILED


async def test_continue_with_no_step_left_after_a_failure_asks_for_a_corrected_plan() -> None:
    """A rethink that says "continue" when a step failed and none is left would end the run
    with the task undone: one corrected plan is asked for, showing the error."""
    llm = ScriptedLLM.replaying(
        {
            "plan": [
                plan_reply([step("s1", "echo", {"text": "fail", "times": 1})]),
                plan_reply([step("s2", "echo", {"text": "fixed", "times": 1})]),
            ],
            "rethink": [CONTINUE, "<status>done</status><final>fixed</final>"],
        }
    )
    echo = EchoTool()
    agent, _ = make_agent(llm, echo)

    result = await agent.task("echo something")

    assert [call["text"] for call in echo.calls] == ["fail", "fixed"]
    plans = [messages for messages, call in llm.calls if call.purpose is CallPurpose.PLAN]
    retry = plans[1][-1]["content"]
    assert "asked to fail" in retry, retry
    assert result.state is AgentState.COMPLETED, result.error
    assert result.answer == "fixed"
    assert result.stats.replans == 1


DONE_FIXED = "<status>done</status><final>fixed</final>"


@pytest.mark.parametrize(
    ("texts", "rethinks", "why", "outcome"),
    [
        # "failed" right after a failed step: a 1.5B model gave up with the fix in hand.
        (
            ("fail", "fixed"),
            ["<status>failed</status><final>call it with the right text</final>", DONE_FIXED],
            "a step failed and the rethink gave up before any other plan: planned again",
            "fixed",
        ),
        # "done" after a failed step: the weekday step had failed (a variable of another
        # step), and a 1.5B model answered "Monday" for a Saturday.
        (
            ("fail", "fixed"),
            ["<status>done</status><final>Monday</final>", DONE_FIXED],
            "a step failed and the rethink answered before any other plan: planned again",
            "fixed",
        ),
        # "failed" after every step ran: a 1.5B model read 42 printed beside "result: null"
        # as "6 times 7 equals 0". Its reason is shown; a second "failed" ends the run.
        (
            ("first", "second"),
            ["<status>failed</status><final>the result is empty</final>"],
            "the rethink gave up after every step ran, before any other plan: planned again",
            None,
        ),
    ],
)
async def test_a_rethinks_first_word_that_ends_the_task_gets_one_corrected_plan(
    texts: tuple[str, str], rethinks: list[str], why: str, outcome: str | None
) -> None:
    first, second = texts
    llm = ScriptedLLM.replaying(
        {
            "plan": [
                plan_reply([step("s1", "echo", {"text": first, "times": 1})]),
                plan_reply([step("s2", "echo", {"text": second, "times": 1})]),
            ],
            "rethink": rethinks,
        }
    )
    echo = EchoTool()
    agent, sink = make_agent(llm, echo)

    result = await agent.task("echo something")

    assert [call["text"] for call in echo.calls] == [first, second]
    plans = [messages for messages, call in llm.calls if call.purpose is CallPurpose.PLAN]
    shown = "asked to fail" if first == "fail" else "every step ran, but: the result is empty"
    assert shown in plans[1][-1]["content"]
    reflections = [e.content for e in of_type(sink.events, EventType.REFLECTION)]
    assert reflections[1] == why
    assert result.stats.replans == 1
    if outcome is None:
        assert result.state is AgentState.FAILED
        assert result.error == "the task cannot be done: the result is empty"
    else:
        assert result.state is AgentState.COMPLETED, result.error
        assert result.answer == outcome


async def test_a_rethink_that_copies_its_reply_format_as_the_answer_gets_an_answer_call() -> None:
    """Seen (Qwen2.5-Coder-1.5B): "<status>done</status> followed by <final>the answer for the
    user: the result itself, not code</final>", the rethink prompt's own words. The task is
    done; the answer call writes the answer, where the run used to end failed."""
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "echo", {"text": "Lutz", "times": 1})]),
            "rethink": "<status>done</status> followed by <final>the answer for the user: "
            "the result itself, not code</final>",
            "answer": "The capital is Lutz.",
        }
    )
    agent, sink = make_agent(llm, EchoTool())

    result = await agent.task("What is the capital of Zubrowka?")

    assert result.state is AgentState.COMPLETED, result.error
    assert result.answer == "The capital is Lutz."
    reflections = [e.content for e in of_type(sink.events, EventType.REFLECTION)]
    assert reflections[-1].startswith("the rethink's answer only repeats its reply format")
    # A rethink's own answer stands as it is.
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "echo", {"text": "Lutz", "times": 1})]),
            "rethink": "<status>done</status><final>Lutz</final>",
        }
    )
    agent, _ = make_agent(llm, EchoTool())
    assert (await agent.task("What is the capital of Zubrowka?")).answer == "Lutz"


async def test_a_rethink_that_gives_up_after_a_corrected_plan_ends_the_run() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "echo", {"text": "fail", "times": 1})]),
            "rethink": "<status>failed</status><final>it keeps failing</final>",
        }
    )
    echo = EchoTool()
    agent, _ = make_agent(llm, echo)

    result = await agent.task("echo something")

    # One corrected plan (the same step, not run again as a repeated call), then the end.
    assert echo.calls == [{"text": "fail", "times": 1}]
    assert [call.purpose for _, call in llm.calls].count(CallPurpose.PLAN) == 2
    assert result.state is AgentState.FAILED
    assert result.error == "the task cannot be done: it keeps failing"
    assert result.stats.replans == 1


async def test_an_engine_bug_during_a_rethink_fails_the_run_with_the_reason() -> None:
    def rethink(messages: list[Message], call: CallInfo) -> str:
        raise TypeError("bad tensor shape")

    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([step("s1", "sleep", {"seconds": 0})]), "rethink": rethink}
    )
    agent, _ = make_agent(llm, SleepTool())

    result = await agent.task("sleep")

    assert result.state is AgentState.FAILED
    assert result.error == (
        "the model engine failed in the rethink call: TypeError: bad tensor shape"
    )


class Stubborn(ToolBase):
    """Ignores cancellation for a while, then ends: a tool that will not stop."""

    name = "stubborn"
    description = "Takes its time."
    input_schema = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.finished = asyncio.Event()

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        for _ in range(30):
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.1)
        self.finished.set()
        return ToolResult("finally done")


async def test_a_tool_that_ignores_cancellation_is_abandoned_at_its_limit() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "stubborn", {})]),
            "rethink": "<status>failed</status><final>the tool hung</final>",
        }
    )
    tool = Stubborn()
    agent, _ = make_agent(llm, tool, config=AgentConfig(tool_timeout_s=0.3))

    result = await agent.task("wait")

    assert not tool.finished.is_set()  # the step ended while the tool still ran
    assert result.steps[0].ok is False
    assert result.steps[0].output == "stubborn timed out after 0.3 s"
    await asyncio.wait_for(tool.finished.wait(), 30)  # let it end before the loop closes


class DenseTokenizerLLM(ScriptedLLM):
    """Reports twice the estimated prompt tokens, like a tokenizer on digit-heavy text."""

    async def chat(self, messages: list[Message], call: CallInfo, on_token: Any = None) -> Any:
        reply = await super().chat(messages, call, on_token)
        real = 2 * sum(estimate_tokens(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)
        return reply.model_copy(
            update={"usage": reply.usage.model_copy(update={"prompt_tokens": real})}
        )


async def test_token_counts_follow_the_engines_tokenizer_when_it_counts_more() -> None:
    script = ScriptedLLM.replaying(
        {
            "plan": plan_reply(*[[step(f"s{i}", "big", {"topic": f"t{i}"})] for i in range(1, 5)]),
            "rethink": CONTINUE,
            "answer": "done",
        }
    )
    llm = DenseTokenizerLLM(script._script)
    config = AgentConfig()
    agent, _ = make_agent(llm, BigTool(4_000), config=config)

    result = await agent.task("Collect four reports")

    assert result.state is AgentState.COMPLETED, result.error
    assert agent.llm.tokens_per_estimate >= 2
    for messages, call in llm.calls[1:]:  # after the first reply showed the real count
        budget = config.context_window - config.budgets.for_purpose(call.purpose)
        real = 2 * sum(estimate_tokens(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)
        assert real <= budget, (call.purpose, real, budget)
