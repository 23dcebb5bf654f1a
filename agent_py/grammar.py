"""Compact JSON grammars (GBNF) for the schemas the agent constrains replies with.

llama.cpp's own JSON-schema conversion lets the model put newlines and indentation between
JSON tokens, and small models take the offer: a one-step plan cost SmolLM2 184 decoded
tokens pretty-printed, against about 65 on one line. On two CPU cores that is seconds per
call. The grammar here writes JSON on one line as ``json.dumps`` does, a space after each
comma and colon and none elsewhere outside strings: the form of the worked examples in the
prompt, so the model's reply reads as theirs. Keys, separators and the rest of an enum's
name are then the only text allowed, which the CPU engine writes without sampling (its
forced text, decoded in one batch: about a third of a plan's tokens). It keeps every bound
of the schema (string lengths, enums, array sizes).

It covers what our plan schema and simple tool schemas use: objects whose properties are all
required (written in schema order), strings with length bounds or an enum, integers,
numbers, booleans and bounded arrays. For anything else (optional properties, ``anyOf``,
``$ref``, patterns, free objects) :func:`compact_grammar` returns None and the engine uses
the schema as it is.
"""

from __future__ import annotations

import json
from typing import Any

_CHAR = r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'
# The last character of a string is not a space: no value needs trailing whitespace, and a
# small model that stops at "return " (its next token a quote the JSON cannot hold) must
# go on and write the value.
_LAST_CHAR = r'[^" \t\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'
_INTEGER = '"-"? ("0" | [1-9] [0-9]{0,15})'
_NUMBER = f'{_INTEGER} ("." [0-9]{{1,16}})? ([eE] [-+]? [0-9]{{1,3}})?'
_UNBOUNDED_ITEMS = 8
# json.dumps's separators, as the worked examples in the prompt are written.
_ITEM_SEPARATOR = ", "
_KEY_SEPARATOR = ": "


class _Unsupported(Exception):
    pass


def compact_grammar(schema: dict[str, Any], max_chars: int = 2_000) -> str | None:
    """A GBNF grammar for replies that meet ``schema``, written without whitespace; None
    when the schema uses something this converter does not cover. A string without
    ``maxLength`` gets ``max_chars`` (a reply cannot be longer than its budget anyway)."""
    rules: dict[str, str] = {"char": _CHAR, "last-char": _LAST_CHAR}
    try:
        rules["root"] = _rule(schema, rules, "root", max_chars)
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


def _rule(schema: Any, rules: dict[str, str], name: str, max_chars: int) -> str:
    if not isinstance(schema, dict):
        raise _Unsupported
    if "enum" in schema:
        return " | ".join(_literal(json.dumps(value)) for value in schema["enum"])
    if "const" in schema:
        return _literal(json.dumps(schema["const"]))
    kind = schema.get("type")
    if kind == "object":
        return _object(schema, rules, name, max_chars)
    if kind == "array":
        return _array(schema, rules, name, max_chars)
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


def _object(schema: dict[str, Any], rules: dict[str, str], name: str, max_chars: int) -> str:
    properties: dict[str, Any] = schema.get("properties") or {}
    required = list(schema.get("required") or [])
    if not properties or set(properties) != set(required):
        raise _Unsupported  # optional or free-form properties: leave it to the engine
    parts = []
    for index, (key, spec) in enumerate(properties.items()):
        child = f"{name}-{_safe(key)}"
        rules[child] = _rule(spec, rules, child, max_chars)
        separator = _ITEM_SEPARATOR if index else ""
        parts.append(f"{_literal(separator + json.dumps(key) + _KEY_SEPARATOR)} {child}")
    return '"{" ' + " ".join(parts) + ' "}"'


def _array(schema: dict[str, Any], rules: dict[str, str], name: str, max_chars: int) -> str:
    item = f"{name}-item"
    rules[item] = _rule(schema.get("items"), rules, item, max_chars)
    low = int(schema.get("minItems", 0))
    high = int(schema.get("maxItems", max(low, _UNBOUNDED_ITEMS)))
    if high == 0:
        return '"[]"'
    rest = f"({_literal(_ITEM_SEPARATOR)} {item}){{{max(low - 1, 0)},{high - 1}}}"
    items = f"{item} {rest}"
    return f'"[" {items} "]"' if low else f'"[" ({items})? "]"'


def _literal(text: str) -> str:
    return json.dumps(text)


def _safe(key: str) -> str:
    cleaned = "".join(c if c.isalnum() else "-" for c in key).strip("-").lower()
    return cleaned or "x"
