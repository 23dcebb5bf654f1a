"""The small-model profile's switches, each with the scripted engine: inline step input,
worked examples, merged duplicate steps, no rethink after success, the answer from a single
step, and the profile chosen in Python per engine and model."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from support import EchoTool, calls_for, default_tools, make_agent, of_type, plan_reply, step

from agent_py import (
    AgentConfig,
    AgentState,
    EventType,
    JavascriptExecutor,
    PlanShape,
    ScriptedLLM,
    ToolResult,
)
from agent_py.cli.run_report import describe
from agent_py.core.checks import Seen
from agent_py.core.checks.caught_failure import run as caught_failure
from agent_py.core.grammar import fenced_code_grammar
from agent_py.core.llm import CallInfo, ChatReply, Message, Sampling
from agent_py.core.plan import (
    PlanSchema,
    cut_runaway_inputs,
    give_copied_text_whole,
    merge_duplicate_steps,
    plan_json_schema,
)
from agent_py.core.plan_prompts import (
    matching_tools,
    nearest_example_turns,
    plan_example_turns,
    plan_system_prompt,
)
from agent_py.core.profiles import FULL, SMALL, TINY, Strategy, profile_for
from agent_py.core.registry import ToolRegistry
from agent_py.page.settings import PageSettings
from agent_py.tools.node_runner import NodeRunner
from agent_py.tools.python import PythonExecutor
from agent_py.tools.python_runner import SubprocessPyRunner

# The small strategy without its code call after failed code, for tests of the corrected plan.
REPLAN = TINY.strategy.model_copy(update={"code_call_after_failure": False})
TINY_CONFIG = AgentConfig(plan_shape=TINY.plan_shape, strategy=TINY.strategy, budgets=TINY.budgets)


def input_step(step_id: str, tool: str, text: str) -> dict[str, Any]:
    return {"step_id": step_id, "step_goal": f"do {step_id}", "tool_name": tool, "input": text}


async def test_inline_input_runs_a_one_step_task_with_one_model_call() -> None:
    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([input_step("s1", "javascript_execute", "return 6 * 7;")])}
    )
    agent, sink = make_agent(llm, config=TINY_CONFIG)

    result = await agent.task("Use JavaScript to compute 6 times 7.")

    assert result.state is AgentState.COMPLETED
    assert result.answer == "42"  # the step's value, not a model's retelling
    assert result.stats.model_calls == {"plan": 1}
    assert of_type(sink.events, EventType.REFLECTION)[0].meta["skipped"] is True


async def test_inline_input_of_a_tool_with_several_values_becomes_the_arguments_hint() -> None:
    seen: list[str] = []

    def arguments(messages: list[Message], call: CallInfo) -> str:
        seen.append(messages[-1]["content"])
        return '{"text": "ab", "times": 2}'

    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([input_step("s1", "echo", "ab, twice")]), "arguments": arguments}
    )
    agent, _ = make_agent(llm, EchoTool(), config=TINY_CONFIG)

    result = await agent.task("echo ab twice")

    assert result.answer == "abab"
    assert "The plan says the input is: ab, twice" in seen[0]
    assert result.stats.model_calls == {"plan": 1, "arguments": 1}


async def test_with_rethink_after_failure_a_failed_step_gets_a_rethink() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([input_step("s1", "javascript_execute", "throw new Error('no')")]),
            "rethink": "<status>failed</status><final>the code cannot work</final>",
        }
    )
    strategy = TINY.strategy.model_copy(
        update={"rethink_after_failure": True, "replan_after_failure": False}
    )
    agent, _ = make_agent(llm, config=TINY_CONFIG.model_copy(update={"strategy": strategy}))

    result = await agent.task("break")

    assert result.state is AgentState.FAILED
    assert result.error == "the task cannot be done: the code cannot work"
    # The first "failed" came before any other plan: one corrected plan (the same plan,
    # replayed) failed too, and its rethink's "failed" ended the run.
    assert calls_for(llm, "rethink") == 2
    assert calls_for(llm, "plan") == 2


async def test_without_the_switches_every_task_gets_a_rethink_and_the_answer_a_call() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([input_step("s1", "javascript_execute", "return 6 * 7;")]),
            "rethink": "<status>continue</status>",
            "answer": "It is 42.",
        }
    )
    config = AgentConfig(plan_shape=TINY.plan_shape, strategy=Strategy())
    agent, _ = make_agent(llm, config=config)

    result = await agent.task("six times seven")

    assert result.answer == "It is 42."
    assert result.stats.model_calls == {"plan": 1, "rethink": 1, "answer": 1}


async def test_answer_from_a_single_step_needs_that_step_to_be_the_whole_last_task() -> None:
    two_steps = plan_reply(
        [
            input_step("s1", "javascript_execute", "return 2 - 1;"),
            input_step("s2", "javascript_execute", "return 1 + 1;"),
        ]
    )
    llm = ScriptedLLM.replaying({"plan": two_steps, "answer": "1 and 2"})
    agent, _ = make_agent(llm, config=TINY_CONFIG)

    result = await agent.task("one and two")

    assert result.answer == "1 and 2"
    assert result.stats.model_calls == {"plan": 1, "answer": 1}


async def test_identical_steps_are_merged_and_references_follow() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [input_step("s1", "javascript_execute", "return 6 * 7;")],
                [input_step("s2", "javascript_execute", "return 6  *  7;")],
                [input_step("s3", "javascript_execute", "return ${s2} + 1;")],
            )
        }
    )
    agent, sink = make_agent(llm, config=TINY_CONFIG)

    result = await agent.task("six times seven, plus one")

    assert [s.step_id for s in result.steps] == ["s1", "s3"]
    assert result.answer == "43"
    merged = of_type(sink.events, EventType.PLAN_MERGED)
    assert merged[0].meta["merged"] == {"s2": "s1"}
    planned = of_type(sink.events, EventType.PLAN_STARTED)[0].meta["plan"]
    assert [t["task_id"] for t in planned["tasks"]] == ["t1", "t3"]


def test_merging_keeps_steps_that_differ_and_is_off_in_the_full_profile() -> None:
    plan = PlanSchema.model_validate(
        json.loads(
            plan_reply(
                [step("s1", "echo", {"text": "a", "times": 1})],
                [step("s2", "echo", {"text": "a", "times": 2}), step("s3", "echo")],
                [step("s4", "echo", goal="other")],
                wrap=False,
            )
        )
    )
    merged_plan, merged = merge_duplicate_steps(plan)
    assert merged == {} and merged_plan == plan
    assert FULL.strategy.merge_duplicate_steps is False
    assert TINY.strategy.merge_duplicate_steps is True


async def generated(planned: str, question: str, text: str) -> tuple[Any, Any, list[str]]:
    """A small-profile run of one llm_generator step planned with ``planned`` as its input,
    the generator answering ``text``: the result, the events and the instructions it was
    given (without the user's request that follows them, for the language)."""
    prompts: list[str] = []

    def generate(messages: list[Message], call: CallInfo) -> str:
        prompts.append(messages[-1]["content"].split("\n\n(Write in the language")[0])
        return text

    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([input_step("s1", "llm_generator", planned)]), "generate": generate}
    )
    agent, sink = make_agent(llm, config=TINY_CONFIG)
    return await agent.task(question), sink, prompts


