"""${step_id} references in arguments."""

from __future__ import annotations

import pytest

from agent_py.core.step_action import resolve_references
from agent_py.tools import ToolError, ToolResult

RESULTS = {
    "s1": ToolResult("result: [1, 2]", data=[1, 2]),
    "s2": ToolResult("plain text"),
}


def test_a_whole_string_reference_keeps_structured_data() -> None:
    assert resolve_references({"xs": "${s1}"}, RESULTS, {"s1"}) == {"xs": [1, 2]}


def test_references_inside_text_splice_the_value() -> None:
    value = {"prompt": ["Sum ${s1}; then ${s2}."]}
    assert resolve_references(value, RESULTS, {"s1", "s2"}) == {
        "prompt": ["Sum [1, 2]; then plain text."]
    }


def test_javascript_template_literals_are_not_references() -> None:
    code = "return `${words.length} words, ${x}`"
    assert resolve_references({"code": code}, RESULTS, {"s1", "s3"}) == {"code": code}


def test_a_reference_to_a_step_without_result_is_a_clear_error() -> None:
    with pytest.raises(ToolError, match=r"refer to \$\{s3\}, which has no result yet"):
        resolve_references("use ${s3}", RESULTS, {"s1", "s2", "s3"})
