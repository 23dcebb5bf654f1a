"""web/sw.js: the page boots offline from the service worker's cache after one visit.

Each browser test serves its own mirror of web/ (symlinks, plus the files a test changes) from
its own server, so it can stop that server, or change a version, without touching the repo or
the session's server; and it uses a fresh browser context, so no other test's caches or service
workers interfere.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_py.cli import web_server as serve

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "web"


HARNESS = "dev/offline_harness.html"
HARNESS_FILES = [
    "dev/offline_harness.html",
    "dev/offline_harness.js",
    "dev/pyodide_boot_worker.js",
    "dev/pyodide_boot_checks.py",
    "dev/event_loop_checks.py",
]
# Never part of the app shell: dev pages, generated vendor files (precached from the manifest),
# model weights (too large; fetched from the configured model URL) and the worker script itself.
NOT_SHELL = ("vendor/", "dev/", "models/")


def shell_files() -> list[str]:
    """SHELL_FILES as written in sw.js."""
    source = (WEB / "sw.js").read_text()
    block = re.search(r"const SHELL_FILES = \[(.*?)\];", source, re.S)
    assert block, "sw.js has no SHELL_FILES list"
    return re.findall(r'"([^"]+)"', block.group(1))


def sw_constant(name: str, source: str | None = None) -> str:
    source = source or (WEB / "sw.js").read_text()
    match = re.search(rf'const {name} = "([^"]*)";', source)
    assert match, f"sw.js has no {name}"
    return match.group(1)


def manifest() -> dict:
    return json.loads((WEB / "vendor" / "manifest.json").read_text())


def precached_vendor_files() -> list[dict]:
    return [f for f in manifest()["files"] if f.get("precache", True)]


def make_mirror(target: Path, drop: tuple[str, ...] = ()) -> Path:
    """web/ as per-file symlinks (models/ left out), so a test can replace single files."""
    for source in WEB.rglob("*"):
        rel = source.relative_to(WEB).as_posix()
        if not source.is_file() or rel.startswith("models/") or rel in drop:
            continue
        link = target / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(source)
    return target


def replace_file(mirror: Path, rel: str, text: str) -> None:
    path = mirror / rel
    path.unlink()
    path.write_text(text)


class Site:
    """A server for one mirror; stop() and start() keep the port, hence the origin."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = 0
        self.server = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> None:
        self.server, _ = serve.start_server(port=self.port, directory=self.directory)
        self.port = self.server.server_address[1]

    def stop(self) -> None:
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


@pytest.fixture
def mirror(vendored: Path, tmp_path: Path) -> Path:
    return make_mirror(tmp_path / "web")


@pytest.fixture
def site(mirror: Path) -> Iterator[Site]:
    site = Site(mirror)
    yield site
    site.stop()


@pytest.fixture
def fresh(browser, browser_settings):
    """A browser context with empty storage that records every request and response it saw
    (the service worker's own fetches included: their `service_worker` is set)."""
    context = browser.new_context()
    context.set_default_timeout(browser_settings.DEFAULT_TIMEOUT_MS)
    context.requests = []
    context.responses = []
    context.on("request", lambda request: context.requests.append(request))
    context.on("response", lambda response: context.responses.append(response))
    yield context
    context.close()


def visit(page, url: str, browser_settings, state: str = "ready", boot: bool = True) -> dict:
    """Open the harness (boot=False: stop once the service worker is active) and wait."""
    page.goto(url + HARNESS + ("" if boot else "?boot=no"))
    page.wait_for_selector(
        "body:not([data-status='registering']):not([data-status='caching'])"
        ":not([data-status='booting'])",
        timeout=browser_settings.BOOT_TIMEOUT_MS,
    )
    report = page.evaluate("window.offlineReport")
    assert page.get_attribute("body", "data-status") == state, report.get("error")
    return report


def cached_urls(page) -> dict[str, list[str]]:
    return page.evaluate(
        """async () => {
            const out = {};
            for (const name of await caches.keys()) {
                out[name] = (await (await caches.open(name)).keys()).map((r) => r.url);
            }
            return out;
        }"""
    )


