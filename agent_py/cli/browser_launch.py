"""Starting what the page driver needs: the page's bundle rebuilt when the sources are newer,
the page's server on loopback, and the browser with its page (fresh, or on a profile kept
between runs). CPython only (a subprocess, a local HTTP server, Playwright).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from agent_py.cli.checkout import ROOT, stale_sources
from agent_py.cli.web_server import start_server
from agent_py.core.errors import SetupError

NETWORK_VARIABLE = "AGENT_PY_BROWSER_NETWORK"
"""Read by playwright.config.py: ``open`` lets the browser leave loopback."""
PORT_FILE = "agent_py-port"  # in a browser profile: the port of the origin its storage is for


def ensure_bundle() -> None:
    """The page's vendored bundle, there and built from the current sources: rebuilt
    (scripts/vendor.py) when an agent_py source is newer."""
    manifest = ROOT / "web" / "vendor" / "manifest.json"
    if not manifest.exists():
        raise SetupError("web/vendor is missing: run 'bash scripts/setup.sh' first")
    changed = stale_sources()
    if changed:
        print(
            f"agent_py changed since the page's bundle was built ({changed[0].name}"
            f"{' and more' if len(changed) > 1 else ''}): rebuilding it (scripts/vendor.py)",
            file=sys.stderr,
        )
        vendor = [sys.executable, str(ROOT / "scripts" / "vendor.py")]
        if subprocess.run(vendor, capture_output=True, check=False).returncode != 0:
            raise SetupError("rebuilding web/vendor failed: run 'bash scripts/setup.sh'")
        manifest.touch()  # built from these sources


def start_page_server(profile: Path | None) -> tuple[Any, str]:
    """The page's server on loopback. With a profile, on the port that profile used
    before: the browser keeps storage per origin, and the port is part of the origin."""
    if profile is None:
        return start_server(port=0)
    remembered = profile / PORT_FILE
    try:
        port = int(remembered.read_text())
    except (OSError, ValueError):
        port = 0
    try:
        server, base_url = start_server(port=port)
    except OSError:  # taken by another program meanwhile: a new origin, a cold start
        print(
            f"port {port} of the browser profile {profile} is taken: "
            "this run starts without the profile's saved state",
            file=sys.stderr,
        )
        server, base_url = start_server(port=0)
    profile.mkdir(parents=True, exist_ok=True)
    remembered.write_text(str(server.server_address[1]))
    return server, base_url


def open_page(
    playwright: Any, options: dict[str, Any], profile: Path | None, stack: contextlib.ExitStack
) -> Any:
    """A page in a fresh browser, or in one on ``profile``; ``stack`` closes the browser."""
    if profile is None:
        browser = playwright.chromium.launch(**options)
        stack.callback(browser.close)
        return browser.new_context(service_workers="block").new_page()
    context = persistent_context(playwright, options, profile, stack)
    stack.callback(context.close)
    return context.pages[0] if context.pages else context.new_page()


def persistent_context(
    playwright: Any, options: dict[str, Any], profile: Path, stack: contextlib.ExitStack
) -> Any:
    """A browser whose storage outlives the run (the model's file and its prefilled
    state among it), in ``profile``; a profile another run holds open gives way to
    a temporary one, said on stderr. Without service workers: the page's offline copy
    would serve the run the files of the previous version (a new one is taken only at
    the next load), and the terminal always has our server."""
    from playwright.sync_api import Error as PlaywrightError

    profile.mkdir(parents=True, exist_ok=True)
    # Registrations made by a profile that ran before service workers were blocked here
    # would still control the page; the Cache API's data (the model's file) stays.
    for registrations in ("Database", "ScriptCache"):
        shutil.rmtree(profile / "Default" / "Service Worker" / registrations, True)
    try:
        return playwright.chromium.launch_persistent_context(
            str(profile), service_workers="block", **options
        )
    except PlaywrightError as error:
        if "ProcessSingleton" not in str(error) and "in use" not in str(error):
            raise
    print(
        f"the browser profile {profile} is in use by another run: this run starts from a fresh one",
        file=sys.stderr,
    )
    fresh = stack.enter_context(tempfile.TemporaryDirectory(prefix="agent_py-profile-"))
    return playwright.chromium.launch_persistent_context(fresh, service_workers="block", **options)
