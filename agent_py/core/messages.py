"""A chat message, and how long it survives when a prompt is fitted to the context window.

Both the engines (``llm.py``) and the fitting (``budget.py``) speak of messages, so the type
lives here, below both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from enum import IntEnum
from typing import Literal, NotRequired, TypedDict


class Keep(IntEnum):
    """How long a message survives fitting; the lowest goes first (see budget.py)."""

    DIGEST = 1
    HISTORY = 2
    TOOLS = 3
    CURRENT = 4


class Message(TypedDict):
    role: Literal["system", "user", "assistant"]
    content: str
    keep: NotRequired[Keep]
    """How long the message survives fitting to the context window."""
    compact: NotRequired[Callable[[], list[str]]]
    """Makes shorter stand-ins for ``content``, each shorter than the last, for that fitting;
    called only when a prompt does not fit (see :func:`stand_ins`)."""


def stand_ins(make: Callable[[], list[str]]) -> Callable[[], list[str]]:
    """A message's ``compact``: made at most once, and only when a prompt does not fit (most
    do, and each stand-in costs a render of the prompt)."""
    return functools.cache(make)
