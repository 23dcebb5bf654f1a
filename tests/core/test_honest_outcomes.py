"""A run that did not do the task ends failed and says why; it never reports success on an
empty answer or on our own instructions repeated back."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from support import CONTINUE, EchoTool, make_agent, of_type, plan_reply, step

from agent_py import AgentConfig, AgentState, EventType, LLMError, ScriptedLLM
from agent_py.cli.run_report import EXIT_FAILED, EXIT_OK, report_result
from agent_py.core.answer_checks import (
    data_left_out,
    echoes_instructions,
    question_data,
    repeats_itself,
)
from agent_py.core.checks import Seen, Stage, checks_at
from agent_py.core.checks.answer_kind import wrong_kind
from agent_py.core.checks.months_from_one import dates_from_numbers, months_counted_from_one
from agent_py.core.checks.needs_a_tool import run as needs_a_tool
from agent_py.core.decline import Decline
from agent_py.core.events import FailureCause
from agent_py.core.llm import CallInfo, CallPurpose, Message
from agent_py.core.plan import AnswerKind, Needs, PlanSchema, StepSchema, TaskSchema
from agent_py.core.profiles import FULL, SMALL, TINY
from agent_py.core.prompts import render
from agent_py.core.written import Written, read_written
from agent_py.tools.llm_generator import LLMGenerator

ONE_STEP = plan_reply([step("s1", "echo", {"text": "a", "times": 1})])


async def run_with_answer(answer: str) -> tuple[AgentState, str | None]:
    llm = ScriptedLLM.replaying({"plan": ONE_STEP, "rethink": CONTINUE, "answer": answer})
    agent, _ = make_agent(llm, EchoTool())
    result = await agent.task("Say a once.")
    return result.state, result.error


async def test_an_empty_answer_fails_the_run() -> None:
    assert await run_with_answer("   ") == (AgentState.FAILED, "the model's answer is empty")


async def test_a_placeholder_copied_as_the_answer_fails_the_run() -> None:
    """A reply format's "…" copied as the answer is no answer; "[]" (an empty list) is one."""
    assert await run_with_answer("<final>…</final>") == (
        AgentState.FAILED,
        "the model's answer is a placeholder, not an answer: '…'",
    )
    assert await run_with_answer("...") == (
        AgentState.FAILED,
        "the model's answer is a placeholder, not an answer: '...'",
    )
    assert await run_with_answer("[]") == (AgentState.COMPLETED, None)


async def test_an_answer_that_is_only_unfinished_thinking_fails_the_run() -> None:
    state, error = await run_with_answer("<think>Let me see, the user wants")
    assert (state, error) == (AgentState.FAILED, "the model's answer is empty")


async def test_an_answer_that_repeats_the_system_prompt_fails_the_run() -> None:
    echo = "Sure. You are the planner of an agent that solves the user's task with tools."
    state, error = await run_with_answer(echo)
    assert state is AgentState.FAILED
    assert error == "the model's answer repeats the agent's instructions instead of answering"


async def test_an_answer_that_loops_on_one_phrase_fails_the_run() -> None:
    # What SmolLM2 wrote for "Write a short birthday greeting for Maria." (the suite's
    # gen-greeting), cut by its token budget.
    loop = "Maria.toString()\n" + "#Maria.toString()\n" * 40 + "#Maria.toStri"
    state, error = await run_with_answer(loop)
    assert state is AgentState.FAILED
    assert error == "the model's answer repeats one phrase over and over instead of answering"


def test_a_loop_is_a_phrase_over_and_over_not_a_refrain_or_a_list() -> None:
    assert repeats_itself("ha " * 12)
    assert repeats_itself("The answer is 42. " * 6)
    refrain = (
        "Happy birthday to you, happy birthday to you, happy birthday dear Maria, "
        "happy birthday to you!"
    )
    assert not repeats_itself(refrain)
    assert not repeats_itself(", ".join(str(n) for n in range(1, 31)))
    assert not repeats_itself("The ocean covers most of our planet and hides a world below.")
    assert not repeats_itself("yes yes yes yes")  # too short to tell
    # Repeats that run into each other: too few words apart to count by words.
    assert repeats_itself("Good morning" * 9 + "G")
    assert repeats_itself("Bonjour! " * 5 + "Bon")
    assert not repeats_itself("Good morning" * 9 + "Goodbye")  # something else at the end
    assert not repeats_itself("1" * 60)  # a number, not a phrase
    assert not repeats_itself("abab" * 8)  # too short to tell


async def test_an_answer_that_is_plan_json_fails_the_run() -> None:
    state, _ = await run_with_answer('{"tasks": [{"task_id": "t1", "steps": []}]}')
    assert state is AgentState.FAILED


async def test_a_final_answer_from_the_rethink_is_checked_too() -> None:
    generator_system = render("generator_system")
    llm = ScriptedLLM.replaying(
        {"plan": ONE_STEP, "rethink": f"<status>done</status><final>{generator_system}</final>"}
    )
    agent, _ = make_agent(llm, EchoTool())
    result = await agent.task("Say a once.")
    assert result.state is AgentState.FAILED


async def test_an_answer_may_repeat_the_users_own_words() -> None:
    question = "Write a sentence that says the quick brown fox jumps over the lazy dog."
    llm = ScriptedLLM.replaying(
        {
            "plan": ONE_STEP,
            "rethink": "<status>done</status><final>The quick brown fox jumps over the lazy "
            "dog, every single morning.</final>",
        }
    )
    agent, _ = make_agent(llm, EchoTool())
    result = await agent.task(question)
    assert result.state is AgentState.COMPLETED


async def test_a_generator_that_echoes_its_system_prompt_fails_its_step() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "llm_generator", {"prompt": "Write a haiku."})]),
            "generate": render("generator_system") + "\nWrite a haiku.",
            "rethink": "<status>done</status><final>no haiku</final>",
        }
    )
    agent, _ = make_agent(llm)
    result = await agent.task("Write a haiku.")
    assert result.steps[0].ok is False
    assert result.steps[0].output == (
        "llm_generator failed: the model repeated its own instructions instead of doing the task"
    )
    assert result.state is AgentState.FAILED  # its only step failed


async def test_a_run_with_some_failed_steps_completes_and_names_them() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": [
                plan_reply([step("s1", "echo", {"text": "fail", "times": 1}), step("s2", "echo")]),
                # The rethink's answer after a failed step gets one corrected plan first.
                plan_reply([step("s3", "echo", {"text": "again", "times": 1})]),
            ],
            "arguments": '{"text": "ok", "times": 1}',
            "rethink": "<status>done</status><final>ok (s1 failed)</final>",
        }
    )
    agent, sink = make_agent(llm, EchoTool())
    result = await agent.task("two echoes")
    assert result.state is AgentState.COMPLETED
    final = of_type(sink.events, EventType.FINAL)[0]
    assert final.meta["failed_steps"] == ["s1"]


@pytest.mark.parametrize(
    ("answer", "echo"),
    [
        # The question back (the answer call's reply on a long page), a space added.
        ("In which year was the bridge on http://a.test/ bridge.html opened?", True),
        ("in which year was the bridge on http://a.test/bridge.html opened", True),
        ("这座桥是哪一年开通的？", True),
        ("It opened in 1931.", False),
        ("bridge", False),  # a word of the question is no echo
    ],
)
def test_the_question_given_back_is_no_answer(answer: str, echo: bool) -> None:
    from agent_py.core.answer_checks import asks_back

    question = "In which year was the bridge on http://a.test/bridge.html opened?"
    if answer.startswith("这"):
        question = "这座桥是哪一年开通的?"
    assert asks_back(answer, question) is echo


def test_echo_detection_needs_a_run_of_words_not_a_shared_word() -> None:
    instructions = [render("plan_system", tools="", input_rule="", reply_format="")]
    assert not echoes_instructions("The task is done: 42.", instructions)
    assert echoes_instructions("Break the task into tasks, and each task into steps.", instructions)


def test_the_terminal_names_failed_steps_and_exits_by_state(tmp_path: Path) -> None:
    steps = [
        {"step_id": "s1", "tool": "echo", "ok": False, "output": "echo failed: no"},
        {"step_id": "s2", "tool": "echo", "ok": True, "output": "ok"},
    ]
    stats = {"model_calls": {"plan": 1}, "steps_run": 2, "wall_time_s": 3.0, "model_time_s": 1.25}
    completed = {"state": "completed", "answer": "ok", "steps": steps, "stats": stats}
    out, err = io.StringIO(), io.StringIO()
    assert report_result(completed, tmp_path / "h.jsonl", out, err) == EXIT_OK
    assert "note: 1 of 2 steps failed: s1 (echo): echo failed: no" in out.getvalue()
    # The model's time apart from the run's, which also holds waiting for the preparation.
    assert "1 model calls (1.2 s in them), 2 steps, 3.0 s; history:" in out.getvalue()

    failed = {"state": "failed", "error": "every step failed", "steps": [], "stats": stats}
    assert report_result(failed, tmp_path / "h.jsonl", out, err) == EXIT_FAILED
    assert "failed: every step failed" in err.getvalue()


def test_a_short_instruction_sentence_repeated_back_is_an_echo() -> None:
    generator_system = render("generator_system")
    seen = "You are a careful writer. Write a one-line poem about a river. You are a careful"
    assert echoes_instructions(seen, [generator_system])
    assert not echoes_instructions("Rivers run to the sea, careful and slow.", [generator_system])


# The small profile hands a one-step task's result to the user as it is; without the code call
# after failed code, so each plan's code runs as written.
SMALL_REPLAN = AgentConfig(
    plan_shape=TINY.plan_shape,
    strategy=TINY.strategy.model_copy(update={"code_call_after_failure": False}),
    budgets=TINY.budgets,
)


def code_step(step_id: str, code: str) -> dict[str, Any]:
    return {
        "step_id": step_id,
        "step_goal": "compute it",
        "tool_name": "javascript_execute",
        "input": code,
    }


def planner_of(
    *codes: list[str], answer: str | None = None, answers: Sequence[str] = ()
) -> tuple[Any, list[str]]:
    """A plan call that answers with the given plans in turn (each a list of tasks' code),
    each declaring ``answer`` as its answer kind (or the plan's own of ``answers``), and
    the prompts it saw."""
    seen: list[str] = []

    def plan(messages: list[Message], call: CallInfo) -> str:
        seen.append(str(messages[-1]["content"]))
        tasks = codes[len(seen) - 1]
        steps = [[code_step(f"s{i + 1}", code)] for i, code in enumerate(tasks)]
        return plan_reply(*steps, answer=answers[len(seen) - 1] if answers else answer)

    return plan, seen


async def test_a_result_from_code_that_left_out_the_tasks_number_is_planned_again() -> None:
    plan, seen = planner_of(["return 2 * 20;"], ["return 2 ** 10;"])
    agent, sink = make_agent(ScriptedLLM(plan), config=SMALL_REPLAN)

    result = await agent.task("Use JavaScript to compute 2 to the power of 10.")

    assert result.state is AgentState.COMPLETED and result.answer == "1024"
    assert seen[1] == (
        "That did not work:\ns1 (javascript_execute): its result 40 cannot answer the task: "
        "no step was given 10 from the task\n"
        "Reply with a corrected plan for the task, as JSON inside <plan></plan>."
    )
    assert result.stats.replans == 1
    assert [s.ok for s in result.steps] == [False, True]  # the first result is not trusted
    # The step was reported done, then failed with the reason (the page shows it failed).
    s1 = [e for e in sink.events if e.step == "s1" and e.type.startswith("step_")]
    assert [e.type for e in s1] == ["step_started", "step_completed", "step_failed"]
    assert s1[-1].content == (
        "its result 40 cannot answer the task: no step was given 10 from the task"
    )
    assert s1[-1].meta["left_out"] == ["10"]


async def test_a_result_that_leaves_data_out_twice_fails_the_run_and_says_why() -> None:
    plan, _ = planner_of(["return 2 * 20;"], ["return 'x'.length;"])
    agent, _ = make_agent(ScriptedLLM(plan), config=SMALL_REPLAN)

    result = await agent.task("Use JavaScript to count the letters of 'encyclopedia'.")

    assert result.state is AgentState.FAILED and result.answer == ""
    assert result.error == (
        "every step failed: s1 (javascript_execute): its result 40 cannot answer the task: "
        "no step was given 'encyclopedia' from the task; "
        "s2 (javascript_execute): its result 1 cannot answer the task: "  # s1 renamed
        "no step was given 'encyclopedia' from the task"
    )


async def test_with_the_code_call_a_result_that_left_data_out_is_written_again_first() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([code_step("s1", "return 'the quick brown fox'.length;")]),
            "arguments": "```javascript\nreturn 'encyclopedia'.length;\n```",
        }
    )
    config = SMALL_REPLAN.model_copy(update={"strategy": TINY.strategy})
    agent, _ = make_agent(llm, config=config)

    result = await agent.task("Use JavaScript to count the letters in the word 'encyclopedia'.")

    assert result.state is AgentState.COMPLETED and result.answer == "12"
    assert result.stats.model_calls == {"plan": 1, "arguments": 1}


