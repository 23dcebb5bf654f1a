"""The one ``${step_id}`` syntax: a plan step's input or arguments name an earlier step's result.

References live in strings at any depth of a JSON value (``{"text": "${s1} and ${s2}"}``).
This module finds them, renames them and resolves them; what a result is, and what a missing
or failed one means, is the caller's (``agent_py.core.step_action``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from typing import Any

REFERENCE = re.compile(r"\$\{([A-Za-z0-9_.-]+)\}")


def _map_strings(value: Any, change: Callable[[str], Any]) -> Any:
    """``value`` with ``change`` applied to every string in it, at any depth."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [_map_strings(item, change) for item in value]
    if isinstance(value, dict):
        return {key: _map_strings(item, change) for key, item in value.items()}
    return value


def find(value: Any) -> list[str]:
    """The ids referred to in ``value``, each once, in order."""
    found: list[str] = []
    _map_strings(value, lambda text: found.extend(m.group(1) for m in REFERENCE.finditer(text)))
    return list(dict.fromkeys(found))


def rename(value: Any, renamed: Mapping[str, str]) -> Any:
    """``value`` with each reference to a key of ``renamed`` pointing to its new id."""
    if not renamed:
        return value
    return _map_strings(
        value,
        lambda text: REFERENCE.sub(
            lambda m: "${" + renamed.get(m.group(1), m.group(1)) + "}", text
        ),
    )


def resolve(
    value: Any,
    known: Collection[str],
    *,
    whole: Callable[[str], Any],
    spliced: Callable[[str], str],
) -> Any:
    """``value`` with each reference to an id in ``known`` replaced.

    A string that is exactly one reference becomes ``whole(id)`` (so a list stays a list);
    elsewhere ``spliced(id)`` is put in its place. References to other ids stay as they are:
    a JavaScript template literal such as ``${words.length}`` is not one.
    """

    def change(text: str) -> Any:
        single = REFERENCE.fullmatch(text)
        if single and single.group(1) in known:
            return whole(single.group(1))
        return REFERENCE.sub(
            lambda m: spliced(m.group(1)) if m.group(1) in known else m.group(0), text
        )

    return _map_strings(value, change)
