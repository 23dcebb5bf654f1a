"""The reply of the calls that write text (the writer, ``llm_generator``, and the answer call):
the text itself, or the ``<cannot>`` tag and why, when the model says it cannot do what it was
asked.

A refusal is read from that tag, never from a phrase: "I'm sorry, I can't" was read from
English words and missed every other language. The prompts do not offer the tag (the 0.5B
model copied it onto right answers, "<cannot> thank you!"); a task that needs what the writer
lacks is declined by the plan (its ``needs``, the ``decline`` tool) or the rethink's status.
The text stays free (no JSON around it): a small model writing inside a JSON string did not
know where to stop."""

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