async def test_an_input_that_looped_to_its_bound_is_cut_before_the_loop() -> None:
    bound = TINY.plan_shape.max_input_chars
    looped = "Write a greeting for Ann" + ".js" * 60
    looped = looped[: bound - 2] + ".1"  # the bound ends it mid-loop, as the grammar does
    result, sink, prompts = await generated(looped, "Write a greeting for Ann.", "Dear Ann!")

    assert result.state is AgentState.COMPLETED
    assert prompts == ["Write a greeting for Ann"]
    [cut] = of_type(sink.events, EventType.PLAN_CUT)
    assert cut.meta["cut"] == {"s1": "Write a greeting for Ann"}


def test_only_a_loop_that_reached_the_bound_is_cut() -> None:
    shape = TINY.plan_shape
    bound = shape.max_input_chars

    def plan_of(text: str) -> PlanSchema:
        return PlanSchema.model_validate(
            json.loads(plan_reply([input_step("s1", "javascript_execute", text)], wrap=False))
        )

    ended = "return 'ab'.repeat(4) + 'abababab' + 1000000000;"  # repeats the model ended
    at_bound = ("return [" + ", ".join(str(n) for n in range(200)))[:bound]  # no loop
    under = "return 1" + " + 1" * 20  # a loop, but it stopped itself before the bound
    for text in (ended, at_bound, under):
        plan = plan_of(text)
        assert cut_runaway_inputs(plan, shape) == (plan, {}), text
    code_loop = ("return 'hello' + ' ' + ' ' + ' '" + " + ' '" * 40)[:bound]
    _, cut = cut_runaway_inputs(plan_of(code_loop), shape)
    # The loop starts where the text starts repeating itself: at the quote that ends 'hello.
    assert cut == {"s1": "return 'hello"}


PASTED = (
    "The city council voted on Tuesday to turn the old railway yard into a public park.\n"
    "The plan keeps the two brick engine sheds, which will house a cafe and a bicycle "
    "workshop, and adds a playground, a pond for rainwater and four kilometres of paths.\n\n"
    "Work starts in March. The cost, 12 million euros, is shared by the city and a fund."
)


async def test_a_text_copied_from_the_request_up_to_the_bound_is_given_whole() -> None:
    """A small plan's input is bounded (160 characters): "summarise this: <a page>" came to
    the generator as the page's first 160 characters, copied into the plan. The step gets
    the request whole, pasted line breaks included, and says so."""
    bound = TINY.plan_shape.max_input_chars
    question = f"Summarise this text in one sentence:\n\n{PASTED}"
    copied = " ".join(PASTED.split())[: bound - 4] + "bike"  # the bound fell in "bicycle"
    result, sink, prompts = await generated(copied, question, "The yard becomes a park.")

    assert result.state is AgentState.COMPLETED
    assert result.answer == "The yard becomes a park."
    assert prompts == [question]  # the request's own words say what to do with the text
    [given] = of_type(sink.events, EventType.PLAN_TEXT_WHOLE)
    assert given.meta["given"] == {"s1": question}
    assert "160-character bound" in given.content
    assert describe(given) == f"· {given.content}"  # the terminal says so before the steps


def test_a_copy_keeps_the_steps_own_words_and_only_a_cut_copy_is_completed() -> None:
    shape = TINY.plan_shape
    bound = shape.max_input_chars
    question = f"Translate into French and keep it short: {PASTED} Thanks!"
    flat = " ".join(PASTED.split())

    def given(text: str, tool: str = "llm_generator") -> dict[str, str]:
        plan = PlanSchema.model_validate(
            json.loads(plan_reply([input_step("s1", tool, text)], wrap=False))
        )
        return give_copied_text_whole(plan, shape, question, lambda name: name == "js")[1]

    own = "In French: "
    with_own_words = own + flat[: bound - len(own)]
    assert given(with_own_words) == {"s1": own + PASTED + " Thanks!"}
    # Left as written: under the bound (the model ended it), a copy shorter than 40
    # characters, a copy that reached the request's end, a tool that takes code.
    assert given(own + flat[:100]) == {}
    assert given(("x" * 130 + flat)[:bound]) == {}
    end = f"{PASTED} Thanks!"
    assert given(" ".join(end.split())[-bound:]) == {}
    assert given(with_own_words, tool="js") == {}
    assert FULL.plan_shape.step_input is False  # the full profile's arguments are whole


