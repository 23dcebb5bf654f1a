"""Strategy.compute_twice: the last step's computed number is computed once more from a code
call before it is the answer; two numbers that differ fail the step, naming both."""

from __future__ import annotations

from support import make_agent, of_type, plan_reply

from agent_py import AgentConfig, AgentState, EventType, ScriptedLLM
from agent_py.core.agreement import lone_number, lone_value, operations, same_number, same_value
from agent_py.core.profiles import SMALL

TWICE = SMALL.strategy.model_copy(update={"compute_twice": True})
CONFIG = AgentConfig(plan_shape=SMALL.plan_shape, strategy=TWICE, budgets=SMALL.budgets)
QUESTION = "I have 3 boxes of 12 eggs and use 7 of them. How many eggs are left?"


def code_step(step_id: str, code: str) -> dict[str, str]:
    goal = "count the eggs left"
    return {"step_id": step_id, "step_goal": goal, "tool_name": "javascript_execute", "input": code}


async def test_two_computations_that_agree_give_the_answer() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([code_step("s1", "return 3 * 12 - 7;")]),
            "arguments": "```javascript\nconst eggs = 3 * 12;\nreturn eggs - 7;\n```",
        }
    )
    agent, sink = make_agent(llm, config=CONFIG)

    result = await agent.task(QUESTION)

    assert result.state is AgentState.COMPLETED and result.answer == "29"
    assert result.stats.model_calls == {"plan": 1, "arguments": 1}
    note = of_type(sink.events, EventType.REFLECTION)[0]
    assert "computing it once more" in note.content


async def test_where_two_computations_differ_a_third_decides() -> None:
    for third, answer in (("return 36 + 7;", "43"), ("return 36 - 7;", "29")):
        llm = ScriptedLLM.replaying(
            {
                "plan": plan_reply([code_step("s1", "return 3 * 12 + 7;")]),
                "arguments": [
                    f"```javascript\n{code}\n```" for code in ("return 3 * 12 - 7;", third)
                ],
            }
        )
        agent, sink = make_agent(llm, config=CONFIG)

        result = await agent.task(QUESTION)

        assert result.state is AgentState.COMPLETED and result.answer == answer
        assert result.stats.model_calls == {"plan": 1, "arguments": 2}
        notes = [e.content for e in of_type(sink.events, EventType.REFLECTION)]
        assert any("a third computation decides" in note for note in notes)
        # The third draw is sampled at the corrected plan's temperature: a greedy one repeats.
        assert llm.calls[2][1].sampling is not None
        assert llm.calls[2][1].sampling.temperature == SMALL.strategy.retry_temperature


async def test_three_computations_that_differ_fail_the_step_and_a_corrected_plan_follows() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": [
                plan_reply([code_step("s1", "return 3 * 12 + 7;")]),
                plan_reply([code_step("s2", "return 36 - 7;")]),  # one operation
            ],
            "arguments": [
                "```javascript\nreturn 3 * 12 - 7;\n```",  # 29: disagrees with the plan's 43
                "```javascript\nreturn 12 - 7;\n```",  # 5: agrees with neither
                "```javascript\nreturn 36 - 7;\n```",  # agrees with the corrected plan's 29
            ],
        }
    )
    agent, sink = make_agent(llm, config=CONFIG)

    result = await agent.task(QUESTION)

    assert result.state is AgentState.COMPLETED and result.answer == "29"
    failed = [e for e in of_type(sink.events, EventType.STEP_FAILED) if "disagree" in e.content]
    assert len(failed) == 1
    assert (
        all(f"gave {n}" in failed[0].content for n in (43, 29)) and "a third 5" in failed[0].content
    )
    # After a disagreement, the corrected plan's number is computed again though its code
    # does one operation.
    assert result.stats.model_calls == {"plan": 2, "arguments": 3}


async def test_when_every_draw_disagrees_the_run_fails_and_says_why() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": [
                plan_reply([code_step("s1", "return 3 * 12 + 7;")]),
                plan_reply([code_step("s2", "return 3 * 12 - 17;")]),
            ],
            "arguments": [f"```javascript\nreturn {n} - 1;\n```" for n in (30, 6, 31, 32)],
        }
    )
    agent, _ = make_agent(llm, config=CONFIG)

    result = await agent.task(QUESTION)

    assert result.state is AgentState.FAILED
    assert "disagree" in (result.error or "") and "gave 19" in (result.error or "")


async def test_a_second_draw_that_fails_leaves_the_first_result_standing() -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([code_step("s1", "return 3 * 12 - 7;")]),
            "arguments": "```javascript\nreturn eggs - 7;\n```",  # fails: eggs is not defined
        }
    )
    no_repair = TWICE.model_copy(update={"code_repair": False})
    agent, _ = make_agent(llm, config=CONFIG.model_copy(update={"strategy": no_repair}))

    result = await agent.task(QUESTION)

    assert result.state is AgentState.COMPLETED and result.answer == "29"