async def test_a_number_for_a_yes_or_no_question_is_planned_again() -> None:
    plan, seen = planner_of(["return 97 % 2;"], ["return 97 % 2 === 1;"], answer="yes_no")
    agent, sink = make_agent(ScriptedLLM(plan), config=SMALL_REPLAN)

    result = await agent.task("Is 97 a prime number?")

    assert result.state is AgentState.COMPLETED and result.answer == "true"
    why = (
        "its result 1 says neither yes nor no, and the task asks a yes-or-no question: "
        "return true or false"
    )
    assert seen[1].startswith(f"That did not work:\ns1 (javascript_execute): {why}\n")
    assert [s.ok for s in result.steps] == [False, True]
    s1 = [e for e in sink.events if e.step == "s1" and e.type.startswith("step_")]
    assert [e.type for e in s1] == ["step_started", "step_completed", "step_failed"]


async def test_a_number_for_a_yes_or_no_question_is_never_the_answer() -> None:
    """Without a corrected plan that answers it, the run ends failed and says why."""
    plan, _ = planner_of(["return 97 % 2;"], ["return 97 % 3;"], answer="yes_no")
    agent, _ = make_agent(ScriptedLLM(plan), config=SMALL_REPLAN)
    result = await agent.task("Is 97 a prime number?")
    assert result.state is AgentState.FAILED
    assert result.error is not None and "says neither yes nor no" in result.error

    # An answer the model writes (the full profile's) is held to it as well.
    one_step = plan_reply([step("s1", "echo", {"text": "a", "times": 1})], answer="yes_no")
    llm = ScriptedLLM.replaying({"plan": one_step, "rethink": CONTINUE, "answer": "0"})
    agent, _ = make_agent(llm, EchoTool())
    result = await agent.task("Does 10 divide 100?")
    assert (result.state, result.error) == (
        AgentState.FAILED,
        "the answer 0 says neither yes nor no to a yes-or-no question",
    )
    assert await run_with_answer("0") == (AgentState.COMPLETED, None)  # "Say a once."


async def test_a_corrected_plan_does_not_change_what_the_question_wants() -> None:
    """The first plan's answer kind holds for the turn: a re-plan that declared text for a
    number question let a printed excuse ("the data is invalid") complete the run."""
    plan, _ = planner_of(
        ["throw new Error('no such column');"],
        ["return 'the data is invalid';"],
        answers=["number", "text"],
    )

    def script(messages: list[Message], call: CallInfo) -> str:
        if call.purpose is CallPurpose.ANSWER:
            return "The data is invalid."
        return str(plan(messages, call))

    agent, _ = make_agent(ScriptedLLM(script), config=SMALL_REPLAN)

    result = await agent.task("Use JavaScript to count the days of a leap year.")

    assert result.state is AgentState.FAILED, result.answer
    assert "asks for a number" in (result.error or "")


@pytest.mark.parametrize(
    ("answer", "kind", "wrong"),
    [
        ("1", AnswerKind.YES_NO, True),
        ("0", AnswerKind.YES_NO, True),
        ("true", AnswerKind.YES_NO, False),
        ("No, 221 = 13 x 17.", AnswerKind.YES_NO, False),
        ("不是，221 = 13 × 17", AnswerKind.YES_NO, False),  # any language
        ("19", AnswerKind.NUMBER, False),
        ("true", AnswerKind.NUMBER, True),  # a forecast "answered" true
        ("二十九", AnswerKind.NUMBER, True),
        # Seen (0.5B, answer cut after the address): an address's digits are no number.
        ("The club sandwich on the menu at http://127.0.0.1:8000/menu.", AnswerKind.NUMBER, True),
        ("7.25 (http://127.0.0.1:8000/menu.html)", AnswerKind.NUMBER, False),
        ("42", AnswerKind.TEXT, False),
        ("1", None, False),  # nothing declared: nothing to hold it to
    ],
)
def test_an_answer_is_held_to_the_kind_the_plan_declared(
    answer: str, kind: AnswerKind | None, wrong: bool
) -> None:
    assert (wrong_kind(answer, kind) is not None) is wrong


async def test_javascript_dates_with_months_counted_from_one_are_not_run() -> None:
    """JavaScript counts a Date's months from 0: new Date(2024, 6, 1) is August 1. Code that
    copies the task's month numbers is refused before it runs, with the Dates to write."""
    plan, seen = planner_of(
        ["return (new Date(2024, 7, 1) - new Date(2024, 6, 10)) / 86400000;"],
        ["return (new Date(2024, 6, 1) - new Date(2024, 5, 10)) / 86400000;"],
    )
    agent, _ = make_agent(ScriptedLLM(plan), config=SMALL_REPLAN)

    result = await agent.task("Wie viele Tage liegen zwischen 2024-06-10 und 2024-07-01?")

    assert result.state is AgentState.COMPLETED and result.answer == "21"
    assert result.steps[0].output == (
        "javascript_execute was not run: new Date(2024, 7, 1), new Date(2024, 6, 10) is a "
        "month after the task's date, since JavaScript counts months from 0 (January is 0): "
        "write new Date(2024, 6, 1), new Date(2024, 5, 10)"
    )
    assert "javascript_execute was not run" in seen[1]


