"""The reply of the calls that write text (the writer, ``llm_generator``, and the answer call):
JSON under a schema whose ``status`` says whether the model could do what it was asked.

A refusal is that status, not a phrase: "I'm sorry, I can't" was read from English words, and
missed every other language. An engine without constrained decoding (the scripted test engine
among them) may answer with plain text; that is the text, done."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from agent_py.core.errors import ReplyParseError
from agent_py.core.parsing import extract_json

MAX_WRITTEN_CHARS = 8_000
DONE, CANNOT = "done", "cannot"


def written_schema() -> dict[str, Any]:
    """The schema of a written reply: the status first, then the text."""
    return {
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": [DONE, CANNOT]},
            "text": {"type": "string", "maxLength": MAX_WRITTEN_CHARS},
        },
        "required": ["status", "text"],
        "additionalProperties": False,
    }


def is_written_schema(schema: dict[str, Any] | None) -> bool:
    """Whether ``schema`` is a written reply's: free text inside it, sampled as free text."""
    return schema == written_schema()


@dataclass(frozen=True)
class Written:
    text: str
    cannot: bool = False
    """The model said it cannot do it; ``text`` says why."""


# A reply the token budget cut inside its text: the text so far is kept.
_CUT_TEXT = re.compile(r'"status"\s*:\s*"(\w+)"\s*,\s*"text"\s*:\s*"((?:[^"\\]|\\.)*)', re.DOTALL)


def read_written(reply: str) -> Written:
    """The text and status of a written reply; plain text is the text, done."""
    stripped = reply.strip()
    if not stripped.startswith("{"):
        return Written(reply)
    try:
        value = extract_json(stripped)
    except ReplyParseError:
        cut = _CUT_TEXT.search(stripped)
        if cut is None:
            return Written(reply)
        try:
            text = json.loads(f'"{cut.group(2)}"')
        except ValueError:
            text = cut.group(2)
        return Written(text, cannot=cut.group(1) == CANNOT)
    if not isinstance(value, dict) or not isinstance(value.get("text"), str):
        return Written(reply)
    return Written(value["text"], cannot=value.get("status") == CANNOT)
