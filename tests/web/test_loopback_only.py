"""The browser we start contacts nothing but loopback (playwright.config.py's flags and proxy).

The terminal runner (``python -m agent_py run``) and a page run inside a loopback-only network
namespace (``unshare -rn``) under strace, which records every connect() and sendto() of every
process. loopback_probe.py listens where the refusing proxy points and records what reaches
it. Outside such a namespace no test here reaches for an address off loopback.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_py import read_history_file
from agent_py.core.events import EventType
from tests.needs import need

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("loopback_probe.py")
# fd decoration (strace -yy) and the address of a sockaddr, IPv4 or IPv6
SOCKET_KIND = re.compile(r"^\d+\s+(connect|sendto)\(\d+<(\w+):\[([^\]]*)\]>")
ADDRESS = re.compile(r'inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)"')


def loopback(address: str) -> bool:
    return address.startswith(("127.", "::ffff:127.")) or address == "::1"


def off_loopback(trace: str) -> tuple[list[str], list[str]]:
    """(attempts, probes): TCP connects and datagrams to addresses off loopback; UDP connects
    (a route lookup: no packet is sent) are probes, reported apart."""
    attempts, probes = [], []
    for line in trace.splitlines():
        match = SOCKET_KIND.match(line)
        if not match or not match.group(2).startswith(("TCP", "UDP")):
            continue
        call, kind, fd_info = match.groups()
        addresses = [a or b for a, b in ADDRESS.findall(line)]
        if call == "sendto" and not addresses and "->" in fd_info:  # a connected socket
            addresses = [fd_info.split("->")[1].rsplit(":", 1)[0].strip("[]")]
        for address in addresses:
            if loopback(address):
                continue
            if call == "connect" and kind.startswith("UDP"):
                probes.append(line)
            else:
                attempts.append(line)
    return attempts, probes


def proxied(request_line: str) -> bool:
    """A request meant for another host: CONNECT host:port, or an absolute URL."""
    method, _, rest = request_line.partition(" ")
    return method == "CONNECT" or rest.startswith(("http://", "https://"))


def namespace_tools_missing() -> str | None:
    if not shutil.which("strace"):
        return "strace is missing"
    if not shutil.which("unshare") or subprocess.run(["unshare", "-rn", "true"]).returncode:
        return "unshare -rn does not work here (user namespaces are off)"
    return None


def test_the_runner_and_its_browser_contact_nothing_but_loopback(
    vendored: Path, tmp_path: Path
) -> None:
    need(
        namespace_tools_missing(),
        "run 'bash scripts/setup.sh' as root (it installs strace); user namespaces must be on",
    )
    trace = tmp_path / "trace.txt"
    strace = "strace -f -qq -yy --seccomp-bpf -e trace=connect,sendto"
    inner = f'ip link set lo up && exec {strace} -o "$0" "$@"'
    done = subprocess.run(
        [
            "unshare",
            "-rn",
            "sh",
            "-c",
            inner,
            str(trace),
            sys.executable,
            str(PROBE),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])

    # The runner ran a task in the page to its end (whatever the agent made of it).
    runner = report["runner"]
    assert "engine: Scripted test engine" in runner["out"], runner["err"]
    history = read_history_file(tmp_path / "run.jsonl")
    assert [event.type for event in history if event.type == EventType.FINAL] == [EventType.FINAL]
    attempts, probes = off_loopback(trace.read_text())
    assert attempts == []
    # What reached the refusing proxy: nothing the runner's browser meant for elsewhere (a
    # direct request to that loopback address, "POST /path", would be the component
    # updater's, which playwright.config.py points there); the page's deliberate requests for
    # link-local, private and public addresses all ended there, and failed.
    assert [line for line in report["runner_proxy"] if proxied(line)] == []
    assert all(result.startswith("failed") for result in report["page_fetches"].values())
    assert sorted(report["page_proxy"]) == [
        "CONNECT example.com:443 HTTP/1.1",
        "GET http://10.1.2.3/ HTTP/1.1",
        "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1",
    ]
    print(f"UDP route probes (no packet sent): {len(probes)}")
