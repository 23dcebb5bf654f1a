"""The real-task suite's data and checks: the task files have what the issues ask of them
(issue 8's tuning split, the sealed held-out split v2 with its servers and fixtures), and each
check passes right answers and fails wrong ones."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from agent_py.cli.terminal import SetupError
from agent_py.evals.runner import SUITE_SERVERS, SuiteReport, TaskReport, all_pages
from agent_py.evals.suite import (
    HELD_OUT_FILE,
    HELD_OUT_FILES_FILE,
    EvalTask,
    Expect,
    FollowUp,
    Split,
    Tier,
    Verdict,
    check,
    load_fixtures,
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
    assert len(tasks) >= 70
    assert {t.id for t in small} < {t.id for t in tasks}
    assert all(t.tier is Tier.SMALL for t in small)
    kinds = {t.kind for t in tasks}
    assert {"arithmetic", "string", "date", "list", "mcp", "chain", "text", "impossible"} <= kinds
    chains = [t for t in tasks if t.kind == "chain"]
    assert len(chains) >= 2 and all("${s1}" in str(t.script["plan"]) for t in chains)
    assert any(t.expect.state == "failed" for t in small)
    for task in tasks:
        assert task.script.get("plan"), f"{task.id} has no scripted plan"


FIRST_HELD_OUT = [
    "percent-of",
    "sale-price",
    "yearly-savings",
    "hours-seconds",
    "celsius-fahrenheit",
    "days-between",
    "christmas-weekday",
    "age-on-date",
    "prime-no",
    "prime-yes",
    "largest-in-list",
    "sort-words",
    "sort-by-length",
    "reverse-word",
    "count-words",
    "receipt-total",
    "extract-emails",
    "translate-spanish",
    "translate-german",
    "blog-title",
    "atlas-capital",
    "atlas-letters",
    "cannot-book",
    "cannot-price",
    "cannot-text",
    "followup-half",
]
"""The first held-out split (heldout.json), which joined the tuning split when v2 came."""


def test_the_held_out_split_is_v2_sealed_and_apart_from_the_tuning_split() -> None:
    held_out = load_suite(Split.HELD_OUT)
    tuning = load_tasks(tier=Tier.FULL)
    assert HELD_OUT_FILE.name == "heldout-v2.json"
    assert len(held_out) >= 40
    assert held_out == load_tasks(HELD_OUT_FILE)
    assert all(t.split is Split.HELD_OUT for t in held_out)
    assert all(t.split is Split.TUNING for t in tuning)
    assert not {t.id for t in held_out} & {t.id for t in tuning}
    kinds = {t.kind for t in held_out}
    assert {"language", "word-problem", "impossible", "real-server", "pasted-data"} <= kinds
    assert {"writing", "follow-up"} <= kinds
    assert sum(t.expect.state == "failed" for t in held_out) >= 2
    assert any(t.follow_up for t in held_out)
    # Tasks in other languages than English: judged by the script of their questions.
    foreign = [t for t in held_out if re.search(r"[^\x00-\x7f]", t.question)]
    assert len(foreign) >= 12
    assert {t.expect.language for t in held_out} >= {"zh", "de"}
    for task in held_out:
        assert task.script.get("plan"), f"{task.id} has no scripted plan"
        if task.follow_up:
            assert task.follow_up.script.get("plan"), f"{task.id}'s follow-up has no plan"


def test_the_first_held_out_split_joined_the_tuning_split_at_its_end() -> None:
    tuning = load_tasks(tier=Tier.FULL)
    ids = [t.id for t in tuning]
    start = ids.index(FIRST_HELD_OUT[0])
    assert ids[start : start + len(FIRST_HELD_OUT)] == FIRST_HELD_OUT
    assert all(t.tier is Tier.FULL for t in tuning[start:])
    # After it, tuning tasks of the held-out split v2's kinds, on the suite's own pages.
    later = tuning[start + len(FIRST_HELD_OUT) :]
    assert {"language", "word-problem", "impossible", "real-server", "pasted-data"} <= {
        t.kind for t in later
    }
    assert {"time", "fetch"} <= {name for t in later for name in t.servers}
    assert all("site" not in t.placeholders() or t.fixtures.site for t in later)
    assert not (HELD_OUT_FILE.parent / "heldout.json").exists()
    # Both splits together, and a split's tasks by id.
    held_out = load_suite(Split.HELD_OUT)
    every = load_suite("all", tier=Tier.SMALL)
    files = load_suite(Split.HELD_OUT_FILES)
    small = load_tasks(tier=Tier.SMALL)
    assert [t.id for t in every] == [t.id for t in [*small, *held_out, *files]]
    picked = load_suite("all", only=["js-add", "percent-of", "zh-discount"])
    assert [(t.id, t.split) for t in picked] == [
        ("js-add", Split.TUNING),
        ("percent-of", Split.TUNING),
        ("zh-discount", Split.HELD_OUT),
    ]
    with pytest.raises(ValueError, match="unknown task ids: js-add"):
        load_suite(Split.HELD_OUT, only=["js-add"])


def test_the_files_held_out_split_is_sealed_apart_and_both_splits_have_file_and_page_tasks() -> (
    None
):
    files = load_suite(Split.HELD_OUT_FILES)
    tuning = load_tasks(tier=Tier.FULL)
    assert HELD_OUT_FILES_FILE.name == "heldout-files.json"
    assert files == load_tasks(HELD_OUT_FILES_FILE)
    assert all(t.split is Split.HELD_OUT_FILES for t in files)
    assert not {t.id for t in files} & {t.id for t in tuning}
    for split in (files, tuning):
        with_files = [t for t in split if t.files]
        assert len(with_files) >= 6 and any(t.expect.state == "failed" for t in with_files)
        pages = [t for t in split if "fetch_page" in planned_tools(t)]
        assert len(pages) >= 4 and all("{{site}}" in t.question for t in pages)


def planned_tools(task: EvalTask) -> set[str]:
    """The tools the task's scripted plans call."""
    plans = [task.script, *([task.follow_up.script] if task.follow_up else [])]
    tools = set()
    for script in plans:
        plan = json.loads(re.sub(r"^<plan>|</plan>$", "", script["plan"]))
        tools |= {step["tool_name"] for part in plan["tasks"] for step in part["steps"]}
    return tools


