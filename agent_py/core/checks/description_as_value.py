"""A tool argument that is the parameter's own description (``"IANA timezone name (e.g.,
'America/New_York')"`` as the timezone): the plan copied the schema's guidance as the value.
A description is guidance, never a value; the arguments call fills the parameter instead."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agent_py.core.checks.base import Check, Seen, Stage

# A value that stands inside the description and is at least this share of it is copied from
# it (an example value the description names, 'America/New_York', may be the right one).
MIN_COPIED_SHARE = 0.5
_SPACE = re.compile(r"\s+")


def _plain(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()


def _copied(value: str, description: str) -> bool:
    given, described = _plain(value), _plain(description)
    return bool(described) and (
        given == described
        or (len(given) >= MIN_COPIED_SHARE * len(described) and given in described)
    )


def described_not_given(
    schema: Mapping[str, Any], arguments: Mapping[str, Any], tool_description: str = ""
) -> str | None:
    """The first property of ``arguments`` whose string value is its description in
    ``schema``, or the tool's own ``tool_description`` (whole, or a copied piece of it), as
    the reason; else None."""
    properties = schema.get("properties") or {}
    for name, value in arguments.items():
        spec = properties.get(name)
        if not isinstance(value, str) or not isinstance(spec, dict):
            continue
        for whose, description in (
            ("the parameter's", str(spec.get("description") or "")),
            ("the tool's", tool_description),
        ):
            if _copied(value, description):
                return (
                    f"the value of {name} is {whose} description ({value[:80]!r}), not a "
                    f"value: fill in {name} from the task"
                )
    return None


def run(seen: Seen) -> str | None:
    if seen.tool is None or seen.arguments is None:
        return None
    return described_not_given(seen.tool.input_schema, seen.arguments, seen.tool.description)


CHECK = Check(
    name="description_as_value",
    stage=Stage.CALL,
    catches="an argument that copies its parameter's description from the tool's schema",
    run=run,
)
