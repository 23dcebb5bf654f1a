# Run by pyodide_boot_worker.js inside Pyodide once every vendored wheel is loaded.
# The last expression is the JSON report: {"checks": {name: {ok, detail, ms}}, "versions": {...}}.
# Checks run in order, so a check's ms includes importing what earlier checks did not.
import importlib
import importlib.metadata
import json
import time

checks = {}


def check(name):
    def record(fn):
        started = time.perf_counter()
        try:
            checks[name] = {"ok": True, "detail": str(fn())}
        except Exception as error:  # report every failure, not only the first
            checks[name] = {"ok": False, "detail": f"{type(error).__name__}: {error}"}
        checks[name]["ms"] = round((time.perf_counter() - started) * 1000)

    return record


@check("pydantic")
def _():
    import pydantic

    class Step(pydantic.BaseModel):
        id: int
        tool: str

    Step.model_validate({"id": 1, "tool": "llm_generator"})
    try:
        Step.model_validate({"id": "one"})
    except pydantic.ValidationError as error:
        return f"valid accepted; invalid rejected ({error.error_count()} errors)"
    raise AssertionError("an invalid step was accepted")


@check("jsonschema")
def _():
    import jsonschema

    schema = {
        "type": "object",
        "properties": {"steps": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
        "required": ["steps"],
    }
    jsonschema.validate({"steps": ["plan", "act"]}, schema)
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors({"steps": [1, 2, 3]}))
    if len(errors) != 4:  # three non-strings plus one item too many
        raise AssertionError(f"expected 4 errors, got {[e.message for e in errors]}")
    try:
        jsonschema.validate({}, schema)
    except jsonschema.ValidationError as error:
        return f"valid accepted; invalid rejected ({error.message})"
    raise AssertionError("a document without 'steps' was accepted")


@check("rpds stand-in")
def _():
    import rpds

    if not getattr(rpds, "is_pure_pyrsistent_as_rpds", False):
        raise AssertionError("rpds is not the pyrsistent stand-in")
    return repr(rpds.HashTrieMap({"a": 1}).insert("b", 2))


@check("bytecode")
def _():
    # The standard library and our bundle are imported from their .pyc, not compiled here.
    import ipaddress

    import agent_py.core.plan

    files = [ipaddress.__file__, agent_py.core.plan.__file__]
    if not all(f.endswith(".pyc") for f in files):
        raise AssertionError(f"imported from source: {files}")
    return ", ".join(files)


for module in ("micropip", "pyodide_http", "mcp_types", "packaging", "agent_py"):
    check(module)(lambda module=module: importlib.import_module(module).__name__)

versions = {dist.metadata["Name"]: dist.version for dist in importlib.metadata.distributions()}
json.dumps({"checks": checks, "versions": dict(sorted(versions.items()))})