def test_every_task_names_known_servers_and_its_scripts_call_only_their_tools() -> None:
    called = set()
    for task in load_suite("all", tier=Tier.FULL):
        assert task.servers and set(task.servers) <= set(SUITE_SERVERS), task.id
        servers = {tool.split("__", 1)[0] for tool in planned_tools(task) if "__" in tool}
        assert servers <= set(task.servers), task.id
        called |= servers
    assert called == {"atlas", "time", "fetch", "git"}
    named = {name for task in load_suite(Split.HELD_OUT) for name in task.servers}
    assert named == {"atlas", "time", "fetch", "git"}


def test_placeholders_come_from_the_files_fixtures_and_are_filled_everywhere() -> None:
    fixtures = load_fixtures(HELD_OUT_FILE)
    assert "/shop/kettle.html" in fixtures.site and fixtures.repo is not None
    (task,) = load_tasks(HELD_OUT_FILE, only=["fetch-kettle-price"])
    assert task.placeholders() == {"site"} and task.fixtures == fixtures
    filled = task.filled({"site": "http://127.0.0.1:8123"})
    assert filled.question.endswith("http://127.0.0.1:8123/shop/kettle.html")
    assert '"url": "http://127.0.0.1:8123/shop/kettle.html"' in filled.script["plan"]
    assert "{{" not in str(filled.model_dump(exclude={"fixtures"}))
    assert "${s1}" in filled.script["plan"]  # a step's reference is not a placeholder
    (git,) = load_tasks(HELD_OUT_FILE, only=["git-last-author"])
    with pytest.raises(ValueError, match="no value for repo"):
        git.filled({"site": "http://127.0.0.1:8123"})
    follow = make_task().model_copy(
        update={"follow_up": FollowUp(question="and {{repo}}?", script={"plan": "{{repo}}"})}
    )
    assert follow.filled({"repo": "/r"}).follow_up == FollowUp(
        question="and /r?", script={"plan": "/r"}
    )


def test_a_file_without_the_fixture_its_task_uses_is_refused(tmp_path: Path) -> None:
    item = {"id": "a", "tier": "full", "kind": "x", "question": "read {{site}}/a", "expect": {}}
    lacking = tmp_path / "lacking.json"
    lacking.write_text(json.dumps({"tasks": [item]}))
    with pytest.raises(ValueError, match=r"a uses \{\{site\}\}, which the file lacks"):
        load_tasks(lacking)
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"tasks": [{**item, "question": "{{nope}}"}]}))
    with pytest.raises(ValueError, match="unknown placeholders: nope"):
        load_tasks(unknown)
    site = {"/a": {"type": "text/plain", "body": "A"}}
    given = tmp_path / "given.json"
    given.write_text(json.dumps({"tasks": [item], "site": site}))
    (task,) = load_tasks(given)
    assert task.fixtures.site["/a"].body == "A"


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
        # German that names none of the articles twice: its prepositions and verbs count.
        ({"language": "de"}, "Der Zug fährt um 9 Uhr vom Bahnhof ab.", True),
        ({"language": "de"}, "The train leaves the station at 9.", False),
        ({"language": "zh"}, "长城是中国古代修建的军事防御工程。", True),
        ({"language": "zh"}, "會議改到星期四。", True),
        ({"language": "zh"}, "The Great Wall is in China (长城).", False),
        ({"language": "zh"}, "長城は中国の古い城壁です。", False),
        ({"language": "ja"}, "長城は中国の古い城壁です。", True),
        ({"language": "ja"}, "ありがとうございます", True),
        ({"language": "ja"}, "长城是中国古代修建的军事防御工程。", False),
        ({"language": "ja"}, "Thank you (ありがとう) very much, my friend.", False),
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


