"""Reading plans and reflections from model replies."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import plan_reply, step

from agent_py.core.parsing import (
    PlanParseError,
    ReplyParseError,
    RethinkStatus,
    clean_answer,
    extract_json,
    extract_tag,
    parse_plan,
    parse_rethink,
    split_thinking,
)
from agent_py.core.plan import PlanSchema, StepSchema, TaskSchema

PLAN_JSON = plan_reply([step("s1", "echo", {"text": "x"})], wrap=False)


@pytest.mark.parametrize(
    "reply",
    [
        f"<plan>{PLAN_JSON}</plan>",
        f"<think>Let me plan. {{not json}}</think>\n<plan>{PLAN_JSON}</plan>",
        f"Sure! Here is the plan:\n```json\n{PLAN_JSON}\n```\nHope it helps.",
        f"<plan>\n```json\n{PLAN_JSON}\n```\n</plan>",
        f"<plan>{PLAN_JSON}</plan> trailing chatter {{ with braces",
        f"<plan>{PLAN_JSON}",  # closing tag cut off
        PLAN_JSON,
        json.dumps(json.loads(PLAN_JSON)["tasks"]),  # a bare task list
    ],
)
def test_plans_are_found_in_untidy_replies(reply: str) -> None:
    plan = parse_plan(reply)
    assert [s.step_id for s in plan.steps()] == ["s1"]
    assert plan.tasks[0].steps[0].arguments == {"text": "x"}


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("no plan at all", "no JSON object found"),
        ('<plan>{"tasks": [{"task_id": "t1", "task_goal": "g", "steps": [', "cut off"),
        ('<plan>{"tasks": [{"task_id": "t1", "task_goal": "a goal that never e', "cut off"),
        ("<plan>{'tasks': []}</plan>", "invalid JSON"),
        ('<plan>{"tasks": []}</plan>', "tasks: List should have at least 1 item"),
        ('<plan>{"steps": []}</plan>', "tasks: Field required"),
        ("<plan>42</plan>", "no JSON object found"),
        ("<plan>[1, 2]</plan>", "tasks.0"),
        ("<plan>" + "[" * 5000 + "</plan>", "nested too deeply"),
    ],
)
def test_unusable_plans_give_the_documented_error(reply: str, reason: str) -> None:
    with pytest.raises(PlanParseError) as caught:
        parse_plan(reply)
    assert reason in caught.value.reason


def test_repeated_step_ids_get_fresh_ids_and_the_first_keeps_its_own() -> None:
    reply = plan_reply([step("s1", "a"), step("s1", "b")], [step("s2", "c"), step("s1", "d")])
    plan = parse_plan(reply)
    assert [(s.step_id, s.tool_name) for s in plan.steps()] == [
        ("s1", "a"),
        ("s3", "b"),
        ("s2", "c"),
        ("s4", "d"),
    ]


def test_a_plan_built_with_duplicate_ids_is_invalid() -> None:
    task = TaskSchema(
        task_id="t1",
        task_goal="g",
        steps=[StepSchema(step_id="s1", step_goal="a", tool_name="x")] * 2,
    )
    with pytest.raises(ValueError, match="used twice"):
        PlanSchema(tasks=[task])


def test_numeric_ids_are_accepted_as_text() -> None:
    data = json.loads(PLAN_JSON)
    data["tasks"][0]["task_id"] = 1
    data["tasks"][0]["steps"][0]["step_id"] = 7
    plan = parse_plan(json.dumps(data))
    assert plan.tasks[0].task_id == "1" and plan.steps()[0].step_id == "7"


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.text(),
        st.text(alphabet='<>{}[]":,plan/thinkstatus0123 \n`json', max_size=200),
        st.builds(lambda a, b: a + PLAN_JSON[: len(b)] + b, st.text(max_size=20), st.text()),
    )
)
def test_parse_plan_returns_a_plan_or_the_documented_error(text: str) -> None:
    try:
        result = parse_plan(text)
    except PlanParseError as exc:
        assert isinstance(exc.reason, str) and exc.reason
    else:
        assert isinstance(result, PlanSchema)


def _tag_by_regex(text: str, tag: str) -> str | None:
    match = re.search(rf"<{tag}>(.*?)(?:</{tag}>|$)", text, re.DOTALL | re.IGNORECASE)
    return match.group(1).strip() if match else None


_TAG_PIECES = st.one_of(
    st.sampled_from(["<plan>", "</plan>", "<PLAN>", "</Plan>", "<plan", "plan>", "\n", " "]),
    st.sampled_from(["İ", "ß", "ﬁ", "Σ", "K"]),  # lower case longer, or special in regexes
    st.text(max_size=8),
)


@given(st.lists(_TAG_PIECES, max_size=10).map("".join))
@settings(max_examples=400)
def test_extract_tag_reads_the_first_tag_in_any_case_as_a_regex_would(text: str) -> None:
    assert extract_tag(text, "plan") == _tag_by_regex(text, "plan")


def test_extract_tag_examples() -> None:
    assert extract_tag("a <Plan> x </PLAN> <plan>y</plan>", "plan") == "x"
    assert extract_tag("<status>done", "status") == "done"  # the close cut off
    assert extract_tag("İ<final>ok</final>", "final") == "ok"  # lower() would shift indices
    assert extract_tag("no tag here", "final") is None


def test_split_thinking_takes_only_a_leading_block() -> None:
    assert split_thinking(" <think>a</think> B") == ("B", "a")
    assert split_thinking("<THINK>cut while thinking") == ("", "cut while thinking")
    explained = "Qwen3 writes its reasoning in a <think> block, closed by </think>, first."
    assert split_thinking(explained) == (explained, "")
    assert split_thinking("<think>a</think>B <think>c</think>") == ("B <think>c</think>", "a")


_REPLY_PIECES = st.one_of(
    st.sampled_from(["<think>", "</think>", "<THINK>", " ", "\n", "answer", "<plan>"]),
    st.text(max_size=12),
)


@given(st.lists(_REPLY_PIECES, max_size=12).map("".join))
@settings(max_examples=400)
def test_a_reply_is_never_shortened_except_by_a_leading_think_block(text: str) -> None:
    reply, thinking = split_thinking(text)
    if text.lstrip().lower().startswith("<think>"):
        assert len(reply) + len(thinking) <= len(text)
        assert reply == "" or text.rstrip().endswith(reply)
    else:
        assert (reply, thinking) == (text.strip(), "")


def test_extract_json_prefers_a_fenced_block() -> None:
    assert extract_json('say {"a": 1}\n```json\n{"b": 2}\n```') == {"b": 2}
    with pytest.raises(ReplyParseError, match="cut off"):
        extract_json('{"a": ')


def test_rethink_replies() -> None:
    assert parse_rethink("<status>continue</status>").status is RethinkStatus.CONTINUE
    done = parse_rethink("<think>ok</think><status>done</status><final>**42**</final>")
    assert (done.status, done.final) == (RethinkStatus.DONE, "**42**")
    changed = parse_rethink("<status>changed</status><plan>" + PLAN_JSON + "</plan>")
    assert changed.plan is not None and changed.plan.steps()[0].step_id == "s1"
    assert parse_rethink("<final>inferred done</final>").status is RethinkStatus.DONE
    assert parse_rethink(f"<plan>{PLAN_JSON}</plan>").status is RethinkStatus.CHANGED


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I think we are fine", "no <status>"),
        ("<status>maybe</status>", "unknown status 'maybe'"),
        ("<status>done</status>", "needs the answer in <final>"),
        ("<status>changed</status><plan>{}</plan>", "tasks: Field required"),
    ],
)
def test_unreadable_reflections_say_why(reply: str, reason: str) -> None:
    with pytest.raises(ReplyParseError) as caught:
        parse_rethink(reply)
    assert reason in caught.value.reason


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("<final>Paris</final>", "Paris"),
        ("<status>done</status><final>Bonjour</final>", "Bonjour"),
        ("```markdown\nThe answer is **42**.\n```", "The answer is **42**."),
        ("```\n36\n```", "36"),
        ("<answer>36</answer>", "36"),
        ("<think>hm</think>The result is 5.", "The result is 5."),
        # The rethink prompt's label for the answer, copied in front of it.
        ("<status>done</status><final>the answer for the user: 150</final>", "150"),
        ("The answer for the user - Paris", "Paris"),
        ("The answer is 150.", "The answer is 150."),
        # A fence of code, or a fence inside the answer, is the answer's own.
        ("```javascript\nreturn 1;\n```", "```javascript\nreturn 1;\n```"),
        ("Here:\n```js\nx\n```", "Here:\n```js\nx\n```"),
    ],
)
def test_an_answer_loses_the_markup_of_our_reply_formats(reply: str, answer: str) -> None:
    assert clean_answer(reply) == answer
