"""Browser settings shared by every Playwright test (tests/web/conftest.py loads this file).

Debian's Chromium is used as installed: `playwright install` cannot download browsers on a
closed network. The flags keep a headless browser from calling home on its own, so a test
can assert that the page itself made no request beyond our origin; and whatever the browser
would still send off this machine goes to a proxy on loopback that nothing answers (the
terminal runner, the tests and the benchmarks all start Chromium this way).
tests/web/test_loopback_only.py checks it in a loopback-only network namespace.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urljoin

CHROMIUM_PATH = os.environ.get("AGENT_PY_CHROMIUM", "/usr/bin/chromium")
HEADLESS = os.environ.get("AGENT_PY_HEADED", "") == ""
# Where every request that is not for this machine goes: a port on loopback where nothing
# listens, so it is refused there. Only loopback bypasses it: "<-loopback>" drops Chromium's
# own bypass rules, which would also let link-local addresses (169.254/16) go direct.
REFUSING_PROXY = "127.0.0.1:9"
LOOPBACK_BYPASS = "<-loopback>;localhost;*.localhost;127.0.0.0/8;[::1]"
# AGENT_PY_BROWSER_NETWORK=open lifts the proxy (for WebLLM weights from the internet).
LOOPBACK_ONLY = os.environ.get("AGENT_PY_BROWSER_NETWORK", "loopback") != "open"
# Chromium keeps only the last --disable-features, and Playwright passes one of its own
# before ours: so this list repeats Playwright's (1.65: the first block) and adds the features
# that still call home with it (autofill's server queries, the on-device model's updates).
DISABLED_FEATURES = [
    *("AvoidUnnecessaryBeforeUnloadCheckSync", "DestroyProfileOnBrowserClose", "HttpsUpgrades"),
    *("HttpsFirstBalancedModeAutoEnable", "LensOverlay", "MediaRouter", "PaintHolding"),
    *("ThirdPartyStoragePartitioning", "AvoidCorsURLLoaderRestartOnRedirect"),
    *("OptimizationHints", "NetworkTimeServiceQuerying", "AimEnabled", "PreconnectToSearch"),
    *("AutofillServerCommunication", "OptimizationGuideOnDeviceModel"),
    *("OptimizationGuideModelDownloading", "Translate", "CertificateTransparencyComponentUpdater"),
]
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--no-pings",
    "--password-store=basic",
    # WebRTC may not send UDP around the proxy.
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--disable-features=" + ",".join(DISABLED_FEATURES),
    # --disable-component-update leaves on-demand updates on (the on-device model's manifest
    # asks update.googleapis.com): their update server is the refusing proxy's address too.
    f"--component-updater=url-source=http://{REFUSING_PROXY}/component-updates",
]
if LOOPBACK_ONLY:
    LAUNCH_ARGS += [
        f"--proxy-server=http://{REFUSING_PROXY}",
        f"--proxy-bypass-list={LOOPBACK_BYPASS}",
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
