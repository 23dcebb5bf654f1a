"""The checks folder (agent_py.core.checks): each check refuses what it names and passes the
rest, in any language, through the agent where a run shows it. Scripted model, real tools
(JavaScript runs in Node)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from support import make_agent, plan_reply, step

from agent_py import AgentConfig, AgentState, JavascriptExecutor, ScriptedLLM
from agent_py.core.checks import CHECKS, Seen, Stage
from agent_py.core.checks.computed_dropped import run as computed_dropped
from agent_py.core.checks.data_cut_short import pieces_of_quoted
from agent_py.core.checks.description_as_value import described_not_given
from agent_py.core.checks.grounded_arguments import arguments_from_nowhere
from agent_py.core.checks.made_up_numbers import made_up
from agent_py.core.checks.made_up_numbers import run as made_up_numbers
from agent_py.core.plan import AnswerKind, PlanSchema
from agent_py.core.profiles import FULL, SMALL
from agent_py.core.tool import ToolBase, ToolContext, ToolError, ToolResult
from agent_py.tools.node_runner import NodeRunner

ZONE = "IANA timezone name (e.g., 'America/New_York', 'Europe/London')."


class CurrentTime(ToolBase):
    """The shape of the MCP reference time server's get_current_time."""

    name = "time__get_current_time"
    description = "Get current time in a specific timezone."
    input_schema = {
        "type": "object",
        "properties": {"timezone": {"type": "string", "description": ZONE}},
        "required": ["timezone"],
    }
    remote = True

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.calls.append(arguments)
        if "e.g." in arguments["timezone"]:
            raise ToolError(f"Invalid timezone: {arguments['timezone']}")
        return ToolResult('{"timezone": "Asia/Tokyo", "datetime": "2026-12-02T06:15:42+09:00"}')


class Fetch(ToolBase):
    """The shape of the MCP reference fetch server's fetch: Markdown of a page."""

    name = "fetch__fetch"
    description = "Fetches a URL and gives its contents as Markdown."
    input_schema = {
        "type": "object",
        "properties": {"url": {"type": "string", "format": "uri", "description": "URL to fetch"}},
        "required": ["url"],
    }
    remote = True

    def __init__(self, page: str | None) -> None:
        self.page = page

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if self.page is None:
            raise ToolError(f"Failed to fetch {arguments['url']}: status code 404")
        return ToolResult(f"Contents of {arguments['url']}:\n{self.page}")


def test_the_table_names_each_check_once_with_its_stage() -> None:
    names = [check.name for check in CHECKS]
    assert len(names) == len(set(names))
    assert {check.stage for check in CHECKS} == set(Stage)
    for check in CHECKS:
        assert check.catches and (check.switch is None or hasattr(FULL.strategy, check.switch))


def test_the_tools_own_description_is_no_value_either() -> None:
    """Seen (the 0.5B model): the capital tool's input was 'The capital city of a country in
    the atlas.', its own description."""
    schema = {"type": "object", "properties": {"country": {"type": "string"}}}
    described = "The capital city of a country in the atlas."
    reason = described_not_given(schema, {"country": described}, described)
    assert reason is not None and "is the tool's description" in reason
    assert described_not_given(schema, {"country": "Sylvania"}, described) is None


@pytest.mark.parametrize(
    ("value", "refused"),
    [
        (ZONE, True),
        ("IANA timezone name (e.g., 'America/New_York'", True),  # a piece of it, cut
        ("Asia/Tokyo", False),
        ("America/New_York", False),  # an example's value may be the right one
    ],
)
def test_description_as_value_refuses_the_parameters_own_description(
    value: str, refused: bool
) -> None:
    reason = described_not_given(CurrentTime.input_schema, {"timezone": value})
    assert (reason is not None) is refused
    if refused:
        assert reason is not None and reason.startswith("the value of timezone is the")


async def test_a_description_given_as_the_input_gets_the_arguments_call_instead() -> None:
    """Seen (the 0.5B model, the reference time server): the plan's input for the timezone
    was the parameter's description, refused by the server, and re-planned the same."""
    plan = plan_reply(
        [{"step_id": "s1", "step_goal": "get the time", "tool_name": CurrentTime.name,
          "input": ZONE}],
        answer="date_time",
        needs="look_up",
    )  # fmt: skip
    llm = ScriptedLLM.replaying({"plan": plan, "arguments": '{"timezone": "Asia/Tokyo"}'})
    clock = CurrentTime()
    agent, _ = make_agent(llm, clock, config=AgentConfig(strategy=SMALL.strategy))

    result = await agent.task("東京は今何時ですか？")

    assert clock.calls == [{"timezone": "Asia/Tokyo"}]  # never the description
    assert result.state is AgentState.COMPLETED and "06:15" in result.answer