@pytest.mark.parametrize(
    ("code", "question", "wrong"),
    [
        ("new Date(2025, 3, 3)", "What weekday is 2025-03-03?", ["new Date(2025, 3, 3)"]),
        ("Date.UTC(2024, 12, 25)", "距离 2024/12/25 还有几天？", ["Date.UTC(2024, 12, 25)"]),
        ("new Date(2024, 1, 1)", "Days from 2024-01-01 to 2024-03-01?", ["new Date(2024, 1, 1)"]),
        ("new Date(2025, 2, 3)", "What weekday is 2025-03-03?", []),  # right
        ("new Date(2025, 3, 3)", "Is 2025-03-03 or 2025-04-03 a Monday?", []),  # April 3 asked
        ("new Date(2026, 3, 3)", "What weekday is 2025-03-03?", []),  # another year
        ("new Date(y, 3, 3)", "What weekday is 2025-03-03?", []),  # not written out
        ("new Date(2025, 3, 3)", "What weekday is March 3, 2025?", []),  # words: not read
    ],
)
def test_a_month_counted_from_one_is_the_tasks_month_number(
    code: str, question: str, wrong: list[str]
) -> None:
    assert [w for w, _ in months_counted_from_one(code, question)] == wrong


@pytest.mark.parametrize(
    ("code", "question", "built"),
    [
        ("new Date(2025, 2, 3)", "What weekday is March 3, 2025?", ["new Date(2025, 2, 3)"]),
        ("Date.UTC(2025, 2, 3)", "Quel jour était le 3 mars 2025 ?", ["Date.UTC(2025, 2, 3)"]),
        ("new Date('2025-03-03')", "What weekday is March 3, 2025?", []),  # text: from 1
        ("new Date(2025, 2, 3)", "What weekday is 2025-03-03?", []),  # compared in digits
    ],
)
def test_a_date_from_numbers_is_refused_where_the_task_gives_its_dates_in_words(
    code: str, question: str, built: list[str]
) -> None:
    assert dates_from_numbers(code, question) == built


async def test_a_long_list_of_data_left_out_is_named_in_short() -> None:
    """A small plan's input is bounded, so a pasted text's data may not fit in it: the
    reason names the first few and counts the rest."""
    numbers = ", ".join(str(n) for n in range(11, 31))  # 11 to 13 are held: 13 is one off
    plan, _ = planner_of(["return 11 + 12;"], ["return 11 + 12;"])
    agent, _ = make_agent(ScriptedLLM(plan), config=SMALL_REPLAN)

    result = await agent.task(f"Use JavaScript to sum {numbers}.")

    assert result.state is AgentState.FAILED and result.error is not None
    assert "no step was given 14, 15, 16, 17, 18 and 12 more from the task" in result.error


async def test_the_data_may_reach_the_answer_through_an_earlier_step() -> None:
    plan, seen = planner_of(["return 12 * 12;", "return ${s1} + 6;"])
    agent, _ = make_agent(ScriptedLLM(plan), config=SMALL_REPLAN)

    result = await agent.task("Use JavaScript to compute 12 times 12, then add 6 to that.")

    assert result.state is AgentState.COMPLETED and result.answer == "150"
    assert len(seen) == 1


async def test_an_answer_the_model_writes_from_the_results_is_not_held_to_the_data() -> None:
    """The full profile's answer is the model's reading of the results, not a tool's value."""
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "echo", {"text": "a", "times": 1})]),
            "rethink": CONTINUE,
            "answer": "a, 3 times",
        }
    )
    agent, _ = make_agent(llm, EchoTool(), config=AgentConfig())

    result = await agent.task("Say a 3 times.")

    assert result.state is AgentState.COMPLETED and result.answer == "a, 3 times"


