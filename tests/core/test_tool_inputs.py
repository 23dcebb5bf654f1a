"""What a step hands a tool: code written where a remote tool's value belongs goes to the
arguments call instead, (small profile) a remote call whose values come from nowhere fails its
step, and code that copies its tool's example data fails its step."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import default_tools, make_agent, of_type, plan_reply

from agent_py import AgentConfig, AgentState, EventType, ScriptedLLM, ToolBase
from agent_py.core.checks.example_values import example_data_copied
from agent_py.core.checks.grounded_arguments import arguments_from_nowhere
from agent_py.core.checks.milliseconds import days_in_milliseconds
from agent_py.core.checks.worked_example_copied import example_copied, example_task_copied
from agent_py.core.llm import CallInfo, Message
from agent_py.core.profiles import FULL, SMALL
from agent_py.core.step_action import looks_like_code
from agent_py.core.tool import ToolContext, ToolResult
from agent_py.tools.code import code_input_schema
from agent_py.tools.javascript import JavascriptExecutor

SMALL_CONFIG = AgentConfig(
    plan_shape=SMALL.plan_shape, strategy=SMALL.strategy, budgets=SMALL.budgets
)


class Capital(ToolBase):
    name = "atlas__capital"
    description = "The capital city of a country in the atlas."
    input_schema = {
        "type": "object",
        "properties": {"country": {"type": "string"}},
        "required": ["country"],
    }
    remote = True

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.calls.append(arguments)
        return ToolResult({"Freedonia": "Fredville"}.get(arguments["country"], "no such country"))


class Add(ToolBase):
    name = "atlas__add"
    description = "Add two numbers."
    input_schema = {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    }
    remote = True

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.calls.append(arguments)
        return ToolResult(str(float(arguments["a"] + arguments["b"])))


def inline(step_id: str, tool: str, text: str, goal: str = "") -> dict[str, Any]:
    goal = goal or f"do {step_id}"
    return {"step_id": step_id, "step_goal": goal, "tool_name": tool, "input": text}


@pytest.mark.parametrize(
    "text",
    [
        "return atlas__capital('Freedonia');",
        "return 'zubrowka'.toUpperCase();",
        "const name = 'Freedonia'",
        "capital('Freedonia');",
        "function f() { return 1 }",
    ],
)
def test_statements_of_code_are_recognised(text: str) -> None:
    assert looks_like_code(text)


@pytest.mark.parametrize(
    "text", ["Freedonia", "New South Wales", "Return the book (the red one)", "a; b"]
)
def test_plain_values_are_not_code(text: str) -> None:
    assert not looks_like_code(text)


async def test_code_given_as_a_value_goes_to_the_arguments_call_instead() -> None:
    seen: list[str] = []

    def arguments(messages: list[Message], call: CallInfo) -> str:
        seen.append(messages[-1]["content"])
        return '{"country": "Freedonia"}'

    plan = plan_reply([inline("s1", "atlas__capital", "return atlas__capital('Freedonia');")])
    llm = ScriptedLLM.replaying({"plan": plan, "arguments": arguments})
    capital = Capital()
    agent, sink = make_agent(llm, capital, config=SMALL_CONFIG)

    result = await agent.task("What's the capital of Freedonia?")

    assert result.state is AgentState.COMPLETED
    assert result.answer == "Fredville"
    assert capital.calls == [{"country": "Freedonia"}]  # never the code itself
    thinking = of_type(sink.events, EventType.STEP_THINKING)[0].content
    assert thinking == "the plan gave code as the country of atlas__capital, which takes a value"
    assert "The plan gave code as the input: return atlas__capital('Freedonia');" in seen[0]
    assert "atlas__capital takes the values themselves, not code." in seen[0]


async def test_a_plain_value_is_used_as_it_is() -> None:
    llm = ScriptedLLM.replaying({"plan": plan_reply([inline("s1", "atlas__capital", "Freedonia")])})
    agent, _ = make_agent(llm, Capital(), config=SMALL_CONFIG)

    result = await agent.task("What's the capital of Freedonia?")

    assert result.answer == "Fredville"
    assert result.stats.model_calls == {"plan": 1}


def test_values_from_the_task_or_a_result_are_grounded() -> None:
    task = "Book me a table for two at 8 tonight."
    assert arguments_from_nowhere({"a": 1, "b": 1}, [task]) == ["1", "1"]
    assert arguments_from_nowhere({"a": 0, "b": 0}, ["Delete Zubrowka."]) == ["0", "0"]
    assert arguments_from_nowhere({"a": 2, "b": 1}, [task]) == ["2", "1"]  # digits only
    assert arguments_from_nowhere({"a": 8.0, "b": 5}, [task]) == []
    assert arguments_from_nowhere({"a": 3, "b": 3600}, ["How many seconds in 3 hours?"]) == []
    assert arguments_from_nowhere({"a": 42, "b": 8}, ["Add 8 to that.", "result: 42"]) == []
    assert arguments_from_nowhere({"country": "freedonia"}, ["Capital of Freedonia?"]) == []
    assert arguments_from_nowhere({"country": "Genovia"}, ["Capital of Freedonia?"]) == [
        "'Genovia'"
    ]
    assert arguments_from_nowhere({"n": "12"}, ["Twelve eggs"]) == ["12"]  # words: any language
    assert arguments_from_nowhere({}, ["anything"]) == []  # nothing to check
    assert arguments_from_nowhere({"flag": True}, ["anything"]) == []


async def test_a_remote_call_with_invented_values_fails_and_is_planned_again() -> None:
    plans = iter(
        [
            plan_reply([inline("s1", "atlas__add", "return 1;", goal="Select a table")]),
            plan_reply([inline("s2", "decline", "no tool here books tables")]),
        ]
    )
    llm = ScriptedLLM.replaying(
        {"plan": lambda messages, call: next(plans), "arguments": '{"a": 1, "b": 1}'}
    )
    add = Add()
    agent, sink = make_agent(llm, add, config=SMALL_CONFIG)

    result = await agent.task("Book me a table for two at an Italian restaurant tonight at 8.")

    assert result.state is AgentState.FAILED
    assert add.calls == []  # the invented call never reached the server
    failed = of_type(sink.events, EventType.STEP_FAILED)[0].content
    assert failed == (
        "atlas__add was not called: its values (1, 1) come from neither the task nor an "
        "earlier result, so atlas__add does not fit 'Select a table'; use a tool that does, "
        "or decline the task"
    )
    assert result.error and "no tool here books tables" in result.error


async def test_grounded_values_reach_the_tool_and_only_the_switch_checks() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([inline("s1", "atlas__add", "19 and 24")]),
            "arguments": '{"a": 19, "b": 24}',
        }
    )
    agent, _ = make_agent(llm, Add(), config=SMALL_CONFIG)
    result = await agent.task("Add 19 and 24 with the atlas.")
    assert result.state is AgentState.COMPLETED
    assert result.answer == "43.0"

    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([inline("s1", "atlas__add", "two numbers")]),
            "arguments": '{"a": 1, "b": 1}',
        }
    )
    off = SMALL_CONFIG.model_copy(
        update={"strategy": SMALL.strategy.model_copy(update={"grounded_arguments": False})}
    )
    add = Add()
    agent, _ = make_agent(llm, add, config=off)
    result = await agent.task("Book me a table.")
    assert add.calls == [{"a": 1, "b": 1}]  # without the switch the call runs


async def test_the_full_profile_refuses_a_remote_call_with_invented_values() -> None:
    """Seen (Qwen2.5-Coder-1.5B, full profile): asked to use a delete tool the server lacks,
    the plan called add(30.603752, -121.388927), and the run completed with the sum."""
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [
                    {
                        "step_id": "s1",
                        "step_goal": "delete",
                        "tool_name": "atlas__add",
                        "arguments": {"a": 30.603752, "b": -121.388927},
                    }
                ]
            ),
            "rethink": "<status>failed</status><final>no tool deletes a country</final>",
        }
    )
    add = Add()
    agent, _ = make_agent(llm, add, config=AgentConfig(strategy=FULL.strategy))

    result = await agent.task("Use the delete tool of the atlas server to remove Zubrowka.")

    assert add.calls == []
    assert result.state is AgentState.FAILED
    assert result.steps[0].output.startswith(
        "atlas__add was not called: its values (30.603752, -121.388927) come from neither"
    )


async def two_turns(
    questions: tuple[str, str], inputs: tuple[str, str], arguments: tuple[str, str]
) -> tuple[Any, Add]:
    """A session of two turns, each one add step (with ``inputs`` and the ``arguments`` the
    model gives): the second turn's result and the tool."""
    plans = iter([plan_reply([inline("s1", "atlas__add", text)]) for text in inputs])
    answers = iter(arguments)
    llm = ScriptedLLM.replaying(
        {
            "plan": lambda messages, call: next(plans),
            "arguments": lambda messages, call: next(answers),
        }
    )
    add = Add()
    agent, _ = make_agent(llm, add, config=SMALL_CONFIG)
    await agent.task(questions[0])
    return await agent.task(questions[1]), add


