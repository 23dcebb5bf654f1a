"""Checks on model output before it counts as an answer.

Small models under a chat template they do not know, or past their depth, answer with our
own instructions: the system prompt, a tool description, a plan's JSON. Such a reply is
not an answer, and a run that ends with one has failed. The check is textual: a run of
``ECHO_WORDS`` consecutive words that also stands in one of the instructions the model
was given, or plan JSON.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ECHO_WORDS = 5  # "You are a careful writer" is five words
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


def unusable_answer(answer: str, instructions: Iterable[str], question: str) -> str | None:
    """Why ``answer`` cannot be given to the user as the run's answer, or None."""
    if not answer.strip():
        return "the model's answer is empty"
    if echoes_instructions(answer, instructions, allowed=question):
        return "the model's answer repeats the agent's instructions instead of answering"
    return None
