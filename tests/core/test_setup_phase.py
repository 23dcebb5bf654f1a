"""A phase of set-up says what it does (scripts/setup_phase.py): a start line with its estimate,
a heartbeat while it is quiet, with the files compiled so far, and its time at the end; a phase
that was already done says nothing of its own. Intervals here are fractions of a second."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PHASE = [sys.executable, str(ROOT / "scripts" / "setup_phase.py")]


def options(about: str = "1 s", **given: object) -> list[str]:
    """setup_phase.py's options: about="2 s", every=0.2, of=3, ..."""
    return ["--about", about, *(f"--{k}={v}" for k, v in given.items())]


def phase(
    what: str, command: list[str], cwd: Path = ROOT, **given: object
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin"}  # no AGENT_PY_SETUP_DEPTH from a set-up around the tests
    return subprocess.run(
        [*PHASE, what, *options(**given), "--", *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_long_phase_says_what_it_does_how_long_and_when_it_ends() -> None:
    done = phase("sleeping", ["sleep", "1"], every=0.2, grace=0.1)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "[set-up] sleeping (about 1 s on two cores)"
    beat = re.compile(r"\[set-up\] sleeping: \d+ s so far")
    assert len([line for line in lines[1:-1] if beat.fullmatch(line)]) >= 2, lines
    assert re.fullmatch(r"\[set-up\] sleeping: done in \d+ s", lines[-1]), lines


def test_a_build_heartbeat_counts_the_files_compiled(tmp_path: Path) -> None:
    build = "touch a.o; sleep 0.8; mkdir -p sub; touch sub/b.o; sleep 0.8"
    done = phase(
        "building", ["bash", "-c", build], tmp_path, every=0.2, grace=0.1, objects=tmp_path, of=3
    )
    assert done.returncode == 0, done.stderr
    assert ", 1 of 3 files compiled" in done.stdout
    assert ", 2 of 3 files compiled" in done.stdout


def test_the_commands_lines_pass_through_and_quiet_time_alone_brings_a_heartbeat() -> None:
    talk = "for i in 1 2 3 4 5 6 7 8; do echo step $i; sleep 0.1; done"
    done = phase("talking", ["bash", "-c", talk], every=0.5, grace=0.05)
    assert done.returncode == 0, done.stderr
    steps = [line for line in done.stdout.splitlines() if "step" in line]
    assert steps == [f"step {i}" for i in range(1, 9)]
    assert "so far" not in done.stdout


def test_a_phase_already_done_prints_only_its_own_line() -> None:
    done = phase("fetching", ["echo", "web/models: in place"], about="5 min")
    assert (done.returncode, done.stdout) == (0, "web/models: in place\n")


def test_a_failure_keeps_its_status_and_says_so() -> None:
    done = phase("failing", ["bash", "-c", "echo why >&2; exit 3"])
    assert done.returncode == 3
    assert "why" in done.stderr
    assert done.stdout.splitlines() == [
        "[set-up] failing (about 1 s on two cores)",
        "[set-up] failing: failed after 0 s (exit 3)",
    ]


def test_a_phase_within_a_phase_is_indented_and_the_outer_one_stays_quiet() -> None:
    inner = [*PHASE, "inner", *options("2 s", every=0.2, grace=0.1), "--", "sleep", "2"]
    done = phase("outer", inner, about="2 s", every=1, grace=0.1)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "[set-up] outer (about 2 s on two cores)"
    assert lines[1] == "  [set-up] inner (about 2 s on two cores)"
    assert any(line.startswith("  [set-up] inner: ") and "so far" in line for line in lines)
    assert not any(line.startswith("[set-up] outer: ") and "so far" in line for line in lines)
    assert re.fullmatch(r"\[set-up\] outer: done in \d+ s", lines[-1])


def test_a_logged_command_writes_its_output_to_the_log(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text("configured\n")
    done = phase("building", ["bash", "-c", "echo built; echo warned >&2"], log=log)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert log.read_text() == "configured\nbuilt\nwarned\n"
