"""The plan's JSON Schema for constrained decoding."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator
from support import plan_reply, step

from agent_py.core.plan import MAX_STEPS_PER_TASK, PlanShape, plan_json_schema


def walk(node: object) -> list[str]:
    keys: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            keys.append(key)
            keys += walk(value)
    elif isinstance(node, list):
        for item in node:
            keys += walk(item)
    return keys


def test_schema_is_flat_and_bounded() -> None:
    schema = plan_json_schema(["llm_generator", "javascript_execute"])
    keys = walk(schema)
    for forbidden in ("$ref", "$defs", "definitions", "oneOf", "anyOf", "allOf"):
        assert forbidden not in keys
    tasks = schema["properties"]["tasks"]
    assert tasks["maxItems"] >= 1
    steps = tasks["items"]["properties"]["steps"]
    assert steps["maxItems"] == MAX_STEPS_PER_TASK
    assert steps["items"]["properties"]["step_goal"]["maxLength"] > 0
    Draft202012Validator.check_schema(schema)


def test_tool_name_is_limited_to_the_tools_that_exist() -> None:
    schema = plan_json_schema(["llm_generator", "javascript_execute"])
    validator = Draft202012Validator(schema)
    declared = {"answer": "text", "needs": "write"}
    good = json.loads(
        plan_reply([step("s1", "llm_generator", {"prompt": "x"})], wrap=False, **declared)
    )
    bad = json.loads(plan_reply([step("s1", "web_search")], wrap=False, **declared))
    assert not validator.is_valid(json.loads(plan_reply([step("s1", "llm_generator")], wrap=False)))
    assert validator.is_valid(good)
    errors = list(validator.iter_errors(bad))
    assert errors and "is not one of" in errors[0].message


def test_schema_without_arguments_for_small_grammars() -> None:
    schema = plan_json_schema(["a"], PlanShape(with_arguments=False))
    step_props = schema["properties"]["tasks"]["items"]["properties"]["steps"]["items"]
    assert "arguments" not in step_props["properties"]


def test_a_plan_needs_a_tool() -> None:
    with pytest.raises(ValueError, match="at least one tool"):
        plan_json_schema([])
