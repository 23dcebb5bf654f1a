"""Prompt templates, kept as data files beside this module.

Templates use ``$name`` placeholders (``string.Template``) so JSON braces need no escaping;
unknown ``${...}`` such as the step references ``${s1}`` are left as they are.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from string import Template
from typing import Any


@cache
def _template(name: str) -> Template:
    text = resources.files(__name__).joinpath(f"{name}.md").read_text(encoding="utf-8")
    return Template(text.strip())


def render(name: str, **values: object) -> str:
    return _template(name).safe_substitute({k: str(v) for k, v in values.items()})


@cache
def examples() -> dict[str, Any]:
    """The worked examples of ``examples.json`` (shown to small models as earlier turns)."""
    text = resources.files(__name__).joinpath("examples.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded
