"""Prompt templates, kept as data files beside this module.

Templates use ``$name`` placeholders (``string.Template``) so JSON braces need no escaping;
unknown ``${...}`` such as the step references ``${s1}`` are left as they are.
"""

from __future__ import annotations

import json
import pkgutil
from functools import cache
from importlib import resources
from string import Template
from typing import Any


def _read(file_name: str) -> str:
    # Through the package's loader: in the page the package is imported from a zip, where
    # importlib.resources.files() reads the zip's whole directory again at every call (about
    # 30 ms per template in Pyodide, most of a first run's orchestration time).
    data = pkgutil.get_data(__name__, file_name)
    if data is None:
        raise FileNotFoundError(f"{__name__} has no {file_name}")
    return data.decode("utf-8")


@cache
def _template(name: str) -> Template:
    return Template(_read(f"{name}.md").strip())


def preload() -> None:
    """Read and compile every template now rather than at its first use (listing them reads
    the zip's directory once)."""
    for path in resources.files(__name__).iterdir():
        if path.name.endswith(".md"):
            _template(path.name.removesuffix(".md"))


def render(name: str, **values: object) -> str:
    return _template(name).safe_substitute({k: str(v) for k, v in values.items()})


@cache
def examples() -> dict[str, Any]:
    """The worked examples of ``examples.json`` (shown to small models as earlier turns)."""
    loaded: dict[str, Any] = json.loads(_read("examples.json"))
    return loaded
