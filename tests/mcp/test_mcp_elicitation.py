"""Elicitation forms: what a requested schema becomes, how answers are checked, and the
terminal's questions (fed from a list of typed lines)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from agent_py.mcp.elicitation import UnsupportedSchemaError, parse_form
from agent_py.mcp.terminal_form import ask

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "format": "email", "title": "E-mail"},
        "nick": {"type": "string", "maxLength": 5, "default": "ada"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "size": {
            "type": "string",
            "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
            "default": "l",
        },
        "toppings": {
            "type": "array",
            "items": {"type": "string", "enum": ["ham", "egg", "kale"]},
            "maxItems": 2,
        },
        "agree": {"type": "boolean", "default": "not a boolean"},
    },
    "required": ["email", "age"],
}


def test_a_schema_becomes_fields_with_their_constraints_and_valid_defaults() -> None:
    form = parse_form("srv", {"message": "Order?", "requestedSchema": SCHEMA})
    kinds = {f.name: (f.kind, f.required, f.default) for f in form.fields}
    assert kinds == {
        "email": ("string", True, None),
        "nick": ("string", False, "ada"),
        "age": ("integer", True, None),
        "size": ("choice", False, "l"),
        "toppings": ("choices", False, None),
        "agree": ("boolean", False, None),  # a default that breaks the schema is dropped
    }
    assert form.defaults() == {"nick": "ada", "size": "l"}


def test_answers_are_checked_against_the_schema() -> None:
    form = parse_form("srv", {"message": "Order?", "requestedSchema": SCHEMA})
    good = {"email": "a@b.io", "age": 36, "size": "s", "toppings": ["ham", "egg"]}
    assert form.problems(good) == []
    bad = {
        "email": "nobody",
        "age": 36.5,
        "nick": "too long",
        "toppings": ["ham", "ham"],
        "extra": 1,
    }
    assert form.problems(bad) == [
        "extra is not asked for",
        "E-mail must be a valid email",
        "nick takes at most 5 character(s)",
        "age must be an integer",
        "toppings must not repeat a value",
    ]
    assert form.problems({"age": True, "email": "a@b.io"}) == ["age must be an integer"]
    assert form.problems({}) == ["E-mail is required", "age is required"]


@pytest.mark.parametrize(
    "params",
    [
        {
            "message": "x",
            "requestedSchema": {"type": "object", "properties": {"a": {"type": "object"}}},
        },
        {"message": "x", "requestedSchema": {"type": "array"}},
        {"mode": "url", "message": "x", "url": "https://example.invalid", "elicitationId": "1"},
        {"requestedSchema": {"type": "object"}},
    ],
    ids=["nested", "not-an-object", "url-mode", "no-message"],
)
def test_requests_a_form_cannot_draw_are_refused(params: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedSchemaError):
        parse_form("srv", params)


def test_the_terminal_asks_again_until_an_answer_fits() -> None:
    form = parse_form("srv", {"message": "Order?", "requestedSchema": SCHEMA})
    typed = iter(
        ["y", "nobody", "a@b.io", "", "two hundred", "200", "42", "Small", "ham, kale", "yes"]
    )
    out = io.StringIO()
    answer = ask(form, lambda: next(typed), out)
    assert answer.action == "accept"
    assert answer.content == {
        "email": "a@b.io",
        "nick": "ada",
        "age": 42,
        "size": "s",
        "toppings": ["ham", "kale"],
        "agree": True,
    }
    text = out.getvalue()
    assert "srv asks: Order?" in text
    assert "E-mail must be a valid email." in text
    assert "age must be an integer." in text
    assert "age must be at most 150." in text
    assert ask(form, lambda: "n", io.StringIO()).action == "decline"
    assert ask(form, lambda: "c", io.StringIO()).action == "cancel"
