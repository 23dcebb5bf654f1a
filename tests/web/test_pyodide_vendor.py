"""The vendored Pyodide runtime boots offline with our lock and every wheel imports."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_every_lock_entry_matches_its_file(vendored: Path) -> None:
    lock = json.loads((vendored / "pyodide" / "pyodide-lock.json").read_text())
    assert lock["info"]["abi_version"] == "2026_0"
    assert set(lock["packages"]) == {"pydantic-core", "agent-py-bundle"}
    bundle = lock["packages"]["agent-py-bundle"]
    assert {"pydantic", "jsonschema", "rpds", "agent_py", "mcp_types"} <= set(bundle["imports"])
    assert bundle["depends"] == ["pydantic-core"]
    for key, package in lock["packages"].items():
        wheel = vendored / "pyodide" / package["file_name"]
        assert "/" not in package["file_name"], f"{key}: file_name must stay relative to the lock"
        assert hashlib.sha256(wheel.read_bytes()).hexdigest() == package["sha256"], key
        assert set(package["depends"]) <= set(lock["packages"]), f"{key} depends on a missing wheel"


def test_manifest_lists_every_vendored_file(vendored: Path) -> None:
    manifest = json.loads((vendored / "manifest.json").read_text())
    listed = {f["path"]: f for f in manifest["files"]}
    pins = json.loads((ROOT / "scripts" / "vendor-lock.json").read_text())
    # llama: the CPU engine's build (scripts/cpu_engine/build.sh), its hidden stamp aside,
    # and not llama/state/: the planner prompt's state shipped by set-up after the manifest
    # (scripts/ship_prompt_states.py) is fetched on demand and kept by the engine itself.
    folders = ["pyodide", "llama"] + [spec["dest"] for spec in pins["npm"]]
    on_disk = {
        p.relative_to(vendored.parent).as_posix()
        for folder in folders
        for p in (vendored / folder).rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }
    on_disk = {path for path in on_disk if not path.startswith("vendor/llama/state/")}
    assert set(listed) == on_disk
    for path, entry in listed.items():
        data = (vendored.parent / path).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["size"], entry["sha256"])


def test_the_bundle_holds_bytecode_of_every_pure_wheel(vendored: Path) -> None:
    lock = json.loads((vendored / "pyodide" / "pyodide-lock.json").read_text())
    bundle = vendored / "pyodide" / lock["packages"]["agent-py-bundle"]["file_name"]
    archive = zipfile.ZipFile(bundle)
    names = archive.namelist()
    # Compiled in place of the sources, so the page neither unpacks nor compiles them; only a
    # module whose source is data (marked, scripts/compile_bundle.mjs) keeps it beside.
    sources = [n for n in names if n.endswith(".py")]
    assert sources == ["agent_py/tools/python_driver.py"]
    assert b"# agent_py: keep this source in the page's bundle" in archive.read(sources[0])
    assert "agent_py/tools/python_driver.pyc" in names
    assert {"agent_py/__init__.pyc", "pydantic/main.pyc", "jsonschema/validators.pyc"} <= set(names)
    assert "agent_py/core/prompts/answer_user.md" in names  # data files stay
    pins = json.loads((ROOT / "scripts" / "vendor-lock.json").read_text())
    pure = [w for w in pins["wheels"] + pins["standin_wheels"] if "none-any" in w["file"]]
    dist_infos = {n.split("/")[0].split("-")[0].lower() for n in names if ".dist-info/" in n}
    assert {w["name"].replace("-", "_").lower() for w in pure} | {"agent_py"} <= dist_infos


def test_the_compiled_wheel_ships_bytecode_and_its_extension(vendored: Path) -> None:
    lock = json.loads((vendored / "pyodide" / "pyodide-lock.json").read_text())
    wheel = vendored / "pyodide" / lock["packages"]["pydantic-core"]["file_name"]
    names = zipfile.ZipFile(wheel).namelist()
    assert "pydantic_core/core_schema.pyc" in names
    assert not [n for n in names if n.endswith(".py")]
    assert [n for n in names if n.endswith("-wasm32-emscripten.so")]


def test_the_compiled_stdlib_has_bytecode_beside_every_source(vendored: Path) -> None:
    stock = zipfile.ZipFile(vendored / "pyodide" / "python_stdlib.zip")
    compiled = zipfile.ZipFile(vendored / "pyodide" / "python_stdlib_compiled.zip")
    sources = {n for n in stock.namelist() if n.endswith(".py")}
    assert sources <= set(compiled.namelist())  # sources stay, for tracebacks
    assert {n + "c" for n in sources} <= set(compiled.namelist())
    header = compiled.read("ipaddress.pyc")[:8]
    assert int.from_bytes(header[4:8], "little") == 1  # unchecked hash: no file times


@pytest.mark.browser
def test_pyodide_boots_offline_and_imports_every_wheel(
    page, page_url, request_log, browser_settings
) -> None:
    page.goto(page_url("dev/pyodide_boot.html"))
    page.wait_for_selector(
        "body:not([data-status='booting'])", timeout=browser_settings.BOOT_TIMEOUT_MS
    )
    report = page.evaluate("window.bootReport")

    assert report.get("error") is None, report["error"]
    failed = {name: c["detail"] for name, c in report["checks"].items() if not c["ok"]}
    assert not failed, failed
    assert page.get_attribute("body", "data-status") == "ok"
    assert {
        "pydantic",
        "jsonschema",
        "rpds stand-in",
        "micropip",
        "pyodide_http",
        "agent_py",
        "bytecode",
        "loop installed",
        "loop: FIFO order",
        "loop: turns share drains",
        "loop: promises settle without browser tasks",
        "loop: yields to the browser",
        "loop: promise chain yields to the browser",
        "loop: failing callback reported",
        "loop: cancelled callback skipped",
        "loop: timers and promises",
    } <= set(report["checks"])
    # The worker's fetches are in the log (packages come from the worker), none left the origin.
    assert any(url.endswith(".whl") for url in request_log.urls), request_log.urls
    assert any("agent_py_bundle-" in url for url in request_log.urls), request_log.urls
    assert request_log.foreign() == []
    assert request_log.failed == []
    assert request_log.http_errors == []
    print("pyodide boot timings (ms):", report["timings"])
