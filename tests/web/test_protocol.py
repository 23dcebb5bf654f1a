"""The page's protocol modules: web/protocol.js and its mirror extension/protocol.js.

Node loads both (the page's as a module; the extension's as the classic script the content
script runs) and reports what each defines and builds; the checks here compare them with
each other, with the Python models on the other side of each bridge, and with the files that
cannot import them (the sandbox frame, the classic service worker). A last check keeps the
message names in the protocol modules: no other file spells a message type out.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_py.core.llm import CallInfo, CallPurpose, Sampling
from agent_py.page.http import BridgeRequest
from agent_py.page.ports import call_json
from agent_py.tools.javascript import JSRunResult

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "web"
EXTENSION = ROOT / "extension"

PROBE = Path(__file__).with_name("protocol_probe.mjs")


@pytest.fixture(scope="module")
def protocols() -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js is needed (scripts/setup.sh installs the page's tools with it)")
    done = subprocess.run(
        [
            node,
            "--experimental-default-type=module",
            str(PROBE),
            (WEB / "protocol.js").as_uri(),
            str(EXTENSION / "protocol.js"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_page_and_the_extension_build_the_same_messages(protocols: dict[str, Any]) -> None:
    page, extension = protocols["page"], protocols["extension"]
    assert page["channel"] == extension["channel"] == "agent_py-bridge"
    assert page["types"] == extension["types"]
    assert page["made"] == extension["made"]
    # Field names are Python's: a fetch carries BridgeRequest's, less what stays in the worker.
    request = page["made"]["fetch"]["request"]
    assert set(request) == set(BridgeRequest.model_fields) - {"id", "mode"}
    assert page["made"]["chunk"] == {"type": "chunk", "chunk": "AAEC"}


def test_both_sides_share_one_base64(protocols: dict[str, Any]) -> None:
    page, extension = protocols["page"], protocols["extension"]
    assert page["sources"] == extension["sources"]
    assert page["base64"] == extension["base64"]
    assert page["base64"]["roundTrip"] is True


def test_what_python_reads_has_python_names(protocols: dict[str, Any]) -> None:
    only = protocols["pageOnly"]
    assert set(only["sandboxResult"]) == {f.name for f in dataclasses.fields(JSRunResult)}
    assert set(only["bridgeRequest"]) == set(BridgeRequest.model_fields) - {"id", "mode"}
    # A model call's options are one type per side: Python's CallInfo, written as it is
    # (call_json), and engine-port.js's CallInfo typedef, which the engines read.
    call_keys = {f.name for f in dataclasses.fields(CallInfo)}
    full = CallInfo(
        purpose=CallPurpose.PLAN,
        model="m",
        max_tokens=1,
        thinking=True,
        schema={"type": "object"},
        tool="t",
        step="s1",
        sampling=Sampling(temperature=0.5),
        grammar='root ::= "x"',
    )
    assert set(json.loads(call_json(full))) == call_keys
    assert set(
        json.loads(call_json(CallInfo(purpose=CallPurpose.PLAN, model="m", max_tokens=1)))
    ) == {
        "purpose",
        "model",
        "max_tokens",
        "thinking",
    }
    port = (WEB / "worker" / "engine-port.js").read_text()
    typedef = re.search(r"@typedef \{\{(.*?)\}\} CallInfo", port, re.S)
    assert typedef is not None, "engine-port.js has no CallInfo typedef"
    assert set(re.findall(r"(\w+)\??:", typedef.group(1))) == call_keys
    for engine in ("webllm.js", "cpu.js", "scripted.js"):
        source = (WEB / "worker" / "engines" / engine).read_text()
        read = set(
            re.findall(r"\bcall\.(\w+)\b(?!\s*=[^=])", source)
        )  # not the running-call records
        assert read <= call_keys, f"{engine} reads {read - call_keys}, which CallInfo lacks"


def test_the_files_that_cannot_import_the_module_write_its_names(
    protocols: dict[str, Any],
) -> None:
    only = protocols["pageOnly"]
    sandbox = (WEB / "sandbox.html").read_text()
    for name in only["sandbox"].values():
        assert f'type: "{name}"' in sandbox or f'type !== "{name}"' in sandbox, name
    service_worker = (WEB / "sw.js").read_text()
    for name in only["serviceWorker"].values():
        assert f'"{name}"' in service_worker, name
    # ... and the same field names: what the frame reads of a run, and what it answers (the
    # fields protocol.js's sandboxResult reads, which it hands on under Python's names, with
    # the run's id); what sw.js reads of cache-extra.
    read = re.search(r"const \{([^}]*)\} = event\.data;", sandbox)
    assert read, "sandbox.html no longer reads the run's fields in one place"
    assert {f.strip() for f in read.group(1).split(",")} == set(only["sandboxRunFields"]) - {"type"}
    answer = re.search(r'parent\.postMessage\(\{\s*type: "result",([^}]*)\}', sandbox)
    assert answer, "sandbox.html no longer answers a run in one place"
    answered = {re.split(r"[:\s]", f.strip())[0] for f in answer.group(1).split(",") if f.strip()}
    assert answered == {"id", *only["sandboxAnswerFields"]}
    # The Python sandbox's frame, the same way: its names, what it reads of a run, and what
    # it answers (the fields protocol.js's pythonResult reads).
    python = (WEB / "python-sandbox.html").read_text()
    for name in only["pythonSandbox"].values():
        assert f'type === "{name}"' in python or f'type: "{name}"' in python, name
    read = re.search(r"async function run\(\{([^}]*)\}", python)
    assert read, "python-sandbox.html no longer reads the run's fields in one place"
    assert {f.strip() for f in read.group(1).split(",")} == set(only["pythonRunFields"]) - {"type"}
    answered = set(re.findall(r"\b(json|error|timedOut):", python))
    assert answered == set(only["pythonAnswerFields"])
    for field in set(only["cacheExtraFields"]) - {"type"}:
        assert f"event.data.{field}" in service_worker, field
    runtime = protocols["extensionOnly"]
    assert runtime["port"] == "agent_py-fetch"
    registered = (EXTENSION / "content-scripts.js").read_text()
    assert 'js: ["protocol.js", "content-script.js"]' in registered


def _message_names() -> set[str]:
    names: set[str] = set()
    for module in (WEB / "protocol.js", EXTENSION / "protocol.js"):
        names |= set(re.findall(r'^\s*[A-Z_]+: "([^"]+)"', module.read_text(), re.MULTILINE))
        names |= set(
            re.findall(
                r'^(?:export )?\s*const [A-Z_]+ = "([^"]+)"', module.read_text(), re.MULTILINE
            )
        )
    return names


def test_no_other_file_spells_a_message_type_out() -> None:
    names = _message_names()
    assert {"bridge-head", "sandbox-run", "agent_py-bridge", "agent_py-fetch", "hello"} <= names
    quoted = "|".join(re.escape(name) for name in sorted(names))
    # A message type written as a literal: built ({type: "x"}), tested (type === "x",
    # case "x":), or a channel or port name passed around.
    spelled = re.compile(
        rf"(?:type\s*:\s*|type\s*[!=]==?\s*|case\s+|channel\s*[:=]\s*|name\s*[:=]\s*|"
        rf'BroadcastChannel\()"({quoted})"'
    )
    exempt = {WEB / "protocol.js", EXTENSION / "protocol.js", WEB / "sw.js"}
    files = [*WEB.glob("*.js"), *WEB.glob("ui/*.js"), *WEB.glob("worker/**/*.js")]
    files += EXTENSION.glob("*.js")
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in files
        if path not in exempt
        for match in spelled.finditer(path.read_text())
    ]
    assert found == []