@pytest.mark.parametrize(
    ("question", "quoted", "numbers"),
    [
        ("Use JavaScript to sum the numbers 3, 8, 15 and 4.", [], ["3", "8", "15", "4"]),
        ("Reverse the string 'stressed' and \"abc\".", ["stressed", "abc"], []),
        ("What is 1,200 plus -5 and 2.5?", [], ["1,200", "5", "2.5"]),
        # Numbers code may rightly write another way, or that are part of a name.
        ("Count the days from 2024-01-01 to 2024-03-01.", [], ["2024", "01", "03"]),
        ("What is 15% of 80?", [], ["80"]),
        ("Take the 3rd item of v1.2.3 at 12:30 in ES6.", [], ["12", "30"]),
        ("What is 3/4 of the COVID-19 count, 5-3?", [], ["5", "3"]),
        ("Sum 1,2,3 and 3,5.", [], []),  # a list or a decimal comma: unclear, so not taken
        ("Write Maria's greeting for the students' party.", [], []),
        ("Get https://example.com/a?b=1, then its 2 links.", ["https://example.com/a?b=1"], ["2"]),
    ],
)
def test_the_data_of_a_question_is_its_quoted_text_and_stand_alone_numbers(
    question: str, quoted: list[str], numbers: list[str]
) -> None:
    assert question_data(question) == (quoted, numbers)


@pytest.mark.parametrize(
    ("calls", "missing"),
    [
        ([{"code": "return [3, 8, 15, 4].reduce((a, b) => a + b);"}], []),
        ([{"code": "return 3 + 8;"}], ["15"]),
        ([{"a": 3, "b": 8.0}, {"code": "return 15 + 1_4;"}], []),  # 14: one off
        ([{"prompt": "the sum of 3, 8, 15 and 5"}], []),  # 5: one off, as a bound
        ([{"code": "return 8 + 15 + 40;"}], ["3", "4"]),  # 4 and 40 differ
    ],
)
def test_a_number_is_used_when_a_call_holds_its_value_or_one_off(
    calls: list[dict[str, Any]], missing: list[str]
) -> None:
    assert data_left_out("Sum 3, 8, 15 and 4.", calls) == missing


def test_quoted_text_is_used_when_a_call_holds_it_in_any_case() -> None:
    question = "Turn 'Hello World' around."
    assert data_left_out(question, [{"code": "return 'hello world'.split('')"}]) == []
    assert data_left_out(question, [{"code": "return 'hello'"}]) == ["'Hello World'"]


def test_a_date_is_used_with_its_month_counted_from_0_or_as_text() -> None:
    question = "Count the days from 2024-01-01 to 2024-03-01."
    by_parts = "return (new Date(2024, 2, 1) - new Date(2024, 0, 1)) / 86400000;"
    as_text = "return (new Date('2024-03-01') - new Date('2024-01-01')) / 86400000;"
    assert data_left_out(question, [{"code": by_parts}]) == []
    assert data_left_out(question, [{"code": as_text}]) == []
    wrong = "return new Date(2024).getTime() - 1000;"
    assert data_left_out(question, [{"code": wrong}]) == ["01", "03"]


async def test_a_run_the_engine_failed_says_so_and_a_task_failure_does_not() -> None:
    def broken(messages: list[Message], call: CallInfo) -> str:
        raise LLMError("Failed to execute 'put' on 'Cache': Unexpected internal error")

    agent, sink = make_agent(ScriptedLLM(broken), EchoTool())
    result = await agent.task("Say a once.")
    assert (result.state, result.failure) == (AgentState.FAILED, FailureCause.ENGINE)
    assert of_type(sink.events, "final")[-1].meta["failure"] == "engine"

    # The engine failing under a step (a generation) makes the run's failure the engine's too.
    def generate_fails(messages: list[Message], call: CallInfo) -> str:
        raise LLMError("the engine's worker died")

    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "llm_generator", {"prompt": "Say hi."})]),
            "generate": generate_fails,
            "rethink": CONTINUE,
        }
    )
    agent, _ = make_agent(llm, LLMGenerator())
    result = await agent.task("Say hi.")
    assert result.state is AgentState.FAILED and result.failure is FailureCause.ENGINE
    assert "the engine's worker died" in (result.error or "")

    # A run that failed at the task itself is the task's failure.
    failing = plan_reply([step("s1", "echo", {"text": "fail", "times": 1})])
    agent, _ = make_agent(ScriptedLLM.replaying({"plan": failing, "rethink": CONTINUE}), EchoTool())
    result = await agent.task("Say a once.")
    assert result.state is AgentState.FAILED and result.failure is FailureCause.TASK
    # A completed run has no failure cause.
    state, _ = await run_with_answer("a")
    assert state is AgentState.COMPLETED


@pytest.mark.parametrize(
    "why",
    [
        "the results do not say what the price is",
        "结果里没有今天的价格",  # the status decides, in any language
    ],
)
async def test_an_answer_that_says_cannot_fails_the_run_with_why(why: str) -> None:
    state, error = await run_with_answer(f"<cannot> {why}")
    assert state is AgentState.FAILED
    assert error == f"the model says it cannot do the task: {why}"