async def test_a_follow_up_may_take_its_values_from_an_earlier_turn() -> None:
    result, add = await two_turns(
        ("Add 19 and 24 with the atlas.", "Now add a hundred to that."),
        ("19 and 24", "that result and 7"),
        ('{"a": 19, "b": 24}', '{"a": 43, "b": 100}'),
    )

    assert result.state is AgentState.COMPLETED
    assert result.answer == "143.0"  # 43 comes from the earlier turn's answer
    assert add.calls[-1] == {"a": 43, "b": 100}


async def test_a_follow_up_may_take_its_values_from_an_earlier_question() -> None:
    """Seen (Qwen2.5-Coder-1.5B): "What's 25 times 4?", then "And half of that?" planned as
    multiply(25, 4) again, then the half; the check refused 25 and 4, which the conversation
    holds."""
    result, add = await two_turns(
        ("What's 25 plus 4?", "And the first number added to itself?"),
        ("25 and 4", "the first number twice"),
        ('{"a": 25, "b": 4}', '{"a": 25, "b": 25}'),
    )

    assert result.state is AgentState.COMPLETED, result.error
    assert add.calls[-1] == {"a": 25, "b": 25}  # 25: the earlier question's


class Code(ToolBase):
    """A code tool whose description shows an example, as javascript_execute's does."""

    name = "code"
    description = "Runs code. Dates: new Date('2024-01-31'), toLocaleDateString('en-US')."
    input_schema = code_input_schema("the code")
    code_language = "JavaScript"

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.calls.append(arguments["code"])
        return ToolResult("Wednesday")


