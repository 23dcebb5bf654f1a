"""Compact JSON grammars (GBNF) for the schemas the agent constrains replies with.

llama.cpp's own JSON-schema conversion lets the model put newlines and indentation between
JSON tokens, and small models take the offer: a one-step plan cost SmolLM2 184 decoded
tokens pretty-printed, against about 65 on one line. On two CPU cores that is seconds per
call. The grammar here writes JSON on one line. By default it allows no whitespace outside
strings. ``spaced`` puts ``json.dumps``'s space after each comma and colon, the form of the
worked examples in the prompt: for the CPU engine, which writes the text a grammar allows
alone (keys, separators, the rest of an enum's name) without sampling, tokenized as plain
text. Those tokens are then the examples' own; without the spaces they are not the split
the model itself writes (it writes ``":`` then ``"``, waiting for the space of its
examples). It keeps every bound of the schema (string lengths, enums, array sizes).

It covers what our plan schema and simple tool schemas use: objects whose properties are all
required (written in schema order), strings with length bounds or an enum, integers,
numbers, booleans and bounded arrays. For anything else (optional properties, ``anyOf``,
``$ref``, patterns, free objects) :func:`compact_grammar` returns None and the engine uses
the schema as it is.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

_CHAR = r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'
# The last character of a string is not a space: no value needs trailing whitespace, and a
# small model that stops at "return " (its next token a quote the JSON cannot hold) must
# go on and write the value.
_LAST_CHAR = r'[^" \t\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'
_INTEGER = '"-"? ("0" | [1-9] [0-9]{0,15})'
_NUMBER = f'{_INTEGER} ("." [0-9]{{1,16}})? ([eE] [-+]? [0-9]{{1,3}})?'
_UNBOUNDED_ITEMS = 8


class _Unsupported(Exception):
    pass


class _Separators(NamedTuple):
    item: str
    key: str


def compact_grammar(
    schema: dict[str, Any], max_chars: int = 2_000, *, spaced: bool = False
) -> str | None:
    """A GBNF grammar for replies that meet ``schema``, on one line without whitespace
    between tokens, or with ``spaced`` json.dumps's space after each comma and colon; None
    when the schema uses something this converter does not cover. A string without
    ``maxLength`` gets ``max_chars`` (a reply cannot be longer than its budget anyway)."""
    rules: dict[str, str] = {"char": _CHAR, "last-char": _LAST_CHAR}
    separators = _Separators(", ", ": ") if spaced else _Separators(",", ":")
    try:
        rules["root"] = _rule(schema, rules, "root", max_chars, separators)
    except _Unsupported:
        return None
    return "\n".join(f"{name} ::= {body}" for name, body in rules.items())


def fenced_code_grammar(fence: str) -> str:
    """A reply that is one fenced code block and nothing else: the opening fence (with
    ``fence``, such as ``javascript``), lines of code, and the closing fence, where the reply
    ends. A small model otherwise writes a sentence before the block and an invented
    ``Output: ...`` after it, every token of which is decoded for nothing."""
    return "\n".join(
        [
            f'root ::= {_literal(f"```{fence}")} "\\n" line* "```"',
            'line ::= ([^`\\n] [^\\n]* | "`" [^`\\n] [^\\n]* | "``" [^`\\n] [^\\n]*)? "\\n"',
        ]
    )


def _rule(schema: Any, rules: dict[str, str], name: str, max_chars: int, seps: _Separators) -> str:
    if not isinstance(schema, dict):
        raise _Unsupported
    if "enum" in schema:
        return " | ".join(_literal(json.dumps(value)) for value in schema["enum"])
    if "const" in schema:
        return _literal(json.dumps(schema["const"]))
    kind = schema.get("type")
    if kind == "object":
        return _object(schema, rules, name, max_chars, seps)
    if kind == "array":
        return _array(schema, rules, name, max_chars, seps)
    if kind == "string":
        if set(schema) & {"pattern", "format"}:
            raise _Unsupported
        low = int(schema.get("minLength", 0))
        high = min(int(schema.get("maxLength", max_chars)), max(max_chars, low))
        if high == 0:
            return '"\\"\\""'
        body = f"char{{{max(low - 1, 0)},{high - 1}}} last-char"
        return f'"\\"" {body} "\\""' if low else f'"\\"" ({body})? "\\""'
    if kind == "integer":
        return _INTEGER
    if kind == "number":
        return _NUMBER
    if kind == "boolean":
        return '"true" | "false"'
    raise _Unsupported


def _object(
    schema: dict[str, Any], rules: dict[str, str], name: str, max_chars: int, seps: _Separators
) -> str:
    properties: dict[str, Any] = schema.get("properties") or {}
    required = list(schema.get("required") or [])
    if not properties or set(properties) != set(required):
        raise _Unsupported  # optional or free-form properties: leave it to the engine
    parts = []
    for index, (key, spec) in enumerate(properties.items()):
        child = f"{name}-{_safe(key)}"
        rules[child] = _rule(spec, rules, child, max_chars, seps)
        separator = seps.item if index else ""
        parts.append(f"{_literal(separator + json.dumps(key) + seps.key)} {child}")
    return '"{" ' + " ".join(parts) + ' "}"'


def _array(
    schema: dict[str, Any], rules: dict[str, str], name: str, max_chars: int, seps: _Separators
) -> str:
    item = f"{name}-item"
    rules[item] = _rule(schema.get("items"), rules, item, max_chars, seps)
    low = int(schema.get("minItems", 0))
    high = int(schema.get("maxItems", max(low, _UNBOUNDED_ITEMS)))
    if high == 0:
        return '"[]"'
    rest = f"({_literal(seps.item)} {item}){{{max(low - 1, 0)},{high - 1}}}"
    items = f"{item} {rest}"
    return f'"[" {items} "]"' if low else f'"[" ({items})? "]"'


def _literal(text: str) -> str:
    return json.dumps(text)


def _safe(key: str) -> str:
    cleaned = "".join(c if c.isalnum() else "-" for c in key).strip("-").lower()
    return cleaned or "x"
