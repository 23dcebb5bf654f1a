"""Checks on model output before it counts as an answer.

Small models under a chat template they do not know, or past their depth, answer with our
own instructions: the system prompt, a tool description, a plan's JSON. Such a reply is
not an answer, and a run that ends with one has failed. The check is textual: a run of
``ECHO_WORDS`` consecutive words that also stands in one of the instructions the model
was given, or plan JSON. The same models also fall into a loop, one phrase written again and
again until the token budget ends it; that is not an answer either (``repeats_itself``).

A tool's result handed to the user as it is must come from a call that was given the task's
data: a number or quoted text of the question that no tool call of the run was given
(``data_left_out``) means the result is about something else, as when `2 * 20` stands for
"2 to the power of 10".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

ECHO_WORDS = 5  # "You are a careful writer" is five words
# A loop: at least LOOP_MIN_WORDS words whose three-word runs are mostly the same few. A text's
# runs of three are nearly all distinct; a song's refrain keeps about half; a phrase written
# over and over keeps a handful.
LOOP_MIN_WORDS = 12
LOOP_MAX_DISTINCT = 0.3
_WORD = re.compile(r"\w+", re.UNICODE)
LOOP_MIN_CHARS = 40
_PHRASE_LOOP = re.compile(r"(.{2,80}?)\1{3,}", re.DOTALL)
_LETTER = re.compile(r"[^\W\d_]")
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


def _words_only(text: str) -> str:
    """``text``'s words and digits alone, without case: "Thank you." is "thankyou"."""
    return "".join(_WORD.findall(text.casefold()))


def gives_instruction_back(text: str, instruction: str, question: str) -> bool:
    """True when a writer's ``text`` is its ``instruction`` again, apart from case and
    punctuation ("Thank you." for "thank you"), and that instruction is words of the user's
    ``question`` (the text to work on, cut out of it) but not the whole question (where the
    same words may answer it). An instruction that is not in the question is the plan's own
    text ("Bonjour" for "Translate 'good morning' into French"), already the work done."""
    given = [word.casefold() for word in _WORD.findall(instruction)]
    asked = [word.casefold() for word in _WORD.findall(question)]
    if not given or given == asked or _words_only(text) != "".join(given):
        return False
    return any(asked[i : i + len(given)] == given for i in range(len(asked) - len(given) + 1))


def repeats_itself(text: str) -> bool:
    """True when ``text`` is one short phrase over and over: at least ``LOOP_MIN_WORDS`` words,
    and at most ``LOOP_MAX_DISTINCT`` of its three-word runs distinct; or, written without
    spaces between the repeats ("Good morningGood morningGood morning…", where words run
    into each other), at least ``LOOP_MIN_CHARS`` characters that are one phrase with a letter
    in it four times or more, then at most the start of it once more (cut by the length
    limit)."""
    words = [word.lower() for word in _WORD.findall(text)]
    if len(words) >= LOOP_MIN_WORDS:
        runs = [tuple(words[i : i + 3]) for i in range(len(words) - 2)]
        if len(set(runs)) <= LOOP_MAX_DISTINCT * len(runs):
            return True
    stripped = text.strip()
    loop = _PHRASE_LOOP.match(stripped)
    if len(stripped) < LOOP_MIN_CHARS or loop is None or not _LETTER.search(loop.group(1)):
        return False
    return loop.group(1).startswith(stripped[loop.end() :])


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


_PLACEHOLDER = re.compile(r"[\s.…_]+")


def unusable_answer(answer: str, instructions: Iterable[str], question: str) -> str | None:
    """Why ``answer`` cannot be given to the user as the run's answer, or None."""
    if not answer.strip():
        return "the model's answer is empty"
    if _PLACEHOLDER.fullmatch(answer):  # a reply format's "…" copied ("[]" is an answer)
        return f"the model's answer is a placeholder, not an answer: {answer.strip()[:40]!r}"
    if echoes_instructions(answer, instructions, allowed=question):
        return "the model's answer repeats the agent's instructions instead of answering"
    if repeats_itself(answer):
        return "the model's answer repeats one phrase over and over instead of answering"
    if asks_back(answer, question):
        return "the model's answer is the question again, not an answer to it"
    return None


def asks_back(answer: str, question: str) -> bool:
    """True when ``answer`` is ``question`` again, apart from case, spacing and punctuation,
    or all but a tenth of it (an echo, in any language). A short question may be answered by
    its own words ("hello" with "Hello."): it takes one of 8 letters or more (as many as a
    short Chinese question has characters)."""
    said, asked = _letters_only(answer), _letters_only(question)
    if not said or len(asked) < 8:
        return False
    shorter, longer = sorted((said, asked), key=len)
    return shorter in longer and len(shorter) >= 0.9 * len(longer)


