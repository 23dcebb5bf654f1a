"""Runs one phase of set-up and says what it does: a line when it starts (what, and about how
long it takes on two cores), a line at least every ``--every`` seconds while it runs (the time so
far and, with ``--objects``, how many files are compiled of how many), and its time at the end.

    python3 scripts/setup_phase.py WHAT --about "4 min" [--objects DIR --of N] [--log FILE] -- CMD

The command's output passes through line by line (or, with ``--log``, goes to FILE). A
heartbeat comes only when nothing was printed for ``--every`` seconds, so a phase that runs
phases stays quiet while they talk; nested phases are indented. A phase that ends within
``--grace`` seconds was already done: it prints only the command's own lines. The exit status
is the command's. Standard library only: set-up runs it before the virtual environment exists.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

GRACE_S = 2.0
EVERY_S = 25.0  # under the 30 s a newcomer may wait for a sign of life
DEPTH = "AGENT_PY_SETUP_DEPTH"  # how many phases this one runs in: its lines are indented


def depth() -> int:
    return int(os.environ.get(DEPTH, "0") or 0)


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 5 s``."""
    whole = round(seconds)
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60} s"


def compiled(folder: Path, total: int) -> str:
    """``12 of 69 files compiled``: the object files under ``folder``."""
    done = sum(name.endswith(".o") for _, _, names in os.walk(folder) for name in names)
    return f"{min(done, total)} of {total} files compiled"


class Phase:
    """What is said about one running command. Every method runs under ``lock``."""

    def __init__(self, what: str, about: str, grace: float, every: float) -> None:
        self.what = what
        self.about = about
        self.grace = grace
        self.every = every
        self.indent = "  " * depth()
        self.started = time.monotonic()
        self.last_said = self.started
        self.announced = False
        self.held: list[tuple[IO[bytes], bytes]] = []  # the command's lines within the grace
        self.lock = threading.Lock()

    def write(self, sink: IO[bytes], data: bytes) -> None:
        sys.stdout.flush()
        sink.write(data)
        sink.flush()
        self.last_said = time.monotonic()

    def say(self, text: str) -> None:
        self.write(sys.stdout.buffer, f"{self.indent}[set-up] {self.what}{text}\n".encode())

    def announce(self) -> None:
        if self.announced:
            return
        self.announced = True
        self.say(f" (about {self.about} on two cores)")
        for sink, line in self.held:
            self.write(sink, line)
        self.held.clear()

    def line(self, sink: IO[bytes], line: bytes) -> None:
        """A line of the command's."""
        if self.announced or time.monotonic() - self.started >= self.grace:
            self.announce()
            self.write(sink, line)
        else:
            self.held.append((sink, line))

    def tick(self, progress: Callable[[], str | None]) -> None:
        now = time.monotonic()
        if not self.announced:
            if now - self.started >= self.grace:
                self.announce()
        elif now - self.last_said >= self.every:
            so_far = duration(now - self.started)
            how_far = progress()
            self.say(f": {so_far} so far, {how_far}" if how_far else f": {so_far} so far")

    def end(self, code: int) -> None:
        took = duration(time.monotonic() - self.started)
        if code == 0 and not self.announced:  # done before the grace: the command's words only
            for sink, line in self.held:
                self.write(sink, line)
            return
        self.announce()
        self.say(f": done in {took}" if code == 0 else f": failed after {took} (exit {code})")


def relay(phase: Phase, source: IO[bytes], sink: IO[bytes]) -> None:
    for line in iter(source.readline, b""):
        with phase.lock:
            phase.line(sink, line)


def run(
    what: str,
    about: str,
    command: list[str],
    *,
    every: float = EVERY_S,
    grace: float = GRACE_S,
    objects: Path | None = None,
    of: int = 0,
    log: Path | None = None,
) -> int:
    """Runs ``command`` as the phase ``what``; its exit status (128 + N for signal N)."""
    phase = Phase(what, about, grace, every)
    # PYTHONUNBUFFERED: a Python command's lines come when it prints them, not when it ends.
    env = {**os.environ, DEPTH: str(depth() + 1), "PYTHONUNBUFFERED": "1"}
    relays = []
    if log is not None:
        with log.open("ab") as sink:
            child = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
    else:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert child.stdout and child.stderr
        for source, sink in ((child.stdout, sys.stdout.buffer), (child.stderr, sys.stderr.buffer)):
            relays.append(threading.Thread(target=relay, args=(phase, source, sink), daemon=True))
            relays[-1].start()
    progress = (lambda: compiled(objects, of)) if objects and of else (lambda: None)
    step = min(every, grace) / 4
    try:
        while True:
            try:
                child.wait(timeout=step)
                break
            except subprocess.TimeoutExpired:
                with phase.lock:
                    phase.tick(progress)
    except KeyboardInterrupt:
        child.wait()
    for thread in relays:
        thread.join()
    code = child.returncode if child.returncode >= 0 else 128 - child.returncode
    with phase.lock:
        phase.end(code)
    return code


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        usage="%(prog)s WHAT --about TIME [options] -- COMMAND...",
    )
    parser.add_argument("what", help="what the phase does, as its lines name it")
    parser.add_argument("--about", required=True, help='how long on two cores, e.g. "4 min"')
    parser.add_argument("--every", type=float, default=EVERY_S, help="the heartbeat, in seconds")
    parser.add_argument("--grace", type=float, default=GRACE_S, help="done within it: no lines")
    parser.add_argument("--objects", type=Path, help="a build folder whose .o files are counted")
    parser.add_argument("--of", type=int, default=0, help="how many files the build compiles")
    parser.add_argument("--log", type=Path, help="the command's output goes to this file")
    if "--" not in argv or argv[-1] == "--":
        parser.error("no command given (after --)")
    split = argv.index("--")
    args = parser.parse_args(argv[:split])
    return run(
        args.what,
        args.about,
        argv[split + 1 :],
        every=args.every,
        grace=args.grace,
        objects=args.objects,
        of=args.of,
        log=args.log,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
