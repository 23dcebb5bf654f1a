"""boundedSchema (web/worker/engines/cpu-schema.js): tool schemas bounded for llama.cpp."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.browser

SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "short": {"type": "string", "maxLength": 10},
        "long": {"type": "string", "maxLength": 5000},
        "mode": {"type": "string", "enum": ["a", "b"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "nested": {"type": "object", "properties": {"note": {"type": ["string", "null"]}}},
    },
    "required": ["query"],
}


def test_strings_and_arrays_get_bounds_and_nothing_else_changes(page: Any, page_url: Any) -> None:
    # Any document of our origin without a restrictive CSP will do (sandbox.html has one).
    page.goto(page_url("vendor/manifest.json"))
    bounded = page.evaluate(
        """async (schema) => {
            const { boundedSchema } = await import("/worker/engines/cpu-schema.js");
            return boundedSchema(schema, 300);
        }""",
        SCHEMA,
    )
    props = bounded["properties"]
    assert props["query"] == {"type": "string", "maxLength": 300}
    assert props["short"]["maxLength"] == 10  # tighter bounds are kept
    assert props["long"]["maxLength"] == 300
    assert props["mode"] == SCHEMA["properties"]["mode"]  # enums need no bound
    assert props["tags"]["maxItems"] == 8 and props["tags"]["items"]["maxLength"] == 300
    assert props["nested"]["properties"]["note"]["maxLength"] == 300
    assert bounded["required"] == ["query"]
