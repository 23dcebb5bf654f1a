"""Browser settings shared by every Playwright test (tests/web/conftest.py loads this file).

Debian's Chromium is used as installed: `playwright install` cannot download browsers on a
closed network. The flags keep a headless browser from calling home on its own, so a test
can assert that the page itself made no request beyond our origin.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urljoin

CHROMIUM_PATH = os.environ.get("AGENT_PY_CHROMIUM", "/usr/bin/chromium")
HEADLESS = os.environ.get("AGENT_PY_HEADED", "") == ""
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]

# Milliseconds. Pyodide boots in 2-4 s on a 2-core machine; allow for a cold disk and CI load.
DEFAULT_TIMEOUT_MS = 30_000
NAVIGATION_TIMEOUT_MS = 30_000
BOOT_TIMEOUT_MS = 90_000  # for waits that cover a whole Pyodide boot plus package loading


def launch_options(**overrides: Any) -> dict[str, Any]:
    """Keyword arguments for `playwright.chromium.launch()` (or launch_persistent_context)."""
    options: dict[str, Any] = {
        "executable_path": CHROMIUM_PATH,
        "headless": HEADLESS,
        "args": list(LAUNCH_ARGS),
    }
    extra_args = overrides.pop("extra_args", [])
    options["args"] += extra_args
    options.update(overrides)
    return options


def page_url(base_url: str, path: str = "") -> str:
    """URL of a page under web/, e.g. page_url(base, "dev/pyodide_boot.html")."""
    return urljoin(base_url if base_url.endswith("/") else base_url + "/", path.lstrip("/"))