async def test_code_that_copies_the_example_of_the_tools_description_fails_its_step() -> None:
    copied = "return new Date('2024-01-31').toLocaleDateString('en-US');"
    llm = ScriptedLLM.replaying({"plan": plan_reply([inline("s1", "code", copied)])})
    code = Code()
    agent, sink = make_agent(llm, code, config=SMALL_CONFIG)

    result = await agent.task("What colour is my neighbour's car?")

    assert result.state is AgentState.FAILED
    assert code.calls == []
    assert of_type(sink.events, EventType.STEP_FAILED)[0].content == (
        "code was not run: the code uses '2024-01-31' from the example in the tool's "
        "description, not a value of the task; write code for the task's own values, or "
        "decline the task when no tool can do it"
    )


async def test_code_may_use_the_examples_api_and_a_value_the_task_gives() -> None:
    own = "return new Date('2024-01-31').toLocaleDateString('en-US');"
    llm = ScriptedLLM.replaying({"plan": plan_reply([inline("s1", "code", own)])})
    code = Code()
    agent, _ = make_agent(llm, code, config=SMALL_CONFIG)
    result = await agent.task("What day of the week was 2024-01-31?")
    assert result.state is AgentState.COMPLETED and code.calls == [own]


def test_example_data_is_a_quoted_value_with_a_digit_from_the_description() -> None:
    described = JavascriptExecutor.description
    weekday = "return new Date('2024-01-31').toLocaleDateString('en-US', {weekday: 'long'});"
    assert example_data_copied(weekday, described, ["Weather in Oslo?"]) == ["2024-01-31"]
    assert example_data_copied(weekday, described, ["Which day was 2024-01-31?"]) == []
    # Values without a digit teach the API; values not in the description are the model's.
    assert example_data_copied("return 'en-US' + 'UTC';", described, ["x"]) == []
    assert example_data_copied("return new Date('2025-03-03');", described, ["x"]) == []


async def test_days_given_in_milliseconds_fail_the_step_and_the_plan_is_made_again() -> None:
    """A Date minus a Date is milliseconds: 5184000000 is no answer to "how many days"."""
    plans = iter(
        [
            "console.log(new Date('2024-03-01') - new Date('2024-01-01'));",
            "return (new Date('2024-03-01') - new Date('2024-01-01')) / 86400000;",
        ]
    )
    llm = ScriptedLLM.replaying(
        {
            "plan": lambda messages, call: plan_reply(
                [inline("s1", "javascript_execute", next(plans))]
            )
        }
    )
    agent, sink = make_agent(llm, *default_tools(), config=SMALL_CONFIG)

    result = await agent.task("How many days are there from 2024-01-01 to 2024-03-01?")

    assert (result.state, result.answer) == (AgentState.COMPLETED, "60")
    assert of_type(sink.events, EventType.STEP_FAILED)[0].content == (
        "the result 5.184e+09 is milliseconds (one Date minus another is in milliseconds), "
        "that is 60 days: divide by 86400000 for days, or by 3600000 for hours"
    )


@pytest.mark.parametrize(
    ("code", "value", "question", "days"),
    [
        ("return new Date('2024-03-01') - new Date('2024-01-01');", 5_184_000_000, "Days?", 60),
        ("return d2.getTime() - d1.getTime(); // Date", -3_715_200_000, "Days between?", -43),
        ("console.log(new Date(b) - new Date(a));", "3715200000", "Days between?", 43),
        # Not about Dates, or not a whole number of hours: a value. (The question's words
        # are not read: a task that asks for milliseconds gets a corrected plan.)
        ("console.log(new Date(b) - new Date(a));", "about 3715200000", "Days?", None),
        ("return 60 * 86400000;", 5_184_000_000, "Days in ms?", None),
        ("return 2 * 86400000;", 172_800_000, "Two days?", None),
        ("return Date.now() - start;", 1_234_567_890, "How long?", None),
        ("return new Date('2024-01-02') - new Date('2024-01-01');", True, "Later?", None),
    ],
)
def test_a_time_in_milliseconds_is_a_whole_number_of_hours_from_dates(
    code: str, value: object, question: str, days: float | None
) -> None:
    assert days_in_milliseconds(code, value) == days


ODD_NUMBERS = "Use JavaScript to list the odd numbers below 8, then add them up with JavaScript."


async def test_a_task_copied_from_a_worked_example_fails_for_another_task() -> None:
    """Seen: a corrected plan for the weather in Oslo took the example's task whole as its
    second task, and the run completed with the example's sum, 16. (Asked here with a question
    that no check declines before the plan runs.)"""
    copied = {
        "task_id": "t2",
        "task_goal": ODD_NUMBERS.rstrip("."),
        "steps": [
            inline("s2", "javascript_execute", "return [1, 3, 5, 7].reduce((a, b) => a + b);")
        ],
    }
    plans = iter(
        [
            plan_reply([inline("s1", "javascript_execute", "return car.colour;")]),
            "<plan>" + json.dumps({"tasks": [copied]}) + "</plan>",
        ]
    )
    llm = ScriptedLLM.replaying(
        {
            "plan": lambda messages, call: next(plans),
            "arguments": "```javascript\nreturn car.colour;\n```",  # the code written again
        }
    )
    agent, sink = make_agent(llm, *default_tools(), config=SMALL_CONFIG)

    result = await agent.task("What colour is my neighbour's car?")

    assert result.state is AgentState.FAILED
    # The code call's code, and its repair, still ran under the copied task.
    assert of_type(sink.events, EventType.STEP_FAILED)[-1].content == (
        "javascript_execute was not run: its task is copied from the worked example for "
        f"'{ODD_NUMBERS}', not written for this task; write it for the task, or decline the "
        "task when no tool can do it (the model wrote the same code again when shown the error)"
    )
    assert example_task_copied(ODD_NUMBERS, "What's the weather?") == ODD_NUMBERS


async def test_a_step_input_copied_from_a_worked_example_fails_for_another_task() -> None:
    """The small profile's plans follow worked examples: a step whose input is an example's,
    word for word, did that example's task, not this one."""
    poem = "Write a two-line poem about rain."
    plans = iter(
        [
            plan_reply([inline("s1", "llm_generator", poem)]),
            plan_reply([inline("s2", "decline", "the sandbox has no network")]),
        ]
    )
    llm = ScriptedLLM.replaying(
        {"plan": lambda messages, call: next(plans), "generate": "Rain taps the glass."}
    )
    agent, sink = make_agent(llm, *default_tools(), config=SMALL_CONFIG)

    result = await agent.task("What is the title of the page at https://example.com?")

    assert result.state is AgentState.FAILED and "no network" in (result.error or "")
    assert of_type(sink.events, EventType.STEP_FAILED)[0].content == (
        "llm_generator was not run: its input is copied from the worked example for "
        f"'{poem}', not written for this task; write it for the task, or decline the task "
        "when no tool can do it"
    )
    # The example's own task may use it, and so may any profile without examples.
    assert example_task_copied("Use JavaScript to list the odd numbers below 8", "Hi.") is None
    assert example_task_copied(ODD_NUMBERS.upper().rstrip("."), ODD_NUMBERS) is None
    assert example_copied(poem.upper(), poem) is None
    assert example_copied(poem, "Say hello.") == poem
    assert example_copied("no tool here can switch lights", "Say hello.") is None
    agent, _ = make_agent(
        ScriptedLLM.replaying(
            {
                "plan": plan_reply([inline("s1", "llm_generator", poem)]),
                "generate": "Rain.",
                "rethink": "<status>done</status><final>Rain.</final>",
            }
        ),
        *default_tools(),
    )
    assert (await agent.task("Say hello.")).state is AgentState.COMPLETED