NOW = datetime(2026, 12, 1, 21, 15, 42, tzinfo=UTC)
"""06:15:42 on December 2 in Tokyo, 05:15:42 in Shanghai, 22:15:42 in Paris."""


@pytest.mark.parametrize(
    ("zone", "answer", "passed"),
    [
        ("Asia/Tokyo", "It is 06:15 in Tokyo right now.", True),
        ("Asia/Tokyo", "6:15 AM", True),
        ("Asia/Tokyo", "6:15 a.m. on Wednesday", True),
        ("Asia/Tokyo", "It is 6:18.", True),
        ("Asia/Tokyo", "06:15:42", True),
        ("Asia/Tokyo", '{"timezone": "Asia/Tokyo", "datetime": "2026-12-02T06:15:42+09:00"}', True),
        ("Asia/Tokyo", "東京は今、午前6時15分です。", True),
        ("Asia/Tokyo", "6:15 PM", False),
        ("Asia/Tokyo", "It is 06:30 in Tokyo.", False),
        ("Asia/Tokyo", "2026-12-01T21:15:42+00:00", False),  # UTC's clock, not Tokyo's
        ("Asia/Tokyo", "It is early morning in Tokyo.", False),
        ("Asia/Shanghai", "现在上海是凌晨5点15分。", True),
        ("Asia/Shanghai", "5點15分", True),
        ("Asia/Shanghai", "5時15分", True),
        ("Asia/Shanghai", "现在是５：１５", True),
        ("Asia/Shanghai", "下午5点15分", False),
        ("Asia/Shanghai", "17时15分", False),
        ("Europe/Paris", "22:15", True),
        ("Europe/Paris", "Il est 22h15.", True),
        ("Europe/Paris", "10:15 PM", True),
        ("Europe/Paris", "晚上10点15分", True),
        ("Europe/Paris", "下午10点半", False),
        ("Europe/Paris", "10:15 AM", False),
    ],
)
def test_the_clock_check_passes_the_time_in_that_zone_and_fails_others(
    zone: str, answer: str, passed: bool
) -> None:
    verdict = check(make_task(clock=zone), "completed", answer, None, during=(NOW, NOW))
    assert verdict.passed is passed, verdict.why


@pytest.mark.parametrize(
    ("answer", "passed"),
    [
        ("00:01", True),
        ("23:55", True),
        ("12:02 AM", True),
        ("午前0時2分", True),
        ("23:50", False),
        ("00:10", False),
    ],
)
def test_the_clock_check_wraps_midnight(answer: str, passed: bool) -> None:
    late = datetime(2026, 12, 1, 23, 58, tzinfo=UTC)
    verdict = check(make_task(clock="UTC"), "completed", answer, None, during=(late, late))
    assert verdict.passed is passed, verdict.why


def test_the_clock_check_allows_the_whole_run_and_says_the_time_it_wanted() -> None:
    task = make_task(clock="Asia/Tokyo")
    started = datetime(2026, 12, 1, 21, 0, tzinfo=UTC)
    assert check(task, "completed", "06:00", None, during=(started, NOW)).passed
    verdict = check(task, "completed", "05:40", None, during=(started, NOW))
    assert verdict.why == "no time within 5 minutes of 06:00 in Asia/Tokyo"
    assert check(task, "completed", "nothing", None, during=(NOW, NOW)).why == (
        "no time of day in the answer (it was 06:15 in Asia/Tokyo)"
    )
    # Without a window the check reads the clock now.
    now = datetime.now(UTC).astimezone(ZoneInfo("Asia/Tokyo"))
    assert check(task, "completed", f"{now:%H:%M}", None).passed


def test_a_clock_zone_must_be_an_iana_zone() -> None:
    with pytest.raises(ValueError, match="no time zone named 'Mars/Olympus'"):
        Expect(clock="Mars/Olympus")


def test_the_pages_of_every_task_file_are_served_together_and_may_not_clash() -> None:
    menu = {"type": "text/html", "body": "<p>soup 4.50</p>"}
    notice = {"type": "text/html", "body": "<p>closed</p>"}
    together = all_pages([{"/menu.html": menu}, {"/notice.html": notice, "/menu.html": menu}])
    assert together == {"/menu.html": menu, "/notice.html": notice}
    with pytest.raises(SetupError, match=r"different pages at '/menu\.html'"):
        all_pages([{"/menu.html": menu}, {"/menu.html": notice}])