async def test_a_generation_that_starts_over_until_its_budget_keeps_the_first_pass() -> None:
    looping = "Dear Ann,\n\nHappy birthday!\n\nDear Ann,\n\nHappy birth"
    refrain = "Row, row.\n\nGently.\n\nRow, row."
    for reply, answer in (
        (ChatReply(text=looping, finish_reason="length"), "Dear Ann,\n\nHappy birthday!"),
        (ChatReply(text=refrain, finish_reason="stop"), refrain),  # ended by the model
    ):
        llm = ScriptedLLM.replaying(
            {
                "plan": plan_reply([input_step("s1", "llm_generator", "Greet Ann.")]),
                "generate": reply,
            }
        )
        agent, sink = make_agent(llm, config=TINY_CONFIG)

        result = await agent.task("Greet Ann.")

        assert result.state is AgentState.COMPLETED
        assert result.answer == answer
        progress = of_type(sink.events, EventType.STEP_PROGRESS)
        assert len(progress) == (1 if reply.finish_reason == "length" else 0)


async def test_the_writer_is_told_the_users_request_for_its_language() -> None:
    """Seen (the 0.5B model): asked in Chinese for a sentence about spring, the plan told the
    writer "Write a short sentence about spring.", and the answer came in English."""
    seen: list[str] = []

    def generate(messages: list[Message], call: CallInfo) -> str:
        seen.append(messages[-1]["content"])
        return "春天来了，花开了。"

    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [input_step("s1", "llm_generator", "Write a short sentence about spring.")]
            ),
            "generate": generate,
        }
    )
    agent, _ = make_agent(llm, config=TINY_CONFIG)

    result = await agent.task("写一句关于春天的短句。")

    assert result.answer == "春天来了，花开了。"
    assert seen[0].startswith("Write a short sentence about spring.")
    assert "in the language of the user's request" in seen[0]
    assert seen[0].rstrip().endswith('"写一句关于春天的短句。")')


async def test_a_generation_of_one_phrase_over_and_over_fails_its_step() -> None:
    """Translate 'good morning' into French: SmolLM2 wrote "Good morningGood morning…" until
    its budget, and the run completed with that as its answer."""
    result, sink, _ = await generated("Good morning", "Greet in French.", "Good morning" * 12)

    assert result.state is AgentState.FAILED
    failed = of_type(sink.events, EventType.STEP_FAILED)
    assert failed[0].content.endswith(
        "the model wrote one phrase over and over instead of the text"
    ), failed[0].content


async def test_worked_examples_come_before_the_task_as_earlier_turns() -> None:
    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([input_step("s1", "javascript_execute", "return 2 - 1;")])}
    )
    agent, _ = make_agent(llm, config=TINY_CONFIG)

    await agent.task("one")

    messages, _ = llm.calls[0]
    assert [m["role"] for m in messages[:3]] == ["system", "user", "assistant"]
    assert messages[-1] == {"role": "user", "content": "Task: one"}
    example_plan = messages[2]["content"]
    assert example_plan.startswith("<plan>") and '"input"' in example_plan
    assert '"tool_intent"' not in example_plan  # the small shape has no step notes
    assert "like the examples" in messages[0]["content"]


async def test_the_closest_worked_example_comes_again_just_before_the_task() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([input_step("s1", "llm_generator", "Write a haiku about snow.")]),
            "generate": "Snow on the pines.",
        }
    )
    agent, _ = make_agent(llm, config=TINY_CONFIG)

    await agent.prepare()
    await agent.task("Write a haiku about snow.")

    [prefilled] = llm.prefills
    messages, _ = llm.calls[0]
    fixed = prefilled[:-1]  # the system prompt and every example, as prefilled
    assert messages[: len(fixed)] == fixed
    again = messages[len(fixed) : -1]
    # "write" is the only word the task shares with an example: the poem's.
    assert [m["role"] for m in again] == ["user", "assistant"]
    assert again[0]["content"] == "Task: Write a two-line poem about rain."
    assert again == fixed[3:5]  # the same turns as the poem example's among the fixed ones
    assert messages[-1]["content"] == "Task: Write a haiku about snow."


def test_a_task_that_shares_no_word_with_an_example_gets_none_again() -> None:
    tools = ToolRegistry(default_tools())
    assert nearest_example_turns(tools, TINY.plan_shape, "Tell me a joke.") == []
    # Words of three letters or less do not count; a plural matches its singular.
    closest = nearest_example_turns(tools, TINY.plan_shape, "Sum up these numbers")
    assert closest[0]["content"] == "Task: Use JavaScript to list the odd numbers below 8, " + (
        "then add them up with JavaScript."
    )
    assert FULL.strategy.nearest_example is False and TINY.strategy.nearest_example is True


def test_examples_name_only_tools_that_exist() -> None:
    only_echo = ToolRegistry([EchoTool()])
    assert plan_example_turns(only_echo, TINY.plan_shape) == []
    prompt = plan_system_prompt(only_echo, TINY.plan_shape, with_examples=True)
    assert "like the examples" not in prompt  # no example fits: the format is spelled out
    assert "the values of text (string), times (integer), in words" in prompt


