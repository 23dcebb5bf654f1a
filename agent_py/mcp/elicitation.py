"""Elicitation: a server asks the user for a few values in the middle of a request.

A server sends ``elicitation/create`` with a message and a flat ``requestedSchema`` (an
object whose properties are strings, numbers, integers, booleans, single choices or
multiple choices; MCP 2025-11-25). :func:`parse_form` turns it into an
:class:`ElicitationForm`; a front end (the terminal command, the page's dialog) fills it
and answers with an :class:`ElicitationAnswer`; :meth:`ElicitationForm.problems` checks
the values against the schema before they are sent, so nothing that does not match leaves
the client.

Only form mode is offered: the client declares ``{"elicitation": {"form": {}}}`` when it
has a handler, and refuses URL mode.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

FieldKind = Literal["string", "number", "integer", "boolean", "choice", "choices"]
Action = Literal["accept", "decline", "cancel"]

_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATE_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})?"
)
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")
_FORMATS = {"email": _EMAIL, "uri": _URI, "date": _DATE, "date-time": _DATE_TIME}


class UnsupportedSchemaError(ValueError):
    """The requested schema is not the flat kind MCP allows; the request is refused."""


@dataclass(frozen=True)
class Choice:
    value: str
    label: str


@dataclass(frozen=True)
class ElicitationField:
    name: str
    kind: FieldKind
    label: str
    """The property's title, or its name."""
    description: str = ""
    required: bool = False
    default: Any = None
    choices: tuple[Choice, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    format: str | None = None

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` for this field, or None."""
        if self.kind == "boolean":
            return None if isinstance(value, bool) else "must be true or false"
        if self.kind in ("number", "integer"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                return f"must be a{'n integer' if self.kind == 'integer' else ' number'}"
            if not math.isfinite(value):
                return "must be a finite number"
            if self.kind == "integer" and value != int(value):
                return "must be an integer"
            if self.minimum is not None and value < self.minimum:
                return f"must be at least {self.minimum:g}"
            if self.maximum is not None and value > self.maximum:
                return f"must be at most {self.maximum:g}"
            return None
        allowed = {choice.value for choice in self.choices}
        if self.kind == "choice":
            if value not in allowed:
                return f"must be one of {', '.join(sorted(allowed))}"
            return None
        if self.kind == "choices":
            if not isinstance(value, list) or not all(item in allowed for item in value):
                return f"must be a list of values from {', '.join(sorted(allowed))}"
            if len(set(value)) != len(value):
                return "must not repeat a value"
            if self.min_length is not None and len(value) < self.min_length:
                return f"needs at least {self.min_length} value(s)"
            if self.max_length is not None and len(value) > self.max_length:
                return f"takes at most {self.max_length} value(s)"
            return None
        if not isinstance(value, str):
            return "must be text"
        if self.min_length is not None and len(value) < self.min_length:
            return f"needs at least {self.min_length} character(s)"
        if self.max_length is not None and len(value) > self.max_length:
            return f"takes at most {self.max_length} character(s)"
        pattern = _FORMATS.get(self.format or "")
        if pattern is not None and not pattern.fullmatch(value):
            return f"must be a valid {self.format}"
        return None

    def parse_text(self, text: str) -> Any:
        """A value from what a user typed; ValueError with a sentence if it does not fit."""
        text = text.strip()
        value: Any = text
        if self.kind == "boolean":
            lowered = text.lower()
            if lowered in ("y", "yes", "true", "1"):
                value = True
            elif lowered in ("n", "no", "false", "0"):
                value = False
            else:
                raise ValueError("answer yes or no")
        elif self.kind in ("number", "integer"):
            try:
                value = int(text) if self.kind == "integer" else float(text)
            except ValueError:
                raise ValueError(
                    f"{self.label} must be a{'n integer' if self.kind == 'integer' else ' number'}"
                ) from None
        elif self.kind == "choice":
            value = self._choice(text)
        elif self.kind == "choices":
            value = [self._choice(part) for part in text.split(",") if part.strip()]
        problem = self.problem(value)
        if problem is not None:
            raise ValueError(f"{self.label} {problem}")
        return value

    def _choice(self, text: str) -> str:
        text = text.strip()
        for index, choice in enumerate(self.choices, 1):
            if text in (choice.value, choice.label, str(index)):
                return choice.value
        return text


@dataclass(frozen=True)
class ElicitationForm:
    server: str
    """Who asks (the server's name or URL), to show the user."""
    message: str
    fields: tuple[ElicitationField, ...] = field(default=())

    def defaults(self) -> dict[str, Any]:
        """The schema's default values, the answer of ``--yes``."""
        return {f.name: f.default for f in self.fields if f.default is not None}

    def problems(self, content: Mapping[str, Any]) -> list[str]:
        """Why ``content`` does not match the schema (empty when it does)."""
        known = {f.name: f for f in self.fields}
        found = [f"{name} is not asked for" for name in content if name not in known]
        for f in self.fields:
            if f.name not in content:
                if f.required:
                    found.append(f"{f.label} is required")
                continue
            problem = f.problem(content[f.name])
            if problem is not None:
                found.append(f"{f.label} {problem}")
        return found

    def to_json(self) -> dict[str, Any]:
        """The form for a front end that draws it (the page's dialog)."""
        return asdict(self)


@dataclass(frozen=True)
class ElicitationAnswer:
    action: Action
    """``accept`` with ``content``; ``decline`` (the user said no); ``cancel`` (dismissed)."""
    content: dict[str, Any] | None = None


ElicitationHandler = Callable[[ElicitationForm], Awaitable[ElicitationAnswer]]


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _choices(spec: Mapping[str, Any]) -> tuple[Choice, ...]:
    if isinstance(spec.get("oneOf"), list) or isinstance(spec.get("anyOf"), list):
        options = spec.get("oneOf") or spec.get("anyOf") or []
        choices = []
        for option in options:
            if not isinstance(option, dict) or not isinstance(option.get("const"), str):
                raise UnsupportedSchemaError("a choice without a text 'const' value")
            choices.append(Choice(option["const"], str(option.get("title") or option["const"])))
        return tuple(choices)
    values = spec.get("enum")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise UnsupportedSchemaError("choices must be text values")
    names = spec.get("enumNames")
    labels = names if isinstance(names, list) and len(names) == len(values) else values
    return tuple(Choice(value, str(label)) for value, label in zip(values, labels, strict=True))


def _field(name: str, spec: Any, required: bool) -> ElicitationField:
    if not isinstance(spec, dict):
        raise UnsupportedSchemaError(f"property {name!r} has no schema")
    kind = spec.get("type")
    common: dict[str, Any] = {
        "name": name,
        "label": str(spec.get("title") or name),
        "description": str(spec.get("description") or ""),
        "required": required,
        "default": spec.get("default"),
    }
    result: ElicitationField
    if kind == "string" and ("enum" in spec or "oneOf" in spec):
        result = ElicitationField(kind="choice", choices=_choices(spec), **common)
    elif kind == "string":
        result = ElicitationField(
            kind="string",
            min_length=_count(spec.get("minLength")),
            max_length=_count(spec.get("maxLength")),
            format=spec.get("format") if isinstance(spec.get("format"), str) else None,
            **common,
        )
    elif kind in ("number", "integer"):
        result = ElicitationField(
            kind=kind,
            minimum=_number(spec.get("minimum")),
            maximum=_number(spec.get("maximum")),
            **common,
        )
    elif kind == "boolean":
        result = ElicitationField(kind="boolean", **common)
    elif kind == "array" and isinstance(spec.get("items"), dict):
        result = ElicitationField(
            kind="choices",
            choices=_choices(spec["items"]),
            min_length=_count(spec.get("minItems")),
            max_length=_count(spec.get("maxItems")),
            **common,
        )
    else:
        raise UnsupportedSchemaError(f"property {name!r} is of a type forms cannot ask for")
    if result.default is not None and result.problem(result.default) is not None:
        result = replace(result, default=None)  # a default that breaks the schema is no default
    return result


def parse_form(server: str, params: Mapping[str, Any]) -> ElicitationForm:
    """The form of an ``elicitation/create`` request; UnsupportedSchemaError if it is not a
    form request or its schema is not flat."""
    mode = params.get("mode", "form")
    if mode != "form":
        raise UnsupportedSchemaError(f"this client answers form requests only, not {mode!r}")
    message = params.get("message")
    schema = params.get("requestedSchema")
    if not isinstance(message, str) or not isinstance(schema, dict):
        raise UnsupportedSchemaError("a form request needs a message and a requestedSchema")
    if schema.get("type", "object") != "object":
        raise UnsupportedSchemaError("the requested schema must be an object")
    properties = schema.get("properties") or {}
    required = schema.get("required") or []
    if not isinstance(properties, dict) or not isinstance(required, list):
        raise UnsupportedSchemaError("the requested schema's properties are malformed")
    fields = tuple(_field(name, spec, name in required) for name, spec in properties.items())
    return ElicitationForm(server=server, message=message, fields=fields)
