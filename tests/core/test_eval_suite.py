"""The real-task suite's data and checks: the task file has what issue 8 asks of it, and
each check passes right answers and fails wrong ones."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_py.evals.runner import SuiteReport, TaskReport
from agent_py.evals.suite import (
    HELD_OUT_FILE,
    EvalTask,
    Expect,
    Split,
    Tier,
    Verdict,
    check,
    load_suite,
    load_tasks,
)


def make_task(**expect: object) -> EvalTask:
    return EvalTask(
        id="t", tier=Tier.SMALL, kind="x", question="q", expect=Expect.model_validate(expect)
    )


def test_the_suite_has_the_tasks_the_issue_asks_for() -> None:
    tasks = load_tasks(tier=Tier.FULL)
    small = load_tasks(tier=Tier.SMALL)
    assert len(tasks) >= 24
    assert {t.id for t in small} < {t.id for t in tasks}
    assert all(t.tier is Tier.SMALL for t in small)
    kinds = {t.kind for t in tasks}
    assert {"arithmetic", "string", "date", "list", "mcp", "chain", "text", "impossible"} <= kinds
    chains = [t for t in tasks if t.kind == "chain"]
    assert len(chains) >= 2 and all("${s1}" in str(t.script["plan"]) for t in chains)
    assert any(t.expect.state == "failed" for t in small)
    for task in tasks:
        assert task.script.get("plan"), f"{task.id} has no scripted plan"


def test_the_held_out_split_is_user_phrased_and_apart_from_the_tuning_split() -> None:
    held_out = load_suite(Split.HELD_OUT)
    tuning = load_tasks(tier=Tier.FULL)
    assert len(held_out) >= 20
    assert held_out == load_tasks(HELD_OUT_FILE)
    assert all(t.split is Split.HELD_OUT for t in held_out)
    assert all(t.split is Split.TUNING for t in tuning)
    assert not {t.id for t in held_out} & {t.id for t in tuning}
    # Phrased as a user phrases a task: no tool or server named.
    for task in held_out:
        asked = task.question + (task.follow_up.question if task.follow_up else "")
        assert not re.search(r"javascript|python|atlas|\btool\b|server", asked, re.I), task.id
        assert task.script.get("plan"), f"{task.id} has no scripted plan"
    kinds = {t.kind for t in held_out}
    assert {"arithmetic", "date", "list", "extract", "text", "mcp", "impossible"} <= kinds
    assert sum(t.expect.state == "failed" for t in held_out) >= 2
    assert any(t.follow_up for t in held_out)
    # Both splits together, and a split's tasks by id.
    both = load_suite("all", tier=Tier.SMALL)
    assert [t.id for t in both] == [t.id for t in load_tasks(tier=Tier.SMALL)] + [
        t.id for t in held_out
    ]
    picked = load_suite("all", only=["js-add", "percent-of"])
    assert [(t.id, t.split) for t in picked] == [
        ("js-add", Split.TUNING),
        ("percent-of", Split.HELD_OUT),
    ]
    with pytest.raises(ValueError, match="unknown task ids: js-add"):
        load_suite(Split.HELD_OUT, only=["js-add"])


def test_an_engine_failure_is_an_error_never_a_right_refusal() -> None:
    cannot = make_task(state="failed")
    for cause in ("engine", "internal"):
        verdict = check(cannot, "failed", "", "Failed to execute 'put' on 'Cache'", cause)
        assert not verdict.passed and verdict.errored
        assert verdict.why == f"{cause} error: Failed to execute 'put' on 'Cache'"
    # The task's own failure is judged as before.
    assert check(cannot, "failed", "", "no tool can book a table", "task").passed
    assert not check(make_task(number=42), "failed", "", "engine gone", "engine").passed


def test_the_summary_counts_wrong_answers_reported_completed_and_errors_per_split() -> None:
    def report(id: str, split: Split, state: str, verdict: Verdict) -> TaskReport:
        task = make_task().model_copy(update={"id": id, "split": split})
        return TaskReport(task, verdict, state, "x", None, None, {}, 0, 0, 2.0)

    suite = SuiteReport(engine="cpu", model="m")
    suite.reports = [
        report("a", Split.TUNING, "completed", Verdict(passed=True)),
        report("b", Split.TUNING, "completed", Verdict(passed=False, why="no 42")),
        report("c", Split.HELD_OUT, "failed", Verdict(passed=False, errored=True)),
        report("d", Split.HELD_OUT, "completed", Verdict(passed=False, why="no 7")),
    ]
    summary = suite.summary()
    assert (summary["passed"], summary["errors"], summary["wrong_completed"]) == (1, 1, 2)
    assert summary["tiers"]["small"] == {
        "passed": 1,
        "tasks": 2,
        "errors": 0,
        "wrong_completed": 1,
        "median_seconds": 2.0,
    }
    assert summary["splits"]["held-out"]["errors"] == 1
    assert summary["splits"]["held-out"]["wrong_completed"] == 1
    assert summary["tasks"]["c"]["errored"] is True


def test_load_tasks_picks_by_id_and_refuses_unknown_ids(tmp_path: Path) -> None:
    assert [t.id for t in load_tasks(only=["js-add", "js-multiply"])] == [
        "js-multiply",
        "js-add",
    ]
    with pytest.raises(ValueError, match="unknown task ids: nope"):
        load_tasks(only=["nope"])
    twice = tmp_path / "twice.json"
    item = '{"id": "a", "tier": "small", "kind": "x", "question": "q", "expect": {}}'
    twice.write_text(f'{{"tasks": [{item}, {item}]}}')
    with pytest.raises(ValueError, match="unique"):
        load_tasks(twice)


@pytest.mark.parametrize(
    ("expect", "answer", "passed"),
    [
        ({"number": 42}, "The result is 42.", True),
        ({"number": 42}, "420", False),
        ({"number": 43}, "43.0", True),
        ({"number": 0.5}, "It is 0,5", True),
        ({"contains": ["desserts"]}, "DESSERTS", True),
        ({"contains_exact": ["HELLO"]}, "hello", False),
        ({"any": ["ocean", "sea"]}, "The sea is calm.", True),
        ({"any": ["ocean", "sea"]}, "The lake is calm.", False),
        ({"not_contains": ["even"]}, "It is even.", False),
        ({"regex": r"1\D+3\D+5\D+9"}, "[1, 3, 5, 9]", True),
        ({"regex": r"1\D+3\D+5\D+9"}, "[9, 5, 3, 1]", False),
        ({"words": [3, 5]}, "one two", False),
        ({"words": [3, 5]}, "one two three", True),
        ({"language": "es"}, "El sol brilla en el cielo.", True),
        ({"language": "es"}, "The sun is in the sky.", False),
    ],
)
def test_each_check_passes_right_answers_and_fails_wrong_ones(
    expect: dict[str, object], answer: str, passed: bool
) -> None:
    assert check(make_task(**expect), "completed", answer, None).passed is passed


def test_a_task_that_cannot_be_done_must_fail_with_a_reason() -> None:
    task = make_task(state="failed")
    assert check(task, "failed", "", "every step failed: s1: no network").passed
    assert not check(task, "failed", "", "").passed
    verdict = check(task, "completed", "Here is the title: Example", None)
    assert not verdict.passed and verdict.why == "ended completed, expected failed"


def test_a_failed_run_of_a_doable_task_fails_and_says_why() -> None:
    verdict = check(make_task(number=42), "failed", "", "the model's answer is empty")
    assert not verdict.passed
    assert re.search("ended failed.*answer is empty", verdict.why)


@pytest.mark.parametrize(
    ("answer", "passed"),
    [
        ("Happy birthday, Maria! Wishing you a year full of joy.", True),
        ("Dear Maria, many happy returns of the day.", True),
        # SmolLM2's "greetings" that the length-and-name check alone let pass.
        ("Maria.toString()\n#Maria.toString()\n#Maria.toString()", False),
        ("Maria.toString() returns the string Maria with its first letter", False),
        ("return 'Happy birthday, Maria!';", False),
    ],
)
def test_the_birthday_greeting_must_be_a_greeting_not_code(answer: str, passed: bool) -> None:
    (task,) = load_tasks(only=["gen-greeting"])
    assert check(task, "completed", answer, None).passed is passed


@pytest.mark.parametrize(
    ("answer", "passed"),
    [
        ("5", True),
        ("The sentence 'the quick brown fox jumps' has 5 words.", True),
        ("Words: the (1), quick (2), brown (3), fox (4), jumps (5): 5", True),
        # SmolLM2's answer that held 5 only because it counted on and on.
        ('The original sentence is: "return [1, 3, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13', False),
        ("[5, 17, 23, 44, 61]", False),
    ],
)
def test_the_expected_number_among_many_others_is_a_guess(answer: str, passed: bool) -> None:
    (task,) = load_tasks(only=["py-words"])
    verdict = check(task, "completed", answer, None)
    assert verdict.passed is passed, verdict.why
    if not passed:
        assert "a guess, not an answer" in verdict.why


def test_numbers_from_the_question_do_not_count_against_the_answer() -> None:
    (task,) = load_tasks(only=["js-sum"])  # "sum the numbers 3, 8, 15 and 4"
    assert check(task, "completed", "3 + 8 + 15 + 4 = 30", None).passed