@pytest.mark.parametrize("shape", [TINY.plan_shape, PlanShape()], ids=["tiny", "full"])
async def test_every_worked_example_runs_through_the_real_tools(shape: PlanShape) -> None:
    """The examples teach by being copied: each one's plan, replayed, completes with every
    step run (none refused by the code tools' own checks, none failing in Node)."""
    turns = plan_example_turns(ToolRegistry(default_tools()), shape)
    assert len(turns) >= 8
    for task_turn, plan_turn in zip(turns[::2], turns[1::2], strict=True):
        llm = ScriptedLLM.replaying({"plan": plan_turn["content"], "generate": "Some text."})
        agent, sink = make_agent(llm, config=TINY_CONFIG.model_copy(update={"plan_shape": shape}))

        result = await agent.task(task_turn["content"].removeprefix("Task: "))

        assert result.state is AgentState.COMPLETED, (plan_turn["content"], result.error)
        assert all(step.ok for step in result.steps), plan_turn["content"]
        assert not of_type(sink.events, "step_failed")


def test_examples_follow_the_plan_shape() -> None:
    tools = ToolRegistry(default_tools())
    full_turns = plan_example_turns(tools, PlanShape())
    plan = json.loads(full_turns[1]["content"].removeprefix("<plan>").removesuffix("</plan>"))
    first = plan["tasks"][0]["steps"][0]
    assert first["arguments"] == {"code": "return (4 + 8 + 12) / 3;"}
    assert {"tool_intent", "expected_output"} <= set(first)
    PlanSchema.model_validate(plan)


def test_the_small_plan_schema_asks_for_input_and_no_notes() -> None:
    schema = plan_json_schema(["a"], TINY.plan_shape)
    step_schema = schema["properties"]["tasks"]["items"]["properties"]["steps"]["items"]
    assert list(step_schema["properties"]) == ["step_id", "step_goal", "tool_name", "input"]
    assert step_schema["required"] == ["step_id", "step_goal", "tool_name", "input"]
    assert step_schema["properties"]["input"]["maxLength"] == 160


def test_the_profile_is_chosen_in_python_per_engine_and_model() -> None:
    # By the model's class: its size by its name.
    assert profile_for("cpu", "gemma3-270m-q4_k_m") is TINY
    assert profile_for("cpu", "smollm2-135m-instruct-q4_1") is TINY
    assert profile_for("cpu", "qwen2.5-coder-0.5b-instruct-q4_1") is SMALL
    assert profile_for("webllm", "Qwen3-4B-q4f16_1-MLC") is FULL
    # A name without a size: the CPU engine runs small models, others the full profile.
    assert profile_for("cpu", "models/mine.gguf") is SMALL
    assert profile_for("openai", "gpt-4o-mini") is FULL
    assert profile_for("webllm", "x", "small") is SMALL
    assert profile_for("webllm", "x", "tiny") is TINY
    with pytest.raises(ValueError, match="unknown profile"):
        profile_for("cpu", "x", "huge")

    config = PageSettings(engine_kind="cpu", cpu_model="gemma3-270m-q4_k_m").agent_config()
    assert config.plan_shape == TINY.plan_shape and config.strategy == TINY.strategy
    assert config.budgets == TINY.budgets

    overridden = PageSettings(
        engine_kind="cpu",
        strategy=Strategy(examples=False),
        sampling=Sampling(repeat_penalty=1.2),
    ).agent_config()
    assert overridden.strategy.examples is False
    assert overridden.sampling == Sampling(repeat_penalty=1.2)


async def test_sampling_of_the_profile_reaches_every_call() -> None:
    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([input_step("s1", "javascript_execute", "return 2 - 1;")])}
    )
    sampling = Sampling(temperature=0.0, dry_multiplier=0.8)
    config = TINY_CONFIG.model_copy(update={"sampling": sampling})
    agent, _ = make_agent(llm, config=config)

    await agent.task("one")

    assert [call.sampling for _, call in llm.calls] == [sampling]


async def test_without_rethink_after_failure_a_failed_run_costs_no_reflection() -> None:
    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([input_step("s1", "javascript_execute", "throw new Error('no')")])}
    )
    strategy = REPLAN.model_copy(
        update={"rethink_after_failure": False, "replan_after_failure": False}
    )
    agent, sink = make_agent(llm, config=TINY_CONFIG.model_copy(update={"strategy": strategy}))

    result = await agent.task("break")

    assert result.state is AgentState.FAILED
    assert result.error is not None and result.error.startswith("every step failed: s1")
    assert result.stats.model_calls == {"plan": 1}
    reflection = of_type(sink.events, EventType.REFLECTION)[0]
    assert reflection.content == "a step failed: going on without a rethink"


async def test_a_slow_generation_is_bounded_by_the_model_limit_not_the_tool_limit() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([input_step("s1", "llm_generator", "Write a word.")]),
            "generate": "word",
        },
        reply_delay_s=0.5,
    )
    config = TINY_CONFIG.model_copy(update={"tool_timeout_s": 0.2})
    agent, _ = make_agent(llm, config=config)

    result = await agent.task("a word")

    assert result.state is AgentState.COMPLETED and result.answer == "word"


async def test_a_failed_step_gets_one_corrected_plan_under_the_plan_grammar() -> None:
    seen: list[str] = []

    def plan(messages: list[Message], call: CallInfo) -> str:
        seen.append(messages[-1]["content"])
        code = "return 2 ** 1;" if len(seen) == 1 else "return 2 ** 10;"
        return plan_reply([input_step("s1", "javascript_execute", code)])

    llm = ScriptedLLM(plan)
    strategy = REPLAN.model_copy(update={"replan_after_failure": True})
    agent, _ = make_agent(llm, config=TINY_CONFIG.model_copy(update={"strategy": strategy}))

    result = await agent.task("two to the tenth")

    assert result.state is AgentState.COMPLETED  # "return 2 ** 1;" succeeded: no retry
    assert len(seen) == 1

    seen.clear()
    failing = ["return ", "return 2 ** 10;"]

    def plan_twice(messages: list[Message], call: CallInfo) -> str:
        seen.append(messages[-1]["content"])
        return plan_reply([input_step("s1", "javascript_execute", failing[len(seen) - 1])])

    llm = ScriptedLLM(plan_twice)
    agent, _ = make_agent(llm, config=TINY_CONFIG.model_copy(update={"strategy": strategy}))

    result = await agent.task("two to the tenth")

    assert result.state is AgentState.COMPLETED and result.answer == "1024"
    assert seen[1].startswith("That did not work:\ns1 (javascript_execute): ")
    assert "returned nothing" in seen[1]
    assert result.stats.model_calls == {"plan": 2} and result.stats.replans == 1
    assert [s.ok for s in result.steps] == [False, True]