def two_task_plan(code: str) -> str:
    """Find the capital of Freedonia, then run ``code`` in a later task."""
    return (
        "<plan>"
        + json.dumps(
            {
                "tasks": [
                    {
                        "task_id": "t1",
                        "task_goal": "find it",
                        "steps": [inline("s1", "atlas__capital", "Freedonia")],
                    },
                    {
                        "task_id": "t2",
                        "task_goal": "count",
                        "steps": [inline("s2", "javascript_execute", code)],
                    },
                ]
            }
        )
        + "</plan>"
    )


QUESTION = "Find the capital of Freedonia, then use JavaScript to write it in upper case."


async def test_an_answer_that_leaves_out_what_an_earlier_step_found_is_written_again() -> None:
    """Seen: the capital found (s1), then the letters of the country's name counted (s2): 8
    was reported, and the capital never reached the answer (here: the country's name in
    upper case). The last step fails saying so,
    and its code is written again in a call that shows the earlier results."""
    llm = ScriptedLLM.replaying(
        {
            "plan": two_task_plan("return 'Freedonia'.toUpperCase();"),
            "arguments": "```javascript\nreturn 'Fredville'.toUpperCase();\n```",
        }
    )
    agent, sink = make_agent(llm, Capital(), *default_tools(), config=SMALL_CONFIG)

    result = await agent.task(QUESTION)

    assert result.state is AgentState.COMPLETED and result.answer == "FREDVILLE"
    assert of_type(sink.events, EventType.STEP_FAILED)[0].content == (
        "its result FREEDONIA leaves out what the earlier steps found (s1 found Fredville): no "
        "step after them used it; use it as ${s1} where the task needs it"
    )
    code_call = next(m for m, call in llm.calls if call.purpose == "arguments")
    assert "Fredville" in code_call[-1]["content"]


@pytest.mark.parametrize(
    "code",
    ["return '${s1}'.toUpperCase();", "return 'FREDVILLE';", "return 'fredville'.toUpperCase();"],
)
async def test_an_answer_that_uses_the_earlier_result_is_the_answer(code: str) -> None:
    llm = ScriptedLLM.replaying({"plan": two_task_plan(code)})
    agent, sink = make_agent(llm, Capital(), *default_tools(), config=SMALL_CONFIG)

    result = await agent.task(QUESTION)

    assert result.state is AgentState.COMPLETED
    assert not of_type(sink.events, EventType.STEP_FAILED)


async def test_without_the_chain_check_the_last_result_is_the_answer() -> None:
    strategy = SMALL.strategy.model_copy(update={"chain_check": False})
    config = AgentConfig(plan_shape=SMALL.plan_shape, strategy=strategy, budgets=SMALL.budgets)
    llm = ScriptedLLM.replaying({"plan": two_task_plan("return 'Freedonia'.toUpperCase();")})
    agent, _ = make_agent(llm, Capital(), *default_tools(), config=config)

    result = await agent.task(QUESTION)

    assert result.state is AgentState.COMPLETED and result.answer == "FREEDONIA"


async def test_an_earlier_step_that_found_nothing_left_out_is_still_a_broken_chain() -> None:
    """Seen: s1's dedupe kept nothing ([]), s2 sorted the list again with its duplicates, and
    [1, 1, 2, 3] would have been the answer."""
    steps = [
        ("s1", "return [3, 1, 3, 2, 1].filter((n) => n !== n);"),
        ("s2", "return [3, 1, 3, 2, 1].sort((a, b) => a - b);"),
    ]
    plan = plan_reply(
        *[
            [{"step_id": i, "step_goal": "g", "tool_name": "javascript_execute", "input": c}]
            for i, c in steps
        ]
    )
    llm = ScriptedLLM.replaying(
        {"plan": plan, "arguments": "```javascript\nreturn [1, 1, 2, 3];\n```"}
    )
    agent, sink = make_agent(llm, config=SMALL_CONFIG)

    result = await agent.task("Remove the duplicates from 3, 1, 3, 2, 1 and sort the rest.")

    assert result.state is AgentState.FAILED
    failed = of_type(sink.events, EventType.STEP_FAILED)
    assert failed and "leaves out what the earlier steps found (s1 found [])" in failed[0].content
