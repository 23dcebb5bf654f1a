"""A real OpenAI-compatible model server for the tests: llama.cpp's own llama-server (native),
serving the bundled SmolLM2 GGUF on loopback.

``bash scripts/test.sh`` builds it into .artifacts/model-server (scripts/setup_model_server.sh).
Without it a test that needs it fails in CI (CI=true) with the set-up step to run, and is
skipped with that reason elsewhere.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.needs import need

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / ".artifacts" / "model-server" / "llama-server"
MODEL_FILE = ROOT / "web" / "models" / "smollm2-135m-instruct-q4_1.gguf"
MODEL = "smollm2-135m-instruct-q4_1"
"""The name the server gives the model (its alias)."""
START_GUARD_S = 300.0
"""A hang guard only: the server is ready when it answers, which takes a few seconds."""


def require_server() -> None:
    """Fail (CI) or skip (elsewhere) when the server or its model is not set up."""
    missing = [str(path) for path in (SERVER, MODEL_FILE) if not path.exists()]
    need(
        f"the test model server is not set up ({', '.join(missing)} missing)" if missing else None,
        "run 'bash scripts/setup_model_server.sh' (scripts/test.sh runs it)",
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def llama_server(log: Path, *, n_ctx: int = 4096, threads: int = 2) -> Iterator[ServerProcess]:
    """The server on a free loopback port; yields it once its model is loaded (``/health``
    answers 200; it answers 503 while loading)."""
    require_server()
    port = free_port()
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [
        str(SERVER),
        "--model",
        str(MODEL_FILE),
        "--alias",
        MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--ctx-size",
        str(n_ctx),
        "--threads",
        str(threads),
        # One slot: each request finds the cache the one before left, so a run is repeatable
        # (with several slots a request may land on any of them, and a greedy small model's
        # replies turn on the tiny differences between a cached and a recomputed prefix).
        "--parallel",
        "1",
    ]
    with log.open("wb") as output:
        process = subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        server = ServerProcess(process, f"http://127.0.0.1:{port}/v1", log)
        try:
            server.wait_ready()
            yield server
        finally:
            server.stop()


class ServerProcess:
    def __init__(self, process: subprocess.Popen[bytes], base_url: str, log: Path) -> None:
        self.process = process
        self.base_url = base_url
        self.log = log

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_GUARD_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the model server exited at start; its log:\n{self.tail()}")
            try:
                health = self.base_url.removesuffix("/v1") + "/health"
                with urllib.request.urlopen(health, timeout=5) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)  # not listening or loading: the next try is the event we wait for
        raise RuntimeError(f"the model server did not answer within {START_GUARD_S} s")

    def wait_log(self, text: str, *, seen: int = 0) -> None:
        """Until the server's log holds ``text`` more than ``seen`` times (it logs as things
        happen; the guard is for a server that never does)."""
        deadline = time.monotonic() + START_GUARD_S
        while self.log.read_text(errors="replace").count(text) <= seen:
            if time.monotonic() > deadline:
                raise AssertionError(f"the server never logged {text!r}; its log:\n{self.tail()}")
            time.sleep(0.1)

    def kill(self) -> None:
        """The server dies at once (SIGKILL), as a crash would."""
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
