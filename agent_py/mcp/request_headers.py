"""The HTTP headers that mirror a request's body in MCP 2026-07-28 (SEP-2243).

Every POST names its method in ``Mcp-Method``; ``tools/call``, ``prompts/get`` and
``resources/read`` also name their target in ``Mcp-Name``. A tool may mark parameters in
its ``inputSchema`` with ``x-mcp-header: Name``; a call then carries the argument's value
in ``Mcp-Param-Name`` too. Values that are not plain visible ASCII travel as
``=?base64?...?=`` of their UTF-8 bytes.

:func:`header_problem` says why a tool's annotations are invalid (the client then leaves
the tool out of its list, as the revision requires); :func:`param_headers` reads the
annotated values out of a call's arguments.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from mcp_types import Tool

NAMED_METHODS: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
"""The methods whose ``Mcp-Name`` header mirrors a parameter, and which one."""

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""RFC 9110's ``1*tchar``: what a header's name may be made of."""
_PLAIN = re.compile(r"[\x20-\x7e]*")
_SENTINEL = re.compile(r"=\?base64\?.*\?=", re.DOTALL)
_SAFE_INTEGER = 2**53 - 1
_SCHEMA_MAPS = ("$defs", "definitions", "patternProperties", "dependentSchemas")
"""Keywords whose value maps names to schemas that are not the instance's properties."""
_NOT_SCHEMAS = ("properties", "x-mcp-header", "default", "examples", "enum", "const")
"""Keywords whose value is no schema to look into (or, for properties, is looked into)."""


def encode_value(value: str) -> str:
    """A header value: as it is when it is plain visible ASCII without edge spaces, else the
    base64 sentinel form (which a plain value that looks like the sentinel gets too)."""
    plain = (
        _PLAIN.fullmatch(value) is not None
        and value == value.strip(" \t")
        and not _SENTINEL.fullmatch(value)
    )
    if plain:
        return value
    return f"=?base64?{base64.b64encode(value.encode('utf-8')).decode('ascii')}?="


def standard_headers(method: str, params: Mapping[str, Any] | None) -> dict[str, str]:
    """``Mcp-Method``, and ``Mcp-Name`` for the methods that name a target."""
    headers = {"Mcp-Method": method}
    key = NAMED_METHODS.get(method)
    target = (params or {}).get(key) if key is not None else None
    if isinstance(target, str):
        headers["Mcp-Name"] = encode_value(target)
    return headers


def header_problem(tool: Tool) -> str | None:
    """Why ``tool``'s ``x-mcp-header`` annotations break the revision's rules, or None."""
    seen: set[str] = set()
    for path, spec, name in _annotations(tool.input_schema, (), top=True):
        if path is None:
            return f"x-mcp-header {name!r} is not on a property reachable through properties alone"
        where = ".".join(path) or "the schema itself"
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            return f"x-mcp-header {name!r} of {where} is not a valid header name"
        if name.lower() in seen:
            return f"x-mcp-header {name!r} is used twice"
        seen.add(name.lower())
        if spec.get("type") not in ("string", "integer", "boolean"):
            return f"x-mcp-header {name!r} marks {where}, which is not a string, integer or boolean"
    return None


def param_headers(tool: Tool | None, arguments: Mapping[str, Any]) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers of a call of ``tool`` with ``arguments`` (none for a tool
    the client has not listed, or whose annotations are invalid)."""
    if tool is None or header_problem(tool) is not None:
        return {}
    headers: dict[str, str] = {}
    for path, _spec, name in _annotations(tool.input_schema, (), top=True):
        value: Any = arguments
        for key in path or ():
            value = value.get(key) if isinstance(value, Mapping) else None
        text = _text(value)
        if text is not None:
            headers[f"Mcp-Param-{name}"] = encode_value(text)
    return headers


def _text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and abs(value) <= _SAFE_INTEGER:
        return str(value)
    if isinstance(value, float) and value.is_integer() and abs(value) <= _SAFE_INTEGER:
        return str(int(value))
    return value if isinstance(value, str) else None


def _annotations(
    schema: Any, path: tuple[str, ...] | None, *, top: bool = False
) -> Iterator[tuple[tuple[str, ...] | None, Mapping[str, Any], Any]]:
    """Every ``x-mcp-header`` in ``schema``: ``(property path, property schema, name)``; the
    path is None where the annotation is not reachable through ``properties`` alone."""
    if not isinstance(schema, Mapping):
        return
    if "x-mcp-header" in schema:
        yield (None if top else path), schema, schema["x-mcp-header"]
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for key, spec in properties.items():
            yield from _annotations(spec, None if path is None else (*path, str(key)))
    for keyword, value in schema.items():
        if keyword in _NOT_SCHEMAS:
            continue
        # Anything else that holds schemas (items, allOf, $ref'd $defs, if/then...)
        # is not a plain chain of properties: an annotation there is unreachable.
        nested = (
            value.values()
            if keyword in _SCHEMA_MAPS and isinstance(value, Mapping)
            else (value if isinstance(value, list) else [value])
        )
        for spec in nested:
            yield from _annotations(spec, None)
