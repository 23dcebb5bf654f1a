"""Checks on model output before it counts as an answer.

Small models under a chat template they do not know, or past their depth, answer with our
own instructions: the system prompt, a tool description, a plan's JSON. Such a reply is
not an answer, and a run that ends with one has failed. The check is textual: a run of
``ECHO_WORDS`` consecutive words that also stands in one of the instructions the model
was given, or plan JSON. The same models also fall into a loop, one phrase written again and
again until the token budget ends it; that is not an answer either (``repeats_itself``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ECHO_WORDS = 5  # "You are a careful writer" is five words
# A loop: at least LOOP_MIN_WORDS words whose three-word runs are mostly the same few. A text's
# runs of three are nearly all distinct; a song's refrain keeps about half; a phrase written
# over and over keeps a handful.
LOOP_MIN_WORDS = 12
LOOP_MAX_DISTINCT = 0.3
_WORD = re.compile(r"\w+", re.UNICODE)
_PLAN_JSON = re.compile(r'"(step_id|task_id|tool_name)"\s*:|<plan>|</?status>', re.IGNORECASE)


def _shingles(text: str, size: int = ECHO_WORDS) -> set[tuple[str, ...]]:
    words = [word.lower() for word in _WORD.findall(text)]
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


def echoes_instructions(text: str, instructions: Iterable[str], *, allowed: str = "") -> bool:
    """True when ``text`` repeats a run of words from ``instructions`` (the user's own
    words, ``allowed``, excepted) or contains plan JSON."""
    if _PLAN_JSON.search(text):
        return True
    said = _shingles(text)
    if not said:
        return False
    said -= _shingles(allowed)
    return any(said & _shingles(instruction) for instruction in instructions)


def repeats_itself(text: str) -> bool:
    """True when ``text`` is one short phrase over and over: at least ``LOOP_MIN_WORDS`` words,
    and at most ``LOOP_MAX_DISTINCT`` of its three-word runs distinct."""
    words = [word.lower() for word in _WORD.findall(text)]
    if len(words) < LOOP_MIN_WORDS:
        return False
    runs = [tuple(words[i : i + 3]) for i in range(len(words) - 2)]
    return len(set(runs)) <= LOOP_MAX_DISTINCT * len(runs)


_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def before_it_starts_over(text: str) -> str | None:
    """The paragraphs of ``text`` before the first one that repeats an earlier paragraph
    (compared by their words), or None when none repeats.

    For a reply that the token budget ended: a small model that finishes its piece often
    writes it again, paragraph by paragraph, until the budget runs out."""
    paragraphs = [part.strip() for part in _PARAGRAPH_BREAK.split(text.strip())]
    seen: set[tuple[str, ...]] = set()
    for index, paragraph in enumerate(paragraphs):
        words = tuple(word.lower() for word in _WORD.findall(paragraph))
        if words and words in seen:
            return "\n\n".join(paragraphs[:index])
        seen.add(words)
    return None


def unusable_answer(answer: str, instructions: Iterable[str], question: str) -> str | None:
    """Why ``answer`` cannot be given to the user as the run's answer, or None."""
    if not answer.strip():
        return "the model's answer is empty"
    if echoes_instructions(answer, instructions, allowed=question):
        return "the model's answer repeats the agent's instructions instead of answering"
    if repeats_itself(answer):
        return "the model's answer repeats one phrase over and over instead of answering"
    return None