async def test_code_of_one_operation_is_not_computed_again() -> None:
    llm = ScriptedLLM.replaying({"plan": plan_reply([code_step("s1", "return 6 * 7;")])})
    agent, _ = make_agent(llm, config=CONFIG)

    result = await agent.task("Use JavaScript to compute 6 times 7.")

    assert result.answer == "42" and result.stats.model_calls == {"plan": 1}


def test_operations_count_operators_and_calls_outside_strings() -> None:
    assert operations("return 6 * 7;") == 1
    assert operations("return 3 * 12 - 7;") == 2
    assert operations("return Math.pow(2, 10);") == 1
    assert operations("return '1+2+3' + 'x';") == 0  # signs in strings, strings joined
    assert operations("print(sum([4, 8, 15]) / 3)") == 2


async def test_a_result_that_is_not_a_number_is_not_computed_again() -> None:
    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([code_step("s1", "return 'stressed'.split('').reverse().join('');")])}
    )
    agent, _ = make_agent(llm, config=CONFIG)

    result = await agent.task("Reverse 'stressed'.")

    assert result.answer == "desserts" and result.stats.model_calls == {"plan": 1}


def test_numbers_compare_as_computed_numbers() -> None:
    assert lone_number(" 29 ") == 29 and lone_number('"-3.5"') == -3.5
    assert lone_number("1e3") == 1000
    assert lone_number("29 eggs") is None and lone_number("[1, 2]") is None
    assert lone_number("nan") is None
    assert same_number(0.1 + 0.2, 0.3) and same_number(37.800000000000004, 37.8)
    assert same_number(24.725, 24.73) and not same_number(24.7, 24.73)
    assert not same_number(29, 43)


def test_a_result_is_handed_over_only_where_it_is_the_answer() -> None:
    """A page's text where a number was declared, or a remote tool's page or listing, goes to
    the answer call; a number, or a short record such as a time server's, is the answer."""
    from agent_py.core.execution import StepOutcome
    from agent_py.core.plan import AnswerKind, StepSchema
    from agent_py.core.rescues import MATERIAL_CHARS, handed_over
    from agent_py.core.tool import ToolResult

    def one(text: str) -> list[StepOutcome]:
        step = StepSchema(step_id="s1", step_goal="go", tool_name="t", input="x")
        return [StepOutcome(step, "t1", ToolResult(text))]

    page = "Contents of http://127.0.0.1:8000/menu.html: | Tomato soup | 4.50 |"
    assert handed_over(one("7.25"), AnswerKind.NUMBER, remote=True) == "7.25"
    assert handed_over(one(page), AnswerKind.NUMBER, remote=True) is None
    assert handed_over(one(page), AnswerKind.DATE_TIME, remote=True) == page
    long_page = page + " | Lemonade | 2.80 |" * (MATERIAL_CHARS // 10)
    assert handed_over(one(long_page), AnswerKind.TEXT, remote=True) is None
    assert handed_over(one(long_page), AnswerKind.TEXT, remote=False) == long_page
    # A short page of several lines is material too (seen: a menu handed over for the cost
    # of an order, a notice in English for a question in Chinese); a record in JSON is not.
    short_page = "Contents of http://127.0.0.1:8000/notice.html:\n## Hours\n\nOpen at 9:00."
    assert handed_over(one(short_page), AnswerKind.TEXT, remote=True) is None
    assert handed_over(one(short_page), AnswerKind.TEXT, remote=False) == short_page
    record = '{\n  "timezone": "Asia/Tokyo",\n  "datetime": "2026-12-03T10:45:08+09:00"\n}'
    assert handed_over(one(record), AnswerKind.DATE_TIME, remote=True) == record


async def test_a_yes_or_no_is_computed_again_however_short_its_code() -> None:
    # Seen: "Is 221 a prime number?" planned as `return 221 % 1 === 0;`, and true reported.
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([code_step("s1", "return 221 % 1 === 0;")], answer="yes_no"),
            "arguments": [
                "```javascript\nfor (let d = 2; d * d <= 221; d++) if (221 % d === 0) "
                "return false;\nreturn true;\n```",
                "```javascript\nreturn [2, 3, 13].every((d) => 221 % d !== 0);\n```",
            ],
        }
    )
    agent, _ = make_agent(llm, config=CONFIG)

    result = await agent.task("Is 221 a prime number?")

    assert result.state is AgentState.COMPLETED and result.answer == "false"
    assert result.stats.model_calls == {"plan": 1, "arguments": 2}


def test_values_compare_as_booleans_or_as_numbers() -> None:
    assert lone_value("true") is True and lone_value(" False ") is False
    assert lone_value("1") == 1.0 and lone_value("yes") is None
    assert same_value(True, True) and not same_value(True, 1.0) and not same_value(False, 0.0)
    assert same_value(2.0, 2.5) is False and same_value(0.30000000000000004, 0.3)