def _letters_only(text: str) -> str:
    """``text`` without case, spaces or punctuation (what an echo keeps of it)."""
    return "".join(char for char in text.casefold() if char.isalnum())


# The data a question gives: quoted text, web addresses, and numbers, those of dates and times
# too (2024, 03 and 01 of "2024-03-01": code that counts months from 0 writes 2, one off).
# Numbers in fractions, versions, ordinals, percentages or names ("3/4", "1.2.3", "3rd", "15%",
# "ES6", "COVID-19") are not taken: code may rightly write them another way (0.75, 0.15).
_QUOTED = re.compile(
    r"(?<!\w)'([^'\n]{1,200})'(?!\w)|\"([^\"\n]{1,200})\"|\u201c([^\u201d\n]{1,200})\u201d"
    r"|\u2018([^\u2019\n]{1,200})\u2019(?!\w)"
)
WEB_ADDRESS = re.compile(r"(?<![A-Za-z0-9])https?://[^\s'\"<>()]+", re.IGNORECASE)
"""A web address (http or https), in any language's text: structure, not words (also
right after a word of a script without spaces: 根据https://…)."""
_ADDRESS_CHARS = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&*+,;=%]+")
"""The characters of an address (RFC 3986, less the quote and parentheses)."""


def web_addresses(text: str) -> list[str]:
    """The web addresses ``text`` holds, each as far as an address's characters go (others,
    such as a script's letters, are percent-encoded in one) and without the mark that ends a
    sentence after it ("…/tea.html?", "…/notice.html上的通知")."""
    found = []
    for match in WEB_ADDRESS.finditer(text):
        head = _ADDRESS_CHARS.match(match.group())
        address = head.group().rstrip(".,;:!?") if head else ""
        if address.count("/") >= 2 and address not in found:
            found.append(address)
    return found


_STANDS_ALONE = r"(?<![\w.,/])(?<![^\W\d]-)"  # not within a fraction, version or name
_ENDS = r"(?![\w%/]|[.,]\d)"
_NUMBER = re.compile(rf"{_STANDS_ALONE}(?:\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.\d+)?{_ENDS}")
# A number as code or text writes it: with digit groups (1,200 or 1_200), or commas between
# list items (3,8,15).
_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_PLAIN = re.compile(r"\d[\d_]*(?:\.\d+)?")


def _value(number: str) -> float:
    return float(number.replace(",", "").replace("_", ""))


def question_data(question: str) -> tuple[list[str], list[str]]:
    """The quoted texts and web addresses, and the stand-alone numbers, of ``question``."""
    quoted = [next(part for part in match.groups() if part) for match in _QUOTED.finditer(question)]
    bare = _QUOTED.sub(" ", question)
    quoted += [match.group().rstrip(".,;:!?") for match in WEB_ADDRESS.finditer(bare)]
    bare = WEB_ADDRESS.sub(" ", bare)
    numbers = list(dict.fromkeys(match.group() for match in _NUMBER.finditer(bare)))
    return [text for text in dict.fromkeys(quoted) if text.strip()], numbers


def _held(number: float, values: set[float]) -> bool:
    """Whether ``values`` hold ``number``: a whole number also as one off, since code counts
    from 0 and writes a bound as < or <= ("below 8" as `n < 8` or the list up to 7)."""
    if number in values:
        return True
    return number.is_integer() and bool({number - 1, number + 1} & values)


def text_values(value: Any) -> Iterable[str]:
    """The strings of ``value`` (tool arguments), and its numbers as text, at any depth."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from text_values(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from text_values(item)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield repr(value)


def data_left_out(question: str, calls: Iterable[Any]) -> list[str]:
    """The quoted texts, addresses and numbers of ``question`` that none of ``calls`` (tool
    arguments) holds: a text as it is, ignoring case; a number as a number of the same value
    (``_held``)."""
    quoted, numbers = question_data(question)
    given = "\n".join(text for call in calls for text in text_values(call))
    folded = given.casefold()
    values = {_value(m.group()) for pattern in (_GROUPED, _PLAIN) for m in pattern.finditer(given)}
    missing = [f"'{text}'" for text in quoted if text.casefold() not in folded]
    missing += [number for number in numbers if not _held(_value(number), values)]
    return missing