async def test_the_corrected_plan_is_asked_for_once() -> None:
    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([input_step("s1", "javascript_execute", "throw new Error('x')")])}
    )
    strategy = REPLAN.model_copy(
        update={"replan_after_failure": True, "rethink_after_failure": False}
    )
    agent, _ = make_agent(llm, config=TINY_CONFIG.model_copy(update={"strategy": strategy}))

    result = await agent.task("fail twice")

    assert result.state is AgentState.FAILED
    assert result.error is not None and result.error.startswith("every step failed")
    assert result.stats.model_calls == {"plan": 2}


async def test_the_corrected_plan_is_sampled_at_the_retry_temperature() -> None:
    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([input_step("s1", "javascript_execute", "throw new Error('x')")])}
    )
    config = TINY_CONFIG.model_copy(
        update={
            "strategy": REPLAN.model_copy(update={"retry_temperature": 0.8}),
            "sampling": Sampling(temperature=0.0, top_k=40),
        }
    )
    agent, _ = make_agent(llm, config=config)

    await agent.task("fail")

    assert [call.sampling for _, call in llm.calls] == [
        Sampling(temperature=0.0, top_k=40),
        Sampling(temperature=0.8, top_k=40),
    ]


async def test_free_text_calls_get_their_own_sampling_and_schema_calls_do_not() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([input_step("s1", "llm_generator", "Write a word.")]),
            "generate": "word",
        }
    )
    text = Sampling(temperature=0.0, dry_multiplier=0.8)
    config = TINY_CONFIG.model_copy(
        update={"sampling": Sampling(temperature=0.0), "text_sampling": text}
    )
    agent, _ = make_agent(llm, config=config)

    await agent.task("a word")

    sampled = {call.purpose.value: call.sampling for _, call in llm.calls}
    assert sampled == {"plan": Sampling(temperature=0.0), "generate": text}


@pytest.mark.parametrize("spaced", [False, True])
async def test_the_plan_grammar_has_the_separators_its_engine_asks_for(spaced: bool) -> None:
    llm = ScriptedLLM.replaying({"plan": plan_reply([step("s1", "echo", {"text": "hi"})])})
    llm.json_grammar_spaced = spaced  # the CPU engine's bridge says True
    agent, _ = make_agent(llm, config=TINY_CONFIG)

    await agent.task("Say hi.")

    call = llm.calls[0][1]
    assert call.schema is not None and call.grammar is not None
    assert ('", \\"tasks\\": "' in call.grammar) is spaced
    assert ('",\\"tasks\\":"' in call.grammar) is not spaced


async def test_fenced_code_comes_from_a_plain_text_call_and_runs() -> None:
    seen: list[list[Message]] = []

    def arguments(messages: list[Message], call: CallInfo) -> str:
        seen.append(messages)
        return "Here it is:\n```javascript\nconsole.log(Math.pow(2, 10));\n```\nIt prints 1024."

    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([input_step("s1", "javascript_execute", "return 2;")]),
            "arguments": arguments,
        }
    )
    strategy = REPLAN.model_copy(update={"fenced_code": True})
    agent, _ = make_agent(llm, config=TINY_CONFIG.model_copy(update={"strategy": strategy}))

    result = await agent.task("Use JavaScript to compute 2 to the power of 10.")

    assert result.answer == "1024"  # printed, not returned: what it printed is the value
    assert result.steps[0].arguments == {"code": "console.log(Math.pow(2, 10));"}
    assert result.stats.model_calls == {"plan": 1, "arguments": 1}
    call = llm.calls[1][1]
    assert call.schema is None  # plain text, no JSON around code
    assert call.grammar == fenced_code_grammar("javascript")  # one block, ended at its fence
    assert "```javascript" in seen[0][0]["content"]
    assert seen[0][1]["content"].startswith("Use JavaScript to compute 2 to the power of 10.")


async def test_failed_code_from_the_plan_is_written_again_in_a_code_call_before_a_replan() -> None:
    codes: list[str] = []

    def arguments(messages: list[Message], call: CallInfo) -> str:
        codes.append(messages[-1]["content"])
        return "```javascript\nreturn Math.max(17, 56, 8, 23);\n```"

    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([input_step("s1", "javascript_execute", "return max(17, 56);")]),
            "arguments": arguments,
        }
    )
    agent, sink = make_agent(llm, config=TINY_CONFIG)

    result = await agent.task("Use JavaScript to find the largest of 17, 56, 8 and 23.")

    assert result.state is AgentState.COMPLETED and result.answer == "56"
    assert result.stats.model_calls == {"plan": 1, "arguments": 1}  # no corrected plan
    assert codes[0].startswith("Use JavaScript to find the largest")  # a fresh framing
    # that knows why the plan's code failed, not the code itself
    assert "An earlier attempt at this step failed: " in codes[0]
    assert "max is not defined" in codes[0] and "return max(17, 56)" not in codes[0]
    failed = of_type(sink.events, EventType.STEP_FAILED)
    assert [e.step for e in failed] == ["s1"] and "max is not defined" in failed[0].content
    note = of_type(sink.events, EventType.REFLECTION)[0]
    assert note.content.endswith("writing it again in a separate call: s1")
    assert [s.step_id for s in result.steps] == ["s1"]  # the second run replaced the first


