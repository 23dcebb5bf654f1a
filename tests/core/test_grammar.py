"""Compact JSON grammars: JSON on one line, without whitespace between tokens or with
json.dumps's spaces (the worked examples' form), every bound of the schema kept, and None (the
engine's own conversion) for what the converter does not cover."""

from __future__ import annotations

import re

from agent_py.core.grammar import compact_grammar
from agent_py.core.plan import PlanShape, plan_json_schema
from agent_py.core.profiles import TINY
from agent_py.tools import JavascriptExecutor, LLMGenerator

LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')  # a GBNF string literal, escapes included


def rules_of(grammar: str) -> dict[str, str]:
    return dict(line.split(" ::= ", 1) for line in grammar.splitlines())


def test_the_small_plan_schema_becomes_a_grammar_with_its_bounds_and_no_whitespace() -> None:
    grammar = compact_grammar(
        plan_json_schema(["llm_generator", "javascript_execute"], TINY.plan_shape)
    )
    assert grammar is not None
    rules = rules_of(grammar)
    assert rules["root"] == '"{" "\\"answer\\":" root-answer ",\\"tasks\\":" root-tasks "}"'
    assert rules["root-answer"].startswith('"\\"number\\"" | "\\"yes_no\\""')
    assert rules["root-tasks"] == '"[" root-tasks-item ("," root-tasks-item){0,1} "]"'
    assert rules["root-tasks-item-steps-item-input"] == '"\\"" (char{0,159} last-char)? "\\""'
    assert rules["root-tasks-item-steps-item-tool-name"] == (
        '"\\"llm_generator\\"" | "\\"javascript_execute\\""'
    )
    # Whitespace may only appear inside strings (the char rule), never between tokens.
    assert not any(" " in lit or "\\n" in lit for lit in _literals_between_tokens(rules))


def test_the_spaced_form_has_json_dumps_separators_and_no_other_whitespace() -> None:
    schema = plan_json_schema(["llm_generator", "javascript_execute"], TINY.plan_shape)
    grammar = compact_grammar(schema, spaced=True)
    assert grammar is not None
    rules = rules_of(grammar)
    assert rules["root"] == '"{" "\\"answer\\": " root-answer ", \\"tasks\\": " root-tasks "}"'
    assert rules["root-tasks"] == '"[" root-tasks-item (", " root-tasks-item){0,1} "]"'
    assert rules["root-tasks-item"].startswith('"{" "\\"task_id\\": " root-tasks-item-task-id')
    # The same bounds as the form without spaces.
    assert rules["root-tasks-item-steps-item-input"] == '"\\"" (char{0,159} last-char)? "\\""'
    literals = _literals_between_tokens(rules)
    assert not any("\\n" in lit or "\\t" in lit for lit in literals)
    spaced = [lit for lit in literals if " " in lit]
    assert spaced and all(re.fullmatch(r'(, )?(\\"\w+\\": )?', lit) for lit in spaced), spaced


def _literals_between_tokens(rules: dict[str, str]) -> list[str]:
    outside_strings = [body for name, body in rules.items() if "char" not in name]
    literals = [lit for body in outside_strings for lit in LITERAL.findall(body)]
    assert literals
    return literals


def test_simple_tool_schemas_are_covered_and_unbounded_strings_get_the_budget() -> None:
    grammar = compact_grammar(JavascriptExecutor.input_schema, max_chars=500)
    assert grammar is not None
    # At least one character, and the last one is not a space ("return " cannot end it).
    assert rules_of(grammar)["root-code"] == '"\\"" char{0,499} last-char "\\""'
    assert '[^" \\t' in rules_of(grammar)["last-char"]
    assert compact_grammar(LLMGenerator.input_schema) is not None
    numbers = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "number"}, "c": {"type": "boolean"}},
        "required": ["a", "b", "c"],
    }
    assert compact_grammar(numbers) is not None


def test_what_the_converter_does_not_cover_is_left_to_the_engine() -> None:
    optional = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert compact_grammar(optional) is None
    assert compact_grammar({"type": "object"}) is None  # free-form object
    assert compact_grammar({"anyOf": [{"type": "string"}, {"type": "integer"}]}) is None
    pattern = {
        "type": "object",
        "properties": {"d": {"type": "string", "pattern": "^[0-9]+$"}},
        "required": ["d"],
    }
    assert compact_grammar(pattern) is None
    # The full plan shape has a free "arguments" object: not covered.
    assert compact_grammar(plan_json_schema(["a"], PlanShape())) is None