@pytest.mark.parametrize(
    ("reply", "written"),
    [
        ("Muchas gracias.", Written("Muchas gracias.")),
        ("<cannot> no data", Written("no data", cannot=True)),
        ("  <CANNOT>需要网页</cannot>\n", Written("需要网页", cannot=True)),
        ("<cannot>", Written("no reason given", cannot=True)),
        ("A tag later: <cannot> is text", Written("A tag later: <cannot> is text")),
        # Words of refusal are the model's text: only the tag says it cannot.
        ("I cannot say.", Written("I cannot say.")),
    ],
)  # fmt: skip
def test_a_written_reply_is_read_by_its_status(reply: str, written: Written) -> None:
    assert read_written(reply) == written


async def test_a_generated_text_that_says_cannot_fails_its_step() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "llm_generator", {"prompt": "Write a limerick."})]),
            "generate": "<cannot> Ich kann keine Limericks schreiben.",
            "rethink": CONTINUE,
        }
    )
    agent, _ = make_agent(llm, LLMGenerator())
    result = await agent.task("Write a limerick about a cat.")
    assert result.state is AgentState.FAILED
    assert result.steps[0].output == (
        "llm_generator failed: the model declined: Ich kann keine Limericks schreiben."
    )


async def writer_given(instruction: str, question: str, text: str) -> Any:
    """The result of a run of one llm_generator step with ``instruction``, the writer
    answering ``text``."""
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "llm_generator", {"prompt": instruction})]),
            "generate": text,
            "rethink": CONTINUE,
            "answer": text,
        }
    )
    agent, _ = make_agent(llm, LLMGenerator())
    return await agent.task(question)


async def test_a_writer_that_gives_its_instruction_back_fails_its_step() -> None:
    question = "How do you say 'thank you' in German?"
    result = await writer_given("thank you", question, "Thank you.")
    assert result.state is AgentState.FAILED
    assert result.steps[0].output == (
        "llm_generator failed: the model gave its instruction back unchanged ('Thank you.') "
        "instead of doing it: the instruction was only words cut out of the task, not what to "
        "do with them"
    )
    # Where the instruction is the user's whole task, the same words may answer it.
    result = await writer_given("Hello!", "hello", "Hello.")
    assert result.state is AgentState.COMPLETED
    # An instruction that is not words of the task is the plan's own text, the work already
    # done (seen: "Bonjour" for "Translate 'good morning' into French.", refused, and the
    # corrected plan then made a wrong answer).
    result = await writer_given("Bonjour", "Translate 'good morning' into French.", "Bonjour")
    assert (result.state, result.answer) == (AgentState.COMPLETED, "Bonjour")
    # Words of the task, but not a run of them in order: not cut out of it.
    result = await writer_given("you thank", question, "You thank.")
    assert result.state is AgentState.COMPLETED


async def test_a_task_to_act_in_the_world_with_only_the_writer_ends_failed() -> None:
    """Seen (the 1.5B model): "Send an email to bob@example.com saying hello." planned as a
    task "Send an email" whose one step writes it; the email was reported as the answer, as
    if sent. The writer and the code sandboxes cannot act in the world."""
    plan = plan_reply(
        [step("s1", "llm_generator", {"prompt": "Write an email to Ann saying hi."})],
        needs="act",
    ).replace('"task_goal": "task 1"', '"task_goal": "Send an email to Ann"')
    agent, sink = make_agent(ScriptedLLM.replaying({"plan": plan}), LLMGenerator())

    result = await agent.task("Email Ann and say hi.")

    assert result.state is AgentState.FAILED and result.failure is FailureCause.TASK
    assert result.error == (
        "the task cannot be done here: task 'Send an email to Ann' needs an action outside "
        "this page, and no tool here can do that (the plan's llm_generator only writes text "
        "or computes)"
    )
    assert not of_type(sink.events, "step_started")  # nothing ran


async def test_a_task_to_read_a_file_with_only_the_writer_ends_failed() -> None:
    """Seen (the 0.5B model, after a kernel change moved its floats): "Read the file
    /etc/hostname on this computer and tell me what it says." given whole to the writer,
    which answered that the file says "hostname", and the run completed."""
    question = "Lies die Datei /etc/hostname auf diesem Rechner und sag mir, was drinsteht."
    plan = plan_reply([step("s1", "llm_generator", {"prompt": question})], needs="look_up")
    agent, sink = make_agent(ScriptedLLM.replaying({"plan": plan}), LLMGenerator())

    result = await agent.task(question)

    assert result.state is AgentState.FAILED and result.failure is FailureCause.TASK
    assert result.error == (
        "the task cannot be done here: task 'task 1' needs data from outside this page (a "
        "page, a file, live data, a server's records), and no tool here can do that (the "
        "plan's llm_generator only writes text or computes)"
    )
    assert not of_type(sink.events, "step_started")  # nothing ran