async def test_when_the_code_call_fails_too_a_corrected_plan_follows() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": [
                plan_reply([input_step("s1", "javascript_execute", "return max(17, 56);")]),
                plan_reply([input_step("s2", "javascript_execute", "return Math.max(17, 56);")]),
            ],
            "arguments": "```javascript\nreturn maxOf(17, 56);\n```",
        }
    )
    agent, _ = make_agent(llm, config=TINY_CONFIG)

    result = await agent.task("Use JavaScript to find the larger of 17 and 56.")

    assert result.state is AgentState.COMPLETED and result.answer == "56"
    assert result.stats.model_calls == {"plan": 2, "arguments": 1}


async def test_the_full_profile_writes_the_plans_failed_code_again_in_a_code_call() -> None:
    """Seen (Qwen2.5-Coder-1.5B, full profile): the plan's code ``return $80 * 0.25`` failed,
    the rethink gave up, and a corrected plan split one program across steps. The full
    profile's plan gives code as arguments; a code call writes it afresh, without the failed
    code in its prompt, before any rethink."""
    seen: list[list[Message]] = []

    def code(messages: list[Message], call: CallInfo) -> str:
        seen.append(messages)
        return "```javascript\nreturn 80 - 80 * 0.25;\n```"

    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "javascript_execute", {"code": "return $80 * 0.75;"})]),
            "arguments": code,
            "rethink": "<status>continue</status>",
            "answer": "You pay $60.",
        }
    )
    agent, _ = make_agent(llm, config=AgentConfig(strategy=FULL.strategy))

    result = await agent.task("A jacket costs $80 and it's 25% off. How much do I pay?")

    assert result.state is AgentState.COMPLETED and result.answer == "You pay $60."
    assert [s.output for s in result.steps] == ["result: 60"]  # the redone step replaced it
    assert result.stats.model_calls == {"plan": 1, "arguments": 1, "rethink": 1, "answer": 1}
    assert "$80 * 0.75" not in json.dumps(seen)  # a fresh draw, not the failed code


REPAIRING = TINY_CONFIG.model_copy(
    update={"strategy": TINY.strategy.model_copy(update={"code_repair": True})}
)
# Only the repair turn: a step that still fails ends the run without a corrected plan.
REPAIRING_ONLY = REPAIRING.model_copy(
    update={"strategy": REPAIRING.strategy.model_copy(update={"replan_after_failure": False})}
)
UNCALLED = "```javascript\nfunction sortWords(words) { return words.sort(); }\n```"


async def test_with_code_repair_failed_code_of_a_code_call_gets_one_turn_with_the_error() -> None:
    called = (
        "```javascript\nfunction sortWords(words) { return words.sort(); }\n"
        "return sortWords(['pear', 'fig']);\n```"
    )
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([input_step("s1", "javascript_execute", "return sort(1);")]),
            "arguments": [UNCALLED, called],
        }
    )
    agent, sink = make_agent(llm, config=REPAIRING)

    result = await agent.task("Use JavaScript to sort the words pear and fig.")

    assert result.state is AgentState.COMPLETED, result.error
    assert json.loads(result.answer) == ["fig", "pear"]
    assert result.stats.model_calls == {"plan": 1, "arguments": 2}  # no corrected plan
    repair, options = llm.calls[-1]
    assert options.sampling is not None and options.sampling.temperature == 0.8  # another draw
    # The same conversation, one turn on: its own code, then the error it gave.
    assert repair[-2] == {"role": "assistant", "content": UNCALLED}
    assert repair[-1]["content"].startswith(
        "That code failed: javascript_execute failed: the code only defines sortWords(words) "
        "and never calls it"
    )
    assert repair[-1]["content"].endswith(
        "Reply with the whole corrected ```javascript code block."
    )
    thinking = [e.content for e in of_type(sink.events, EventType.STEP_THINKING)]
    assert thinking[-1].startswith("the code failed: writing it again with the error")


async def test_code_written_again_unchanged_when_shown_the_error_fails_its_step() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([input_step("s1", "javascript_execute", "return sort(1);")]),
            "arguments": UNCALLED,
            "rethink": "<status>failed</status><final>no luck</final>",
        }
    )
    agent, _ = make_agent(llm, config=REPAIRING_ONLY)

    result = await agent.task("Use JavaScript to sort the words pear and fig.")

    assert result.state is AgentState.FAILED
    assert result.steps[0].output.endswith(
        "(the model wrote the same code again when shown the error)"
    )
    assert result.stats.model_calls == {"plan": 1, "arguments": 2}


async def test_code_corrected_by_printing_its_failure_fails_its_step() -> None:
    """Seen (the 1.5B model, asked to read a file): the code failed, and its correction
    checked for the file and printed "File ... does not exist.", which was reported done."""
    reads = "```javascript\nreturn readFile('/notes.txt');\n```"
    reports = (
        "```javascript\ntry { return readFile('/notes.txt'); }\n"
        "catch (e) { return 'File /notes.txt does not exist.'; }\n```"
    )
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([input_step("s1", "javascript_execute", "return read(1);")]),
            "arguments": [reads, reports],
            "rethink": "<status>failed</status><final>no luck</final>",
        }
    )
    agent, _ = make_agent(llm, config=REPAIRING_ONLY)

    result = await agent.task("What does the file /notes.txt say?")

    assert result.state is AgentState.FAILED
    output = result.steps[0].output
    assert output.startswith("javascript_execute failed: ReferenceError: readFile is not defined")
    assert output.endswith(
        "(the corrected code only caught the failure and gave it back: "
        "'File /notes.txt does not exist.')"
    )


