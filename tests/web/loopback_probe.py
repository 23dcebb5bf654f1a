"""Runs inside a loopback-only network namespace for test_loopback_only.py (not a test module).

Listens where playwright.config.py's proxy points (REFUSING_PROXY) and records each request
that reaches it, then refuses it; runs ``python -m agent_py run`` (scripted engine) as a user
would; then starts a browser with the same launch options and makes a page ask for a
link-local, a private and a public address. Prints one JSON object: the runner's exit code
and output, and what the proxy saw during each phase.

    python tests/web/loopback_probe.py WORK_DIR
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agent_py.cli import web_server  # noqa: E402
from agent_py.cli.checkout import load_browser_config  # noqa: E402

PLAN = {
    "tasks": [
        {
            "task_id": "t1",
            "task_goal": "compute",
            "steps": [
                {
                    "step_id": "s1",
                    "step_goal": "multiply",
                    "tool_name": "javascript_execute",
                    "tool_intent": "exact arithmetic",
                    "expected_output": "42",
                    "arguments": {"code": "return 6 * 7"},
                }
            ],
        }
    ]
}
OFF_LOOPBACK = [
    "http://169.254.169.254/latest/meta-data/",
    "http://10.1.2.3/",
    "https://example.com/",
]


class RecordingSink:
    """A refusing proxy: notes the first line of each request, answers 403, closes."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.socket = socket.create_server((host, int(port)))
        self.lines: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            connection, _ = self.socket.accept()
            with connection:
                connection.settimeout(5)
                try:
                    head = connection.recv(8192).split(b"\r\n", 1)[0]
                    self.lines.append(head.decode("latin-1"))
                    connection.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                except OSError as exc:
                    self.lines.append(f"(error: {exc})")

    def take(self) -> list[str]:
        taken, self.lines = self.lines, []
        return taken


def main(work: Path) -> None:
    config = load_browser_config()
    sink = RecordingSink(config.REFUSING_PROXY)
    script = work / "script.json"
    script.write_text(
        json.dumps(
            {
                "plan": f"<plan>{json.dumps(PLAN)}</plan>",
                "rethink": "<status>done</status><final>42</final>",
            }
        )
    )
    runner = subprocess.run(
        [
            *(sys.executable, "-m", "agent_py", "run", "What is six times seven?"),
            *("--engine", "scripted", "--script", str(script)),
            *("--history", str(work / "run.jsonl")),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    runner_proxy = sink.take()

    from playwright.sync_api import sync_playwright

    server, base_url = web_server.start_server(port=0)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(**config.launch_options())
        page = browser.new_page()
        page.goto(base_url + "index.html?engine=scripted")
        fetched = page.evaluate(
            """urls => Promise.all(urls.map(url => fetch(url, {mode: "no-cors"})
                .then(() => "answered", error => "failed: " + error.message)))""",
            OFF_LOOPBACK,
        )
        browser.close()
    server.shutdown()
    print(
        json.dumps(
            {
                "runner": {"code": runner.returncode, "out": runner.stdout, "err": runner.stderr},
                "runner_proxy": runner_proxy,
                "page_fetches": dict(zip(OFF_LOOPBACK, fetched, strict=True)),
                "page_proxy": sink.take(),
            }
        )
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
