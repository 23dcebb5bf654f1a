"""The real-task suite: tasks with machine-checkable answers, and the checks.

Three splits live beside this module, in the same form: ``tasks.json``, the tuning split (tiers
small and full), on which prompts, switches and checks may be chosen (it holds the first
held-out split's tasks too), and two sealed held-out splits, written before the changes they
are reported for and never used to choose anything: ``heldout-v2.json``, tasks of kinds
written outside the suite, and ``heldout-files.json``, tasks on the user's files and on web
pages. Scores are reported per split. A task's ``files`` (name to text) are what its run's
workspace holds, and nothing else (an empty workspace without them). A task with a
``follow_up`` is two turns of one session: the follow-up needs the first turn's result, and
``expect`` judges the follow-up.

A task names the MCP servers its page gets (``servers``: ``atlas``, the suite's own, by
default; ``time``, ``fetch`` and ``git`` are the MCP project's reference servers, see
:mod:`agent_py.evals.reference_servers`). A file may give fixtures beside its tasks: ``site``,
pages by path that the suite serves on loopback, and ``repo``, commits of a git repository it
makes; a task's questions and scripts name them as ``{{site}}`` (the pages' base URL, no
trailing slash) and ``{{repo}}`` (the repository's absolute path), filled in when it runs
(:meth:`EvalTask.filled`).

A task's ``expect`` says what a right outcome meets; every check given must hold:

- ``state``: ``completed`` (the default) or ``failed``; a failed run must give a reason;
- ``number``: the answer contains this number (``42`` passes "The result is 42.");
- ``contains`` / ``contains_exact``: every string appears (case-insensitive / exact case);
- ``any``: at least one string appears (case-insensitive);
- ``not_contains``: none appears (case-insensitive);
- ``regex``: the pattern is found (case-insensitive);
- ``words``: ``[min, max]`` words;
- ``language``: the answer is written in this language: ``es``, ``fr``, ``de`` judged by
  common words, ``zh`` and ``ja`` by script (most letters Han, and no kana, for ``zh``; kana
  among mostly Han and kana letters for ``ja``);
- ``clock``: the answer states the current time in this IANA zone (``Asia/Tokyo``), within
  ``CLOCK_TOLERANCE`` of the run (14:15, 2:15 PM, 14:15:42, an ISO time, 14时15分, 下午2点15分,
  14時15分...).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from datetime import time as clock_time
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

TASKS_FILE = Path(__file__).with_name("tasks.json")
HELD_OUT_FILE = Path(__file__).with_name("heldout-v2.json")
HELD_OUT_FILES_FILE = Path(__file__).with_name("heldout-files.json")

ServerName = Literal["atlas", "time", "fetch", "git"]
"""The MCP servers the suite can give a task's page: its own (``atlas``) and the MCP
project's reference servers."""
PLACEHOLDERS = ("site", "repo")
"""The ``{{name}}`` placeholders a task may use, one a fixture of its file."""
CLOCK_TOLERANCE = timedelta(minutes=5)


class Tier(StrEnum):
    SMALL = "small"
    FULL = "full"


class Split(StrEnum):
    TUNING = "tuning"
    HELD_OUT = "held-out"
    HELD_OUT_FILES = "held-out-files"


class Expect(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state: Literal["completed", "failed"] = "completed"
    number: float | None = None
    contains: list[str] = []
    contains_exact: list[str] = []
    any: list[str] = []
    not_contains: list[str] = []
    regex: str | None = None
    words: tuple[int, int] | None = None
    language: Literal["es", "fr", "de", "zh", "ja"] | None = None
    clock: str | None = None
    """An IANA zone: the answer states the current time there."""

    @field_validator("clock")
    @classmethod
    def _known_zone(cls, zone: str | None) -> str | None:
        if zone is not None:
            try:
                ZoneInfo(zone)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(f"no time zone named {zone!r} (an IANA name)") from None
        return zone


class FollowUp(BaseModel):
    """The second turn of a two-turn task: asked in the same session, after the first."""

    model_config = ConfigDict(extra="forbid")

    question: str
    script: dict[str, Any] = {}


class SitePage(BaseModel):
    """One page the suite serves: its Content-Type and its body."""

    model_config = ConfigDict(extra="forbid")

    type: str
    body: str


class RepoCommit(BaseModel):
    """One commit of the fixture repository: its author (and committer), its date (ISO 8601,
    for both), its message, and the files it writes (path: whole text)."""

    model_config = ConfigDict(extra="forbid")

    author: str
    email: str
    date: datetime
    message: str
    files: dict[str, str]

    @field_validator("date")
    @classmethod
    def _with_offset(cls, date: datetime) -> datetime:
        if date.utcoffset() is None:
            raise ValueError("a commit's date needs its UTC offset")
        return date

    @field_validator("files")
    @classmethod
    def _inside(cls, files: dict[str, str]) -> dict[str, str]:
        for name in files:
            path = PurePosixPath(name)
            if path.is_absolute() or ".." in path.parts or not path.parts:
                raise ValueError(f"a file's path must lie inside the repository: {name!r}")
        return files


class RepoSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    commits: list[RepoCommit] = Field(min_length=1)


class Fixtures(BaseModel):
    """What a file gives its tasks besides their questions: ``site``, the pages (by path)
    served on loopback as ``{{site}}``; ``repo``, the git repository made as ``{{repo}}``."""

    model_config = ConfigDict(extra="forbid")

    site: dict[str, SitePage] = {}
    repo: RepoSpec | None = None

    @field_validator("site")
    @classmethod
    def _paths(cls, site: dict[str, SitePage]) -> dict[str, SitePage]:
        bad = [path for path in site if not path.startswith("/")]
        if bad:
            raise ValueError(f"a page's path starts with '/': {', '.join(bad)}")
        return site

    def has(self, name: str) -> bool:
        """Whether the fixture that ``{{name}}`` stands for is given."""
        return bool(self.site) if name == "site" else self.repo is not None


_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")


class EvalTask(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9-]+$")
    tier: Tier
    kind: str
    question: str
    follow_up: FollowUp | None = None
    """A second turn that needs the first one's result; ``expect`` judges its answer."""
    servers: list[ServerName] = Field(["atlas"], min_length=1)
    """The MCP servers the task's page gets (and no others)."""
    files: dict[str, str] = {}
    """The files (name to text) the run's workspace holds, and no others."""
    expect: Expect
    script: dict[str, Any] = {}
    """Replies of the scripted test engine that does this task right (plumbing only)."""
    split: Split = Split.TUNING
    """Set by the loader from the file the task came from."""
    fixtures: Fixtures = Field(default_factory=Fixtures, repr=False)
    """Set by the loader: the fixtures of the file the task came from."""

    @model_validator(mode="after")
    def _placeholders_known(self) -> EvalTask:
        unknown = self.placeholders() - set(PLACEHOLDERS)
        if unknown:
            raise ValueError(f"unknown placeholders: {', '.join(sorted(unknown))}")
        return self

    def _texts(self) -> list[str]:
        """Every text a placeholder may stand in: the questions and the scripts' strings."""
        texts = [self.question, *_strings(self.script)]
        if self.follow_up is not None:
            texts += [self.follow_up.question, *_strings(self.follow_up.script)]
        return texts

    def placeholders(self) -> set[str]:
        """The ``{{name}}`` placeholders the task uses."""
        return {m.group(1) for text in self._texts() for m in _PLACEHOLDER.finditer(text)}

    def filled(self, values: Mapping[str, str]) -> EvalTask:
        """This task with each ``{{name}}`` of its questions and scripts replaced by
        ``values[name]`` (as text: a value goes into a plan's JSON as it is). Raises
        ValueError when a placeholder has no value."""
        missing = self.placeholders() - set(values)
        if missing:
            raise ValueError(f"{self.id}: no value for {', '.join(sorted(missing))}")

        def fill(value: Any) -> Any:
            if isinstance(value, str):
                return _PLACEHOLDER.sub(lambda m: values[m.group(1)], value)
            if isinstance(value, dict):
                return {key: fill(item) for key, item in value.items()}
            if isinstance(value, list):
                return [fill(item) for item in value]
            return value

        follow_up = self.follow_up
        if follow_up is not None:
            follow_up = FollowUp(question=fill(follow_up.question), script=fill(follow_up.script))
        return self.model_copy(
            update={
                "question": fill(self.question),
                "script": fill(self.script),
                "follow_up": follow_up,
            }
        )


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


class Verdict(BaseModel):
    passed: bool
    why: str = ""
    errored: bool = False
    """The engine (or our code) failed under the task: nothing about the answer was judged,
    and it never counts as a pass, whatever the task expected."""


def load_fixtures(path: Path) -> Fixtures:
    """The fixtures of the task file at ``path`` (its top-level ``site`` and ``repo``)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    return Fixtures.model_validate({key: raw[key] for key in ("site", "repo") if key in raw})


def load_tasks(
    path: Path = TASKS_FILE,
    *,
    tier: Tier = Tier.FULL,
    only: list[str] | None = None,
    split: Split | None = None,
) -> list[EvalTask]:
    """The tasks of ``path`` in ``tier`` (small is part of full), or those named in ``only``,
    each with the file's fixtures. ``split``: what the file holds (default: the held-out
    split of ``HELD_OUT_FILE`` or ``HELD_OUT_FILES_FILE``, else tuning)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    if split is None:
        sealed = {HELD_OUT_FILE.resolve(): Split.HELD_OUT}
        sealed[HELD_OUT_FILES_FILE.resolve()] = Split.HELD_OUT_FILES
        split = sealed.get(path.resolve(), Split.TUNING)
    fixtures = load_fixtures(path)
    tasks = [
        EvalTask.model_validate({**item, "split": split, "fixtures": fixtures})
        for item in raw["tasks"]
    ]
    ids = [task.id for task in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: task ids must be unique")
    for task in tasks:
        absent = sorted(name for name in task.placeholders() if not fixtures.has(name))
        if absent:
            raise ValueError(f"{path}: {task.id} uses {{{{{absent[0]}}}}}, which the file lacks")
    if only:
        unknown = sorted(set(only) - set(ids))
        if unknown:
            raise ValueError(f"unknown task ids: {', '.join(unknown)}")
        return [task for task in tasks if task.id in only]
    return [task for task in tasks if tier is Tier.FULL or task.tier is Tier.SMALL]


def load_suite(
    split: Split | Literal["all"] = Split.TUNING,
    *,
    tier: Tier = Tier.SMALL,
    only: list[str] | None = None,
    tasks_file: Path = TASKS_FILE,
    held_out_file: Path = HELD_OUT_FILE,
    held_out_files_file: Path = HELD_OUT_FILES_FILE,
) -> list[EvalTask]:
    """The suite's tasks: the tuning split's ``tier``, a held-out split (all of it), or
    every split (``all``); ``only`` picks tasks by id from the splits asked for."""
    files = {
        Split.TUNING: tasks_file,
        Split.HELD_OUT: held_out_file,
        Split.HELD_OUT_FILES: held_out_files_file,
    }
    chosen = list(Split) if split == "all" else [Split(split)]
    tasks: list[EvalTask] = []
    for part in chosen:
        every = load_tasks(files[part], tier=Tier.FULL, split=part)
        if only is None:
            whole = part is not Split.TUNING or tier is Tier.FULL  # held-out has no tiers
            tasks += [t for t in every if whole or t.tier is Tier.SMALL]
        else:
            tasks += [t for t in every if t.id in only]
    ids = [task.id for task in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError("task ids must be unique across the splits")
    unknown = sorted(set(only or ()) - set(ids))
    if unknown:
        raise ValueError(f"unknown task ids: {', '.join(unknown)}")
    return tasks


_NUMBER = re.compile(r"-?\d+(?:[.,]\d+)?")
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
# Common words; a text is in a language when it uses at least two of them, and more than
# it uses English ones.
_MARKERS: dict[str, set[str]] = {
    "en": {"the", "and", "is", "are", "of", "to", "in", "it", "with", "a", "on", "our"},
    "es": {"el", "la", "los", "las", "es", "y", "de", "en", "un", "una", "que", "nos", "su"},
    "fr": {
        "le",
        "la",
        "les",
        "est",
        "et",
        "de",
        "un",
        "une",
        "des",
        "du",
        "nous",
        "en",
        "je",
        "vous",
        "pour",
        "votre",
        "avec",
    },
    "de": {
        "der",
        "die",
        "das",
        "ist",
        "und",
        "ein",
        "eine",
        "nicht",
        "mit",
        "uns",
        "den",
        "dem",
        "im",
        "vom",
        "von",
        "zu",
        "zum",
        "auf",
        "für",
        "wird",
        "sich",
        "auch",
        "oder",
        "bis",
        "wir",
    },
}


def check(
    task: EvalTask,
    state: str,
    answer: str,
    error: str | None,
    failure: str | None = None,
    *,
    during: tuple[datetime, datetime] | None = None,
) -> Verdict:
    """Whether a run of ``task`` that ended in ``state`` with ``answer`` / ``error`` is right.
    ``failure``: the failed run's cause (``FailureCause``); an engine failure or a bug of ours
    is an error, never a right refusal. ``during``: when the run started and ended (aware
    datetimes; default: now), what ``clock`` judges the answer's time by."""
    expect = task.expect
    if state == "failed" and failure in ("engine", "internal"):
        return Verdict(passed=False, errored=True, why=f"{failure} error: {error or 'no reason'}")
    if state != expect.state:
        detail = f": {error}" if error else ""
        return Verdict(passed=False, why=f"ended {state}, expected {expect.state}{detail}")
    if expect.state == "failed":
        if not (error or "").strip():
            return Verdict(passed=False, why="failed without saying why")
        return Verdict(passed=True)
    asked = task.question + (f" {task.follow_up.question}" if task.follow_up else "")
    problems = _answer_problems(expect, answer, asked)
    if expect.clock is not None:
        now = datetime.now(UTC)
        problems += _clock_problems(expect.clock, answer, during or (now, now))
    return Verdict(passed=not problems, why="; ".join(problems))


# An answer that names the expected number among more than this many others (not in the
# question), and not as its last number (its conclusion), is a guess among many, such as a model
# counting 1, 2, 3... on and on, not an answer.
MAX_OTHER_NUMBERS = 3


def _answer_problems(expect: Expect, answer: str, asked: str = "") -> list[str]:
    lower = answer.lower()
    problems: list[str] = []
    if expect.number is not None:
        problems += _number_problems(expect.number, answer, asked)
    problems += [f"no {s!r}" for s in expect.contains if s.lower() not in lower]
    problems += [f"no {s!r} (exact case)" for s in expect.contains_exact if s not in answer]
    if expect.any and not any(s.lower() in lower for s in expect.any):
        problems.append(f"none of {expect.any}")
    problems += [f"has {s!r}" for s in expect.not_contains if s.lower() in lower]
    if expect.regex and not re.search(expect.regex, answer, re.IGNORECASE):
        problems.append(f"does not match /{expect.regex}/")
    if expect.words is not None:
        count = len(answer.split())
        low, high = expect.words
        if not low <= count <= high:
            problems.append(f"{count} words, expected {low}-{high}")
    if expect.language and not _in_language(answer, expect.language):
        problems.append(f"not in {expect.language}")
    return problems


def _number_problems(expected: float, answer: str, asked: str) -> list[str]:
    numbers = _numbers(answer)
    if not any(_same(n, expected) for n in numbers):
        return [f"no {expected:g} in the answer"]
    named = _numbers(asked)
    others = {n for n in numbers if not _same(n, expected) and n not in named}
    if len(others) > MAX_OTHER_NUMBERS and not _same(numbers[-1], expected):
        return [f"{expected:g} among {len(others)} other numbers: a guess, not an answer"]
    return []


def _numbers(text: str) -> list[float]:
    """The numbers in ``text``, in order (a decimal comma read as a point)."""
    values = []
    for match in _NUMBER.finditer(text.replace("\u2212", "-")):
        try:
            values.append(float(match.group(0).replace(",", ".")))
        except ValueError:
            continue
    return values


def _same(value: float, expected: float) -> bool:
    return math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-6)


def _in_language(text: str, language: str) -> bool:
    if language in ("zh", "ja"):
        return _in_script(text, language)
    words = {word.lower() for word in _WORD.findall(text)}
    hits = len(words & _MARKERS[language])
    return hits >= 2 and hits > len(words & _MARKERS["en"])


def _in_script(text: str, language: str) -> bool:
    """Chinese: most letters are Han, and none is kana. Japanese: kana, among letters that
    are mostly Han and kana."""
    letters = han = kana = 0
    for char in text:
        if not char.isalpha():
            continue
        letters += 1
        code = ord(char)
        if 0x3040 <= code <= 0x30FF or 0x31F0 <= code <= 0x31FF or 0xFF66 <= code <= 0xFF9D:
            kana += 1
        elif code in (0x3005, 0x3007) or unicodedata.name(char, "").startswith("CJK "):
            han += 1
    if language == "zh":
        return kana == 0 and 2 * han > letters
    return kana > 0 and 2 * (han + kana) > letters


# Times of day as answers write them: 14:15, 2:15 PM, 14:15:42, 2026-12-02T06:15:42+09:00,
# 14h15, 14时15分, 14點15分, 下午2点15分, 14時15分, 2点半; a part of the day may stand before
# either form. An offset (+09:00) is not a time.
_DAY_PART = r"(?P<part>上午|早上|凌晨|中午|下午|晚上|傍晚|夜里|午前|午後|夜)?\s*"
_LATIN_TIME = re.compile(
    _DAY_PART + r"(?<![\d:+\-])(?P<h>\d{1,2})[:h](?P<m>\d{2})(?::(?P<s>\d{2}))?(?!\d)"
    r"(?:\s*(?P<ap>[ap])\.?\s?m\b)?",
    re.IGNORECASE,
)
_CJK_TIME = re.compile(
    _DAY_PART + r"(?<!\d)(?P<h>\d{1,2})\s*[时時点點]\s*(?:(?P<m>\d{1,2})\s*分?|(?P<half>半))?"
)
_MORNING = {"a", "上午", "早上", "凌晨", "午前"}
_EVENING = {"p", "下午", "晚上", "傍晚", "夜里", "午後", "夜"}


def _stated_times(answer: str) -> list[clock_time]:
    """Every time of day the answer may state; a 12-hour time without AM or PM as both."""
    text = unicodedata.normalize("NFKC", answer)  # full-width digits and colons
    found: list[clock_time] = []
    for pattern in (_LATIN_TIME, _CJK_TIME):
        for match in pattern.finditer(text):
            groups = match.groupdict()
            minute = 30 if groups.get("half") else int(groups.get("m") or 0)
            second = int(groups.get("s") or 0)
            part = (groups.get("ap") or "").lower() or groups.get("part")
            if minute > 59 or second > 59:
                continue
            found += [clock_time(hour, minute, second) for hour in _hours(int(groups["h"]), part)]
    return found


def _hours(hour: int, part: str | None) -> list[int]:
    """The hours (0-23) that ``hour`` may be, said in ``part`` of the day (or in none)."""
    if hour > 24:
        return []
    if hour > 12:
        return [hour % 24]
    if part in _MORNING:
        return [hour % 12]
    if part in _EVENING:
        return [hour % 12 + 12]
    if part == "中午":  # noon: 12点 is 12, 1点 is 13
        return [12 if hour == 12 else hour + 12]
    return [hour % 12, hour % 12 + 12]


def _clock_problems(zone: str, answer: str, during: tuple[datetime, datetime]) -> list[str]:
    """None when the answer states a time of day that the clock in ``zone`` showed during
    the run, give or take ``CLOCK_TOLERANCE`` (across midnight too)."""
    where = ZoneInfo(zone)
    start, end = (moment.astimezone(where).replace(tzinfo=None) for moment in during)
    low, high = start - CLOCK_TOLERANCE, end + CLOCK_TOLERANCE
    stated = _stated_times(answer)
    for said in stated:
        for day in {low.date(), high.date()}:
            if low <= datetime.combine(day, said) <= high:
                return []
    shown = f"{start:%H:%M} in {zone}"
    if not stated:
        return [f"no time of day in the answer (it was {shown})"]
    minutes = int(CLOCK_TOLERANCE.total_seconds() // 60)
    return [f"no time within {minutes} minutes of {shown}"]
