"""The reply of the calls that write text (the writer, ``llm_generator``, and the answer call):
the text itself, or the reply format's ``<cannot>`` tag and why, when the model cannot do what
it was asked.

A refusal is that tag, a status of the reply format, not a phrase: "I'm sorry, I can't" was
read from English words and missed every other language. The text stays free (no JSON around
it): a small model writing inside a JSON string did not know where to stop."""

from __future__ import annotations

import re
from dataclasses import dataclass

CANNOT_TAG = "<cannot>"
_CANNOT = re.compile(r"\A\s*<cannot>\s*(.*?)\s*(?:</cannot>\s*)?\Z", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class Written:
    text: str
    cannot: bool = False
    """The model said it cannot do it; ``text`` says why."""


def read_written(reply: str) -> Written:
    """The text of a written reply, or why the model cannot do it (a reply that opens with
    ``<cannot>``)."""
    cannot = _CANNOT.match(reply)
    if cannot is None:
        return Written(reply)
    return Written(cannot.group(1) or "no reason given", cannot=True)