@pytest.mark.parametrize(
    ("code", "result", "caught"),
    [
        ("try { f(); } catch (e) { return 'Datei fehlt.'; }", ToolResult("Datei fehlt."), True),
        ("try { f(); } catch (e) { return e.message; }",
         ToolResult("ReferenceError: f is not defined 2"), True),  # an error class
        ("try { f(); } catch (e) { return 0; }", ToolResult("0", data=0), False),  # a number
        ("try { return f(); } catch (e) { return 'x'; }", ToolResult("42 Tage"), False),
        ("return 'Thursday';", ToolResult("Thursday"), False),  # nothing caught
    ],
)  # fmt: skip
def test_corrected_code_that_catches_its_failure_is_read_from_code_and_result(
    code: str, result: ToolResult, caught: bool
) -> None:
    seen = Seen(
        question="q",
        tool=JavascriptExecutor(NodeRunner()),
        arguments={"code": code},
        results=(result,),
        meta={"repaired": True, "error": "it failed"},
    )
    assert (caught_failure(seen) is not None) is caught
    assert caught_failure(replace(seen, meta={})) is None  # only after a repair


async def test_without_code_repair_a_failed_code_call_gets_no_second_turn() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([input_step("s1", "javascript_execute", "return sort(1);")]),
            "arguments": UNCALLED,
        }
    )
    config = TINY_CONFIG.model_copy(
        update={"strategy": TINY.strategy.model_copy(update={"replan_after_failure": False})}
    )
    agent, _ = make_agent(llm, config=config)

    result = await agent.task("Use JavaScript to sort the words pear and fig.")

    assert result.state is AgentState.FAILED
    assert result.stats.model_calls == {"plan": 1, "arguments": 1}
    assert SMALL.strategy.code_repair and not TINY.strategy.code_repair


def test_a_reply_without_a_fence_is_taken_whole() -> None:
    from agent_py.core.step_action import fenced_block

    assert fenced_block("return 6 * 7;") == "return 6 * 7;"
    assert fenced_block("```js\nreturn 1;") == "return 1;"  # cut before the closing fence


@pytest.mark.parametrize(
    ("codes", "answer"),
    [
        (["return [1234, 5678];", "return 1234 + 5678;"], "6912"),
        (["return [1234, 5678];", "return [5678, 1234];"], None),
    ],
)
async def test_code_that_hands_back_the_tasks_numbers_is_planned_again_never_an_answer(
    codes: list[str], answer: str | None
) -> None:
    """A small model's typical wrong step, `return [1234, 5678];` for a sum, is refused: the
    corrected plan hears why; a run whose code never computes ends failed, not with the list."""
    strategy = REPLAN.model_copy(update={"replan_after_failure": True})
    seen: list[str] = []

    def plan(messages: list[Message], call: CallInfo) -> str:
        seen.append(messages[-1]["content"])
        return plan_reply([input_step("s1", "javascript_execute", codes[len(seen) - 1])])

    config = TINY_CONFIG.model_copy(update={"strategy": strategy})
    agent, _ = make_agent(ScriptedLLM(plan), config=config)

    result = await agent.task("Use JavaScript to add 1234 and 5678.")

    assert "computes nothing" in seen[1]
    if answer:
        assert result.state is AgentState.COMPLETED and result.answer == answer
    else:
        assert result.state is AgentState.FAILED
        assert result.error and "computes nothing" in result.error
        assert "1234" not in (result.answer or "")


class NamedTool(EchoTool):
    def __init__(self, name: str, description: str) -> None:
        super().__init__()
        self.name = name
        self.description = description


def atlas_tools() -> list[Any]:
    return [
        NamedTool("atlas__add", "Add two numbers."),
        NamedTool("atlas__multiply", "Multiply two numbers."),
        NamedTool("atlas__capital", "The capital city of a country in the atlas."),
    ]


def test_the_tools_a_task_names_are_hinted_but_not_a_servers_shared_prefix() -> None:
    registry = ToolRegistry([*default_tools(), *atlas_tools()])
    assert matching_tools(registry, "What is the capital of Zubrowka, per the atlas?") == [
        "atlas__capital"
    ]
    assert matching_tools(registry, "Use the add tool to add 19 and 24.") == ["atlas__add"]
    assert matching_tools(registry, "Sum the numbers 3, 8 and 15.") == []  # a description word
    assert matching_tools(registry, "Ask the atlas for something.") == []  # the shared prefix


class FetchTool(EchoTool):
    name = "web__get"
    description = "Gets a page."
    input_schema = {"type": "object", "properties": {"url": {"type": "string", "format": "uri"}}}
    remote = True


def test_a_task_with_a_web_address_is_hinted_the_tools_that_take_one() -> None:
    """Seen (the 0.5B model, the reference fetch server): asked about a page at a URL, the
    plan never chose the fetch tool, and code could not reach the page."""
    registry = ToolRegistry([*default_tools(), *atlas_tools(), FetchTool()])
    assert matching_tools(registry, "请看 http://127.0.0.1:8000/tea.html 作者是谁？") == [
        "web__get"
    ]
    assert matching_tools(registry, "Wer hat das geschrieben?") == []  # no address


async def test_a_small_model_is_told_which_tools_match_the_task() -> None:
    def reply(messages: list[Message], call: CallInfo) -> str:
        return plan_reply([step("s1", "atlas__capital", {"text": "Lutz", "times": 1})])

    config = AgentConfig(
        plan_shape=SMALL.plan_shape, strategy=SMALL.strategy, budgets=SMALL.budgets
    )
    llm = ScriptedLLM.replaying({"plan": reply})
    agent, _ = make_agent(llm, *atlas_tools(), config=config)
    await agent.task("What is the capital of Zubrowka?")
    task = llm.calls[0][0][-1]["content"]
    assert (
        task == "Task: What is the capital of Zubrowka?\nTools whose words match the task: "
        "atlas__capital."
    )
    # Without the switch the task goes alone.
    llm = ScriptedLLM.replaying({"plan": reply})
    plain = config.model_copy(
        update={"strategy": SMALL.strategy.model_copy(update={"tool_hint": False})}
    )
    agent, _ = make_agent(llm, *atlas_tools(), config=plain)
    await agent.task("What is the capital of Zubrowka?")
    assert llm.calls[0][0][-1]["content"] == "Task: What is the capital of Zubrowka?"


async def test_the_answer_apart_is_a_conversation_of_its_own_that_still_sees_the_last_turn() -> (
    None
):
    # After the planner's prompt and its plan, the 0.5B model answered with a plan again;
    # apart, the answer call sees the task, the results and (a follow-up) the last answer.
    plans = iter(
        [
            plan_reply([input_step("s1", "javascript_execute", "return 25 * 4;")]),
            plan_reply(
                [
                    input_step("s1", "javascript_execute", "return 100 / 2;"),
                    input_step("s2", "javascript_execute", "return 100 - 50;"),
                ]
            ),
        ]
    )
    llm = ScriptedLLM(
        lambda messages, call: next(plans) if call.purpose == "plan" else "Half of it is 50."
    )
    config = AgentConfig(strategy=SMALL.strategy, budgets=SMALL.budgets)
    agent, _ = make_agent(llm, config=config)

    assert (await agent.task("What's 25 times 4?")).answer == "100"
    second = await agent.task("And half of that?")

    assert second.answer == "Half of it is 50."
    [(messages, _)] = [(m, c) for m, c in llm.calls if c.purpose == "answer"]
    assert messages[0]["content"].startswith("You answer a user's task from the results")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "<plan>" not in messages[1]["content"] and "And half of that?" in messages[1]["content"]
    assert "(The last result: 100)" in messages[1]["content"]
    assert "result: 50" in messages[1]["content"]


async def test_without_the_answer_apart_the_answer_is_the_plan_conversations_next_turn() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [
                    input_step("s1", "javascript_execute", "return 2 - 1;"),
                    input_step("s2", "javascript_execute", "return 1 + 1;"),
                ]
            ),
            "answer": "1 and 2",
        }
    )
    strategy = SMALL.strategy.model_copy(update={"answer_apart": False})
    agent, _ = make_agent(llm, config=AgentConfig(strategy=strategy))

    assert (await agent.task("one and two")).answer == "1 and 2"
    [(messages, _)] = [(m, c) for m, c in llm.calls if c.purpose == "answer"]
    assert messages[0]["role"] == "system" and "<plan>" in messages[0]["content"]
    assert any(m["role"] == "assistant" for m in messages)


async def test_a_task_declared_to_compute_runs_the_writers_code_as_code() -> None:
    code = "return 'Small models can still do useful work'.split(' ').length;"
    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([input_step("s1", "llm_generator", code)], needs="compute")}
    )
    agent, sink = make_agent(llm, config=TINY_CONFIG)

    result = await agent.task("How many words are in 'Small models can still do useful work'?")

    assert result.answer == "7"
    assert [s.tool for s in result.steps] == ["javascript_execute"]
    assert calls_for(llm, "generate") == 0
    [moved] = of_type(sink.events, EventType.PLAN_TO_CODE)
    assert moved.meta["moved"] == {"s1": "javascript_execute"}


async def test_a_computation_the_writer_was_to_guess_gets_its_code_from_a_code_call() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [input_step("s1", "llm_generator", "250 g for 4 people is 100 g for 10")],
                needs="compute",
            ),
            "arguments": "```javascript\nreturn 250 / 4 * 10;\n```",
        }
    )
    agent, _ = make_agent(llm, config=TINY_CONFIG)

    result = await agent.task("250 g of flour feed 4 people. How much for 10 people?")

    assert result.answer == "625"
    assert [s.tool for s in result.steps] == ["javascript_execute"]
    assert calls_for(llm, "generate") == 0


@pytest.mark.parametrize(
    ("needs", "text", "tool", "answer"),
    [
        ("write", "Write a greeting.", "llm_generator", "Hello!"),
        ("compute", "print(len('abc'))", "python_execute", "3"),
    ],
)
async def test_writing_stays_with_the_writer_and_python_code_goes_to_python(
    needs: str, text: str, tool: str, answer: str
) -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([input_step("s1", "llm_generator", text)], needs=needs),
            "generate": "Hello!",
        }
    )
    tools = [*default_tools(), PythonExecutor(SubprocessPyRunner(), timeout_s=10)]
    agent, _ = make_agent(llm, *tools, config=TINY_CONFIG)

    result = await agent.task("a task")

    assert [s.tool for s in result.steps] == [tool]
    assert result.answer == answer


async def test_a_run_whose_last_task_failed_ends_failed_not_with_the_earlier_results() -> None:
    # Seen: the capital found, its letters never counted, and "The capital is Lutz." reported
    # done. The answer call is not asked to make do with the earlier tasks' results.
    plan = plan_reply(
        [input_step("s1", "javascript_execute", "return 'Lutz';")],
        [input_step("s2", "javascript_execute", "return count(name);")],
    )
    llm = ScriptedLLM.replaying(
        {
            "plan": plan,
            "arguments": "```javascript\nreturn count(name);\n```",
            "answer": "The capital is Lutz.",
        }
    )
    strategy = TINY.strategy.model_copy(update={"refuse_constant_text": False})
    agent, _ = make_agent(llm, config=AgentConfig(plan_shape=TINY.plan_shape, strategy=strategy))

    result = await agent.task("Find the capital, then count the letters of its name.")

    assert result.state is AgentState.FAILED
    assert result.error.startswith("the last task failed: ")
    assert "count is not defined" in result.error
    assert calls_for(llm, "answer") == 0
