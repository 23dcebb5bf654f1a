"""The real-task suite: tasks with machine-checkable answers, and the checks.

Two splits live beside this module, in the same form: ``tasks.json``, the tuning split (tiers
small and full), on which prompts, switches and checks may be chosen, and ``heldout.json``,
user-phrased tasks that name no tool, written before any tuning on the models they are
reported for and never used to choose anything. Scores are reported per split. A task with a
``follow_up`` is two turns of one session: the follow-up needs the first turn's result, and
``expect`` judges the follow-up. A task's ``expect`` says what a right outcome meets; every
check given must hold:

- ``state``: ``completed`` (the default) or ``failed``; a failed run must give a reason;
- ``number``: the answer contains this number (``42`` passes "The result is 42.");
- ``contains`` / ``contains_exact``: every string appears (case-insensitive / exact case);
- ``any``: at least one string appears (case-insensitive);
- ``not_contains``: none appears (case-insensitive);
- ``regex``: the pattern is found (case-insensitive);
- ``words``: ``[min, max]`` words;
- ``language``: the answer is written in this language (``es``, ``fr``, ``de``), judged
  by common words.
"""

from __future__ import annotations

import json
import math
import re
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TASKS_FILE = Path(__file__).with_name("tasks.json")
HELD_OUT_FILE = Path(__file__).with_name("heldout.json")


class Tier(StrEnum):
    SMALL = "small"
    FULL = "full"


class Split(StrEnum):
    TUNING = "tuning"
    HELD_OUT = "held-out"


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
    language: Literal["es", "fr", "de"] | None = None


class FollowUp(BaseModel):
    """The second turn of a two-turn task: asked in the same session, after the first."""

    model_config = ConfigDict(extra="forbid")

    question: str
    script: dict[str, Any] = {}


class EvalTask(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9-]+$")
    tier: Tier
    kind: str
    question: str
    follow_up: FollowUp | None = None
    """A second turn that needs the first one's result; ``expect`` judges its answer."""
    expect: Expect
    script: dict[str, Any] = {}
    """Replies of the scripted test engine that does this task right (plumbing only)."""
    split: Split = Split.TUNING
    """Set by the loader from the file the task came from."""


class Verdict(BaseModel):
    passed: bool
    why: str = ""
    errored: bool = False
    """The engine (or our code) failed under the task: nothing about the answer was judged,
    and it never counts as a pass, whatever the task expected."""


def load_tasks(
    path: Path = TASKS_FILE,
    *,
    tier: Tier = Tier.FULL,
    only: list[str] | None = None,
    split: Split | None = None,
) -> list[EvalTask]:
    """The tasks of ``path`` in ``tier`` (small is part of full), or those named in ``only``.
    ``split``: what the file holds (default: held-out for ``heldout.json``, else tuning)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    if split is None:
        split = Split.HELD_OUT if path.resolve() == HELD_OUT_FILE.resolve() else Split.TUNING
    tasks = [EvalTask.model_validate({**item, "split": split}) for item in raw["tasks"]]
    ids = [task.id for task in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: task ids must be unique")
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
) -> list[EvalTask]:
    """The suite's tasks: the tuning split's ``tier``, the held-out split (all of it), or
    both (``all``); ``only`` picks tasks by id from the splits asked for."""
    files = {Split.TUNING: tasks_file, Split.HELD_OUT: held_out_file}
    chosen = list(Split) if split == "all" else [Split(split)]
    tasks: list[EvalTask] = []
    for part in chosen:
        every = load_tasks(files[part], tier=Tier.FULL, split=part)
        if only is None:
            whole = part is Split.HELD_OUT or tier is Tier.FULL  # held-out has no tiers
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
    "fr": {"le", "la", "les", "est", "et", "de", "un", "une", "des", "du", "nous", "en"},
    "de": {"der", "die", "das", "ist", "und", "ein", "eine", "nicht", "mit", "uns", "den"},
}


def check(
    task: EvalTask, state: str, answer: str, error: str | None, failure: str | None = None
) -> Verdict:
    """Whether a run of ``task`` that ended in ``state`` with ``answer`` / ``error`` is right.
    ``failure``: the failed run's cause (``FailureCause``); an engine failure or a bug of ours
    is an error, never a right refusal."""
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
    words = {word.lower() for word in _WORD.findall(text)}
    hits = len(words & _MARKERS[language])
    return hits >= 2 and hits > len(words & _MARKERS["en"])