@pytest.mark.parametrize(
    ("arguments", "asked", "grounded"),
    [
        ({"source_timezone": "Asia/Tokyo", "time": "09:30", "target_timezone": "Asia/Kolkata"},
         "When it is 09:30 in Tokyo, what time is it in Kolkata?", True),
        ({"time": "2026-12-01T09:30:00"}, "Um 9:30 Uhr, bitte.", True),  # built from the task
        ({"timezone": "Asia/Shanghai"}, "现在上海几点了？", True),  # another script: implied
        ({"url": "http://127.0.0.1:8000/shop/kettle.html"},
         "How much is the kettle on http://127.0.0.1:8000/shop/kettle.html?", True),
        ({"a": 30.603752, "b": -121.388927}, "Use the delete tool to remove Zubrowka.", False),
        ({"a": 1, "b": 1}, "Book me a table for two at 8 tonight.", False),  # no digit words
        ({"country": "Genovia"}, "Capital of Freedonia?", False),
        ({"a": 19, "b": 24}, "把 19 和 24 加起来", True),
    ],
)  # fmt: skip
def test_grounded_arguments_takes_what_the_task_implies_and_refuses_what_it_does_not(
    arguments: dict[str, Any], asked: str, grounded: bool
) -> None:
    assert (arguments_from_nowhere(arguments, [asked]) == []) is grounded


@pytest.mark.parametrize(
    ("answer", "sources", "invented"),
    [
        ("The price of the product is $100.", ["How much is the kettle?"], ["100"]),
        ("Der Wasserkocher kostet 34,90 €.", ["Price: 34.90 EUR"], []),
        ("You need 3.6 litres.", ["4.5 m by 2.4 m", "3.5999999999999996"], []),
        ("一共 288 元", ["360元打八折", "288"], []),
        ("1. Athens\n2. Cairo\n3. Lima", ["Sort: Lima, Athens, Cairo", "Athens,Cairo,Lima"], []),
        ("It arrives at 17:25.", ["14:35 plus 2 h 50", "17:25"], []),
        ("Il reste 29 œufs.", ["3 boîtes de 12, 7 utilisés"], ["29"]),  # prose arithmetic
        ("About 1 of them", ["anything"], []),  # 0 and 1 are prose
        ('{"time_difference": "-3.5h"}', ["any"], []),  # a unit's name: never part of it
        ("It took 3.5 h", ["any"], ["3.5"]),
        ("Contents of http://127.0.0.1:8000/menu.html", ["Contents of 127.0.0.1:8000"], []),
        ("Version 2.4.1 is out", ["the news"], ["2.4.1"]),
        ("Order 1004 paid 63.10", ["order,amount\n1004,63.10"], []),  # a CSV row's cells
        ("It paid 4.10", ["order,amount\n1004,63.10"], ["4.10"]),
    ],
)
def test_made_up_numbers_are_those_no_source_holds(
    answer: str, sources: list[str], invented: list[str]
) -> None:
    assert made_up(answer, sources) == invented


def test_a_text_answer_is_not_held_to_its_numbers() -> None:
    seen = Seen(question="Write a story.", answer="In 1850, 3 sailors left.", kind=AnswerKind.TEXT)
    assert made_up_numbers(seen) is None
    assert made_up_numbers(Seen(question="Write a story.", answer="In 1850, 3 sailors left."))


def _plan_that(needs: str) -> PlanSchema:
    step = {"step_id": "s1", "step_goal": "go", "tool_name": "fetch"}
    return PlanSchema.model_validate(
        {"tasks": [{"task_id": "t1", "task_goal": "go", "needs": needs, "steps": [step]}]}
    )


def test_a_text_answer_to_a_plan_that_only_looks_up_is_held_to_its_numbers() -> None:
    """Seen (0.5B): a menu of 4.50 and 2.80 fetched, the plan declared text, and the answer
    "together they cost €1.25" completed. A plan that writes may still invent numbers."""
    menu = (ToolResult("| Tomato soup | 4.50 |\n| Lemonade | 2.80 |"),)
    seen = Seen(
        question="What do a tomato soup and two lemonades cost together?",
        results=menu,
        answer="Together they cost €1.25.",
        kind=AnswerKind.TEXT,
        plan=_plan_that("look_up"),
    )
    assert "1.25" in (made_up_numbers(seen) or "")
    assert made_up_numbers(replace(seen, answer="The soup costs 4.50.")) is None
    assert made_up_numbers(replace(seen, plan=_plan_that("write"))) is None


def test_a_date_answer_may_write_a_month_or_an_hour_as_its_number() -> None:
    """A page's "27 December" answered in Chinese is 12月27日; 14:00 is 2 PM."""
    page = ("It reopens on 27 December at 14:00.",)
    asked = "图书馆哪天重新开放？"
    dated = Seen(question=asked, answer="12月27日下午2点", kind=AnswerKind.DATE_TIME)
    assert made_up_numbers(replace(dated, results=tuple(ToolResult(p) for p in page))) is None
    number = replace(dated, answer="12 books", kind=AnswerKind.NUMBER, results=dated.results)
    assert made_up_numbers(number) is not None  # a count is not a calendar's part
    assert made_up_numbers(replace(dated, answer="12月28日")) is not None  # nor is another day


def test_computed_dropped_is_a_number_answer_holding_nothing_the_last_code_computed() -> None:
    """Seen (the 0.5B model): the code printed 0 for a column that is not there, and the
    answer took an order's amount from the file the run had read."""
    data = (ToolResult("order,amount\n1004,63.10\n"),)
    dropped = Seen(
        question="What is the total of the discount column in orders.csv?",
        results=data,
        answer="The total of the discount column is 63.10.",
        computed=ToolResult("stdout:\n0", data="0"),
        kind=AnswerKind.NUMBER,
    )
    reason = computed_dropped(dropped)
    assert reason is not None and "63.10" in reason and "'0'" in reason
    # What the code computed, in the answer's own words and rounding, with other numbers.
    kept = replace(dropped, computed=ToolResult("173.25000000000003", data=173.25000000000003))
    assert computed_dropped(replace(kept, answer="6 orders: 173.25 in all")) is None
    assert computed_dropped(replace(kept, answer="总额是 173,25")) is None
    # Not a number question, no code last, code that gave text, or only the task's numbers.
    assert computed_dropped(replace(dropped, kind=AnswerKind.TEXT)) is None
    assert computed_dropped(replace(dropped, computed=None)) is None
    assert computed_dropped(replace(dropped, computed=ToolResult("Lena", data="Lena"))) is None
    assert computed_dropped(replace(dropped, question="Is 1004 an order?", answer="1004")) is None


async def test_a_writer_that_stands_in_for_a_failed_fetch_is_not_the_answer() -> None:
    """Seen (the 0.5B model): the fetch failed, the re-plan handed the step to the writer,
    which wrote "The price of the product is $100.", and the run completed."""
    plans = iter(
        [
            plan_reply([step("s1", Fetch.name, {"url": "http://127.0.0.1:9/p"})],
                       answer="number", needs="look_up"),
            plan_reply([step("s2", "llm_generator", {"prompt": "Give the price."})],
                       answer="number", needs="write"),
        ]
    )  # fmt: skip
    llm = ScriptedLLM.replaying(
        {
            "plan": lambda messages, call: next(plans),
            "generate": "The price of the product is $100.",
            "rethink": "<status>done</status><final>The price of the product is $100.</final>",
            "answer": "The price is $100.",  # a sentence, where a number was declared
        }
    )
    from agent_py import LLMGenerator

    agent, _ = make_agent(
        llm, Fetch(None), LLMGenerator(), config=AgentConfig(strategy=SMALL.strategy)
    )
    result = await agent.task("What does the page http://127.0.0.1:9/p say the price is?")

    assert result.state is AgentState.FAILED
    assert result.error is not None and "the answer gives 100" in result.error


async def test_an_mcp_result_spliced_into_code_is_its_text() -> None:
    """Seen (the 1.5B model, the reference fetch server): ``${s1}`` of the page reached the
    next step's code as an object, not as the page's text. A page with quotes and newlines
    spliced into a string literal must stay one string."""
    page = 'Kettle "Steel" 1.7 L\nIt\'s 34.90 EUR\n'
    plan = plan_reply(
        [step("s1", Fetch.name, {"url": "http://127.0.0.1:9/kettle"})],
        [step("s2", "javascript_execute",
              {"code": "return '${s1}'.split('\\n').length + ':' + ${s1}.includes('34.90');"})],
        answer="text",
    )  # fmt: skip
    llm = ScriptedLLM.replaying({"plan": plan})
    tools = [Fetch(page), JavascriptExecutor(NodeRunner(), timeout_s=10)]
    agent, _ = make_agent(llm, *tools, config=AgentConfig(strategy=SMALL.strategy))

    result = await agent.task("How many lines has http://127.0.0.1:9/kettle?")

    assert result.state is AgentState.COMPLETED, result.error
    assert result.answer == "4:true"  # the text's 3 newlines: 4 pieces, found inside it


@pytest.mark.parametrize(
    ("code", "question", "cut"),
    [
        ("return 'ressed'.split('').reverse().join('');",
         "Use JavaScript to reverse the string 'stressed'.", [("ressed", "stressed")]),
        ("return 'stressed'.split('').reverse().join('');",
         "Use JavaScript to reverse the string 'stressed'.", []),
        ("return 'stressed'.includes('ress');", "Does 'stressed' hold 'ress'?", []),
        ("return \"Welt\".length;", "Wie lang ist „Hallo Welt“ oder \"Hallo Welt\"?",
         [("Welt", "Hallo Welt")]),
        ("return 'ab'.length;", "Count 'abc'.", []),  # too short to be a copied piece
    ],
)  # fmt: skip
def test_data_cut_short_is_a_piece_of_a_quoted_text_never_used_whole(
    code: str, question: str, cut: list[tuple[str, str]]
) -> None:
    assert pieces_of_quoted(code, question) == cut
