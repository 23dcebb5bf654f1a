"""Tool arguments checked against a tool's input schema (JSON Schema).

A schema comes from a server and may hold a ``$ref`` to a network URL: that is never
fetched (jsonschema's default would fetch it, an SSRF door; MCP 2026-07-28 forbids it).
Same-document references and the standard meta-schemas resolve; a network one makes the
check fail with a message that says so.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any


def validate_arguments(schema: Mapping[str, Any], arguments: Any) -> str | None:
    """None when ``arguments`` meet ``schema``, else the validator's message in one line."""
    if not isinstance(arguments, dict):
        return f"the arguments must be a JSON object, not {type(arguments).__name__}"
    # Imported at the first check, not at start: jsonschema (and referencing, attrs,
    # pyrsistent under it) is a third of the page's import time.
    from jsonschema import exceptions as schema_exceptions
    from referencing.exceptions import Unresolvable

    try:
        validator = _validator(json.dumps(schema, sort_keys=True))
    except schema_exceptions.SchemaError as exc:
        return f"the tool's own input schema is invalid: {exc.message}"
    try:
        error = schema_exceptions.best_match(validator.iter_errors(arguments))
    except Unresolvable as exc:
        return f"the tool's input schema refers to {exc.ref}, which is not fetched"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where or 'arguments'}: {error.message}"


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    """A checked validator per schema: checking a schema costs more than using it, and the
    same tool schemas come back at every step."""
    from jsonschema import validators
    from jsonschema_specifications import REGISTRY as SPECIFICATIONS
    from referencing import Registry

    schema = json.loads(schema_json)
    validator_class = validators.validator_for(schema)
    validator_class.check_schema(schema)
    # A registry without ``retrieve``: nothing outside the schema and the meta-schemas.
    return validator_class(schema, registry=SPECIFICATIONS.combine(Registry()))