async def test_a_request_for_live_data_with_only_code_ends_failed() -> None:
    """Seen (the 0.5B model): "What's the weather like in Oslo right now?" planned as one
    code step; its code returned a made-up forecast, and only the check on text written into
    code stopped it, after two code calls and a second plan."""
    question = "奥斯陆现在的天气怎么样？"
    plan = plan_reply(
        [step("s1", "javascript_execute", {"code": "return 'Cloudy, 15 degrees';"})],
        needs="look_up",
    )
    agent, sink = make_agent(ScriptedLLM.replaying({"plan": plan}))

    result = await agent.task(question)

    assert result.state is AgentState.FAILED and result.failure is FailureCause.TASK
    assert result.error is not None and "needs data from outside this page" in result.error
    assert "javascript_execute only writes text or computes" in result.error
    assert not of_type(sink.events, "step_started")


@pytest.mark.parametrize(
    ("needs", "tool", "declined"),
    [
        (Needs.LOOK_UP, "llm_generator", True),
        (Needs.LOOK_UP, "javascript_execute", True),
        (Needs.ACT, "python_execute", True),
        (Needs.LOOK_UP, "web__fetch", False),  # a remote tool may read
        (Needs.ACT, "mail__send", False),  # a remote tool may act
        (Needs.COMPUTE, "javascript_execute", False),
        (Needs.WRITE, "llm_generator", False),
        (None, "llm_generator", False),  # nothing declared: nothing to compare
    ],
)
def test_a_task_that_needs_a_look_up_or_an_action_needs_a_remote_tool(
    needs: Needs | None, tool: str, declined: bool
) -> None:
    """The model declares what a task needs; the check compares it with the tools, in
    whatever language the task is written."""
    task = TaskSchema(
        task_id="t1",
        task_goal="帮我订一张去北京的火车票",
        needs=needs,
        steps=[StepSchema(step_id="s1", step_goal="do it", tool_name=tool)],
    )
    seen = Seen(question="帮我订一张去北京的火车票", plan=PlanSchema(tasks=[task]),
                own_tool=lambda name: "__" not in name)  # fmt: skip
    assert (needs_a_tool(seen) is not None) is declined


def test_a_declaration_the_grammar_does_not_know_is_read_as_none() -> None:
    plan = PlanSchema.model_validate(
        {"answer": "a number", "tasks": [{"task_id": "t1", "task_goal": "g", "needs": "Compute",
         "steps": [{"step_id": "s1", "step_goal": "g", "tool_name": "x"}]}]}
    )  # fmt: skip
    assert plan.answer is None and plan.tasks[0].needs is Needs.COMPUTE


def test_every_profile_has_the_plan_and_answer_checks() -> None:
    for profile in (TINY, SMALL, FULL):
        names = {c.name for s in Stage for c in checks_at(s, profile.strategy)}
        assert {"needs_a_tool", "description_as_value", "answer_kind", "made_up_numbers"} <= names


async def test_a_plan_that_declines_ends_failed_with_its_reason_and_runs_nothing() -> None:
    declines = plan_reply(
        [step("s1", "decline", {"reason": "no tool here can book tables."})],
        [step("s2", "echo", {"text": "booked", "times": 1})],
    )
    echo = EchoTool()
    agent, sink = make_agent(ScriptedLLM.replaying({"plan": declines}), echo, Decline())
    result = await agent.task("Book me a table for two tonight.")
    assert result.state is AgentState.FAILED and result.failure is FailureCause.TASK
    assert result.error == "the task cannot be done here: no tool here can book tables"
    assert echo.calls == [] and result.steps == []
    assert not of_type(sink.events, "step_started")
    # The small profile's inline input carries the reason as well.
    inline = plan_reply(
        [
            {
                "step_id": "s1",
                "step_goal": "say why",
                "tool_name": "decline",
                "input": "it needs live prices",
            }
        ]
    )
    agent, _ = make_agent(ScriptedLLM.replaying({"plan": inline}), EchoTool(), Decline())
    result = await agent.task("What is bitcoin worth now?")
    assert result.error == "the task cannot be done here: it needs live prices"


def test_the_decline_tool_is_offered_in_every_profile_but_the_tiny_one() -> None:
    assert SMALL.strategy.decline and FULL.strategy.decline and not TINY.strategy.decline