def expected_cache_name(app_version: str | None = None, vendor_version: str | None = None) -> str:
    return (
        f"agent_py-{app_version or sw_constant('APP_VERSION')}-"
        f"{vendor_version or manifest()['version']}"
    )


def test_shell_list_matches_the_files_of_the_page() -> None:
    on_disk = {
        p.relative_to(WEB).as_posix()
        for p in WEB.rglob("*")
        if p.is_file() and not p.relative_to(WEB).as_posix().startswith(NOT_SHELL)
    } - {"sw.js"}
    listed = set(shell_files())
    missing = sorted(on_disk - listed)
    assert not missing, f"add these to SHELL_FILES in web/sw.js: {missing}"
    assert not listed - on_disk, f"SHELL_FILES lists files that do not exist: {listed - on_disk}"


@pytest.mark.browser
def test_page_boots_offline_from_the_cache_and_stays_cross_origin_isolated(
    fresh, site: Site, browser_settings
) -> None:
    page = fresh.new_page()
    started = time.perf_counter()
    first = visit(page, site.url, browser_settings)
    first_visit_s = time.perf_counter() - started

    # The first visit precached the shell and the vendored files into one versioned cache; the
    # stock standard library (the page loads the compiled one) stays out of it.
    files = precached_vendor_files()
    stock_stdlib = "vendor/pyodide/python_stdlib.zip"
    assert stock_stdlib in {f["path"] for f in manifest()["files"]}
    name = expected_cache_name()
    cached = cached_urls(page)
    assert list(cached) == [name]
    assert site.url + stock_stdlib not in cached[name]
    expected = {site.url + path for path in shell_files()}
    expected |= {site.url + f["path"] for f in files} | {site.url + "vendor/manifest.json"}
    expected |= {site.url + path for path in HARNESS_FILES}
    # Exactly these: nothing fetched at run time (the boot, the page itself) was added.
    assert set(cached[name]) == expected
    assert first["installed"]["skipped"] == []
    assert first["installed"]["bytes"] == sum(f["size"] for f in files)
    assert first["progress"][-1] == [len(expected) - len(HARNESS_FILES) - 1] * 2
    assert first["controlled"] is True
    # The service worker's own downloads show up here (so the update test can count them).
    assert any(r.request.service_worker for r in fresh.responses if r.url.endswith(".whl"))

    site.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(site.url + HARNESS, timeout=5)

    fresh.responses.clear()
    started = time.perf_counter()
    page.reload()
    offline = visit(page, site.url, browser_settings)
    offline_boot_s = time.perf_counter() - started

    assert offline["controlledAtLoad"] is True
    assert offline["boot"]["checks"]["agent_py"]["ok"] is True
    assert offline.get("installed") is None  # same version: nothing was installed again
    # Cached responses kept their COOP/COEP headers: the page is still cross-origin isolated.
    assert offline["crossOriginIsolated"] is True
    assert page.evaluate("crossOriginIsolated && typeof SharedArrayBuffer === 'function'")
    wheels = [r for r in fresh.responses if r.url.endswith(".whl")]
    assert wheels and all(r.from_service_worker and r.status == 200 for r in wheels)
    print(
        f"\nfirst visit {first_visit_s:.1f} s (service worker active after "
        f"{first['timings']['sw_active_ms']} ms; precache {first['installed']['ms']} ms, "
        f"{first['installed']['files']} files, {first['installed']['bytes'] / 1e6:.1f} MB); "
        f"offline reload to ready {offline_boot_s:.1f} s, timings {offline['timings']}, "
        f"pyodide {offline['boot']['timings']}"
    )


@pytest.mark.browser
@pytest.mark.parametrize("change", ["app version", "vendor version"])
def test_a_new_version_installs_and_deletes_the_old_cache(
    fresh, site: Site, mirror: Path, browser_settings, change: str
) -> None:
    page = fresh.new_page()
    visit(page, site.url, browser_settings, boot=False)
    old = expected_cache_name()
    assert list(cached_urls(page)) == [old]

    # Come back online (same port, same origin) to a new version of the page.
    site.stop()
    if change == "app version":
        source = (WEB / "sw.js").read_text()
        new_source = source.replace('const APP_VERSION = "', 'const APP_VERSION = "next-', 1)
        replace_file(mirror, "sw.js", new_source)
        new = expected_cache_name(app_version=sw_constant("APP_VERSION", new_source))
    else:
        bumped = {**manifest(), "version": "next-" + manifest()["version"]}
        replace_file(mirror, "vendor/manifest.json", json.dumps(bumped))
        new = expected_cache_name(vendor_version=bumped["version"])
    site.start()

    fresh.responses.clear()
    page.reload()
    report = visit(page, site.url, browser_settings, boot=False)

    assert report["installed"]["cache"] == new
    # Activation deleted the old version's cache; the new one is complete.
    cached = cached_urls(page)
    assert list(cached) == [new]
    assert site.url + "vendor/pyodide/pyodide.asm.wasm" in cached[new]
    # Unchanged vendor files were copied from the old cache, not downloaded again.
    assert report["installed"]["reused"] == len(precached_vendor_files())
    from_network = [
        r.url
        for r in fresh.responses
        if r.url.endswith((".whl", ".wasm", ".zip"))
        and (r.request.service_worker is not None or not r.from_service_worker)
    ]
    assert from_network == []


@pytest.mark.browser
def test_weights_and_cross_origin_requests_pass_by_the_service_worker(
    fresh, site: Site, mirror: Path, browser_settings
) -> None:
    (mirror / "models").mkdir()
    (mirror / "models" / "tiny.gguf").write_bytes(b"GGUF" + bytes(1000))
    other = Site(mirror)  # another port: another origin
    try:
        page = fresh.new_page()
        visit(page, site.url, browser_settings, boot=False)
        fresh.requests.clear()
        fresh.responses.clear()
        page.evaluate(
            """async (other) => {
                await (await fetch("/models/tiny.gguf")).arrayBuffer();
                await fetch("/models/tiny.gguf", {headers: {Range: "bytes=0-3"}});
                await fetch(other + "ui/sessions.js", {mode: "cors"}).catch(() => null);
            }""",
            other.url,
        )
    finally:
        other.stop()
    # Each went straight from the page to the network: no service worker answered or re-sent it.
    requested = [(r.url, r.service_worker is not None) for r in fresh.requests]
    assert requested == [
        (site.url + "models/tiny.gguf", False),
        (site.url + "models/tiny.gguf", False),
        (other.url + "ui/sessions.js", False),
    ]
    assert not [r for r in fresh.responses if r.from_service_worker]
    assert not [u for u in cached_urls(page)[expected_cache_name()] if "models/" in u]


@pytest.mark.browser
def test_a_missing_vendor_file_fails_the_install_with_a_clear_error(
    fresh, vendored: Path, tmp_path: Path, browser_settings
) -> None:
    mirror = make_mirror(tmp_path / "web", drop=("vendor/marked/LICENSE",))
    site = Site(mirror)
    try:
        page = fresh.new_page()
        report = visit(page, site.url, browser_settings, state="failed", boot=False)
    finally:
        site.stop()
    assert report["error"].startswith("Offline use is unavailable: Offline copy not installed:")
    assert "vendor/marked/LICENSE: HTTP 404" in report["error"]
    # A failed install activates nothing: the page stays uncontrolled.
    assert page.evaluate("navigator.serviceWorker.controller") is None


@pytest.mark.browser
def test_a_missing_shell_file_is_skipped_not_fatal(
    fresh, vendored: Path, tmp_path: Path, browser_settings
) -> None:
    mirror = make_mirror(tmp_path / "web", drop=("style.css",))
    site = Site(mirror)
    try:
        page = fresh.new_page()
        report = visit(page, site.url, browser_settings, boot=False)
    finally:
        site.stop()
    assert report["installed"]["skipped"] == ["style.css"]
    assert site.url + "style.css" not in cached_urls(page)[expected_cache_name()]


def test_mirror_helper_leaves_the_repo_alone(tmp_path: Path) -> None:
    # replace_file must swap the symlink for a file, never write through it into web/.
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "sw.js").symlink_to(WEB / "sw.js")
    before = (WEB / "sw.js").read_text()
    replace_file(tmp_path / "web", "sw.js", "changed")
    assert (WEB / "sw.js").read_text() == before
    assert (tmp_path / "web" / "sw.js").read_text() == "changed"
    shutil.rmtree(tmp_path / "web")
