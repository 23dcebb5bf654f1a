"""The bridge extension (extension/) in headless Chromium, driven through the page's relay
(web/extension-relay.js): what it lets through, what it refuses, and what servers see.

The page is a small probe served from the test server's origin (a Playwright route), so these
tests need no Pyodide boot; test_page_mcp.py runs the whole agent through the bridge.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from extension_support import (
    EXTENSION_ORIGIN,
    PlainServer,
    activity,
    launch_with_extension,
    set_lists,
    start_sdk_server,
    wait_activity,
)

pytestmark = pytest.mark.browser

PROBE = """<!doctype html><meta charset="utf-8"><title>bridge probe</title>
<script type="module">
import { ExtensionRelay } from "./extension-relay.js";
const relay = new ExtensionRelay();
let next = 1;
window.bridgeFetch = (request) => new Promise((resolve) => {
  const out = { head: null, body: "", error: null };
  relay.start(next++, request, {
    head: (status, headers) => { out.head = { status, headers }; },
    chunk: (data) => { out.body += atob(data); },
    end: () => resolve(out),
    error: (error) => { out.error = error; resolve(out); },
  });
});
window.bridgeStart = (request) => relay.start(next++, request, {
  head: () => { window.slowHead = true; }, chunk: () => {}, end: () => {}, error: () => {},
});
window.relay = relay;
window.probeReady = true;
</script>"""

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def b64(value: Any) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


@pytest.fixture(scope="module")
def extension(
    playwright: Any, tmp_path_factory: pytest.TempPathFactory, browser_settings: Any
) -> Iterator[tuple[Any, Any]]:
    """One browser with the extension for the module: (context, extension service worker)."""
    context, worker = launch_with_extension(
        playwright, tmp_path_factory.mktemp("profile"), browser_settings.launch_options()
    )
    context.set_default_timeout(browser_settings.DEFAULT_TIMEOUT_MS)
    context.route(
        "**/bridge-probe.html",
        lambda route: route.fulfill(body=PROBE, content_type="text/html; charset=utf-8"),
    )
    yield context, worker
    context.close()


@pytest.fixture(scope="module")
def mcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The SDK's MCP server (no CORS headers), told to accept the extension's Origin."""
    with start_sdk_server(tmp_path_factory.mktemp("sdk"), [EXTENSION_ORIGIN]) as url:
        yield url


@pytest.fixture
def plain() -> Iterator[PlainServer]:
    with PlainServer() as server:
        yield server


@pytest.fixture
def page_origin(base_url: str) -> str:
    return base_url.rstrip("/")


def open_probe(context: Any, url: str) -> Any:
    page = context.new_page()
    page.goto(url)
    page.wait_for_function("window.probeReady === true")
    return page


@pytest.fixture
def probe(extension: tuple[Any, Any], base_url: str) -> Iterator[Any]:
    context, worker = extension
    worker.evaluate("chrome.storage.session.set({activity: []})")
    page = open_probe(context, base_url + "bridge-probe.html")
    yield page
    page.close()


def bridge_fetch(page: Any, url: str, **request: Any) -> dict[str, Any]:
    return dict(page.evaluate("r => window.bridgeFetch(r)", {"url": url, **request}))


def test_the_page_cannot_fetch_a_server_without_cors_but_the_bridge_can(
    extension: tuple[Any, Any], probe: Any, mcp_url: str, page_origin: str
) -> None:
    _, worker = extension
    server_origin = mcp_url.rsplit("/", 1)[0]
    set_lists(worker, pages=[page_origin], targets=[server_origin])

    direct = probe.evaluate(
        """([url, body, headers]) => fetch(url, {method: "POST", body, headers})
            .then(r => "HTTP " + r.status, e => e.name)""",
        [mcp_url, json.dumps(INITIALIZE), MCP_HEADERS],
    )
    assert direct == "TypeError"  # the browser blocks it: no Access-Control-Allow-Origin

    answer = bridge_fetch(
        probe, mcp_url, method="POST", headers=MCP_HEADERS, body=b64(INITIALIZE), timeoutMs=10_000
    )
    assert answer["error"] is None
    assert answer["head"]["status"] == 200
    assert answer["head"]["headers"]["mcp-session-id"]  # all headers reach the page
    assert '"serverInfo"' in answer["body"] and "test-server" in answer["body"]
    entry = wait_activity(worker, lambda e: e["method"] == "POST")
    assert entry["page"] == page_origin
    assert entry["target"] == mcp_url
    assert entry["result"] == "HTTP 200"


def test_servers_see_the_extension_origin_and_no_credentials(
    extension: tuple[Any, Any],
    probe: Any,
    plain: PlainServer,
    page_origin: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    context, worker = extension
    set_lists(worker, pages=[page_origin], targets=[plain.origin])
    context.add_cookies([{"name": "secret", "value": "s", "url": plain.origin}])

    answer = bridge_fetch(
        probe,
        plain.origin + "/echo",
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Mcp-Session-Id": "abc",
            "Authorization": "Bearer t0k",
        },
        body=b64({"x": 1}),
    )
    seen = json.loads(answer["body"])
    assert seen["body"] == '{"x": 1}'
    assert seen["headers"]["origin"] == EXTENSION_ORIGIN
    assert seen["headers"]["mcp-session-id"] == "abc"
    assert seen["headers"]["authorization"] == "Bearer t0k"
    assert "cookie" not in seen["headers"]
    assert "referer" not in seen["headers"]

    # The SDK's default DNS-rebinding protection on loopback refuses that origin (403):
    # such a server must list chrome-extension://<id> among its allowed origins (README).
    with start_sdk_server(tmp_path_factory.mktemp("strict")) as strict_url:
        set_lists(worker, pages=[page_origin], targets=[strict_url.rsplit("/", 1)[0]])
        answer = bridge_fetch(
            probe, strict_url, method="POST", headers=MCP_HEADERS, body=b64(INITIALIZE)
        )
    assert answer["head"]["status"] == 403
    assert "Invalid Origin header" in answer["body"]


def test_headers_methods_and_sizes_outside_the_rules_are_refused(
    extension: tuple[Any, Any], probe: Any, plain: PlainServer, page_origin: str
) -> None:
    _, worker = extension
    set_lists(worker, pages=[page_origin], targets=[plain.origin])
    url = plain.origin + "/echo"

    cookie = bridge_fetch(probe, url, method="GET", headers={"Cookie": "a=b"})
    put = bridge_fetch(probe, url, method="PUT")
    huge = bridge_fetch(probe, url, method="POST", body="A" * (6 * 1024 * 1024))

    assert cookie["error"]["kind"] == "refused" and "Cookie" in cookie["error"]["message"]
    assert put["error"]["kind"] == "refused" and "PUT" in put["error"]["message"]
    assert huge["error"]["kind"] == "refused" and "larger than" in huge["error"]["message"]
    assert plain.seen == []


def test_a_server_that_does_not_answer_in_time_is_cut_off(
    extension: tuple[Any, Any], probe: Any, plain: PlainServer, page_origin: str
) -> None:
    _, worker = extension
    set_lists(worker, pages=[page_origin], targets=[plain.origin])
    started = time.monotonic()

    answer = bridge_fetch(probe, plain.origin + "/hang?s=3", method="GET", timeoutMs=500)

    assert time.monotonic() - started < 2.5
    assert answer["error"] == {
        "kind": "timeout",
        "message": f"{plain.origin} did not answer within 0.5 s.",
    }


def test_an_unapproved_target_is_refused_before_anything_is_sent(
    extension: tuple[Any, Any], probe: Any, plain: PlainServer, page_origin: str
) -> None:
    _, worker = extension
    set_lists(worker, pages=[page_origin], targets=[])

    answer = bridge_fetch(probe, plain.origin + "/echo", method="GET")

    assert answer["head"] is None
    assert answer["error"]["kind"] == "refused"
    message = answer["error"]["message"]
    assert plain.origin in message and "on this machine" in message and "Approve it" in message
    assert plain.seen == []
    entry = wait_activity(worker, lambda e: e["result"].startswith("refused"))
    assert entry["target"] == plain.origin + "/echo"


def test_plain_http_is_refused_except_on_loopback(
    extension: tuple[Any, Any], probe: Any, page_origin: str
) -> None:
    _, worker = extension
    set_lists(worker, pages=[page_origin], targets=["http://192.168.1.20:8000"])

    answer = bridge_fetch(probe, "http://192.168.1.20:8000/mcp", method="GET")

    assert answer["error"]["kind"] == "refused"
    assert "only https" in answer["error"]["message"]


def test_a_page_from_another_origin_is_refused(
    extension: tuple[Any, Any], plain: PlainServer, base_url: str, page_origin: str
) -> None:
    context, worker = extension
    set_lists(worker, pages=[page_origin], targets=[plain.origin])
    other = base_url.replace("127.0.0.1", "localhost")  # same files, another origin
    page = open_probe(context, other + "bridge-probe.html")
    try:
        presence = page.evaluate("window.relay.detect({again: true})")
        answer = bridge_fetch(page, plain.origin + "/echo", method="GET")
    finally:
        page.close()

    assert presence["present"] is True and presence["allowed"] is False
    assert answer["error"]["kind"] == "refused"
    assert "is not allowed to use the agent_py bridge" in answer["error"]["message"]
    assert plain.seen == []
    entry = wait_activity(worker, lambda e: e["page"] == other.rstrip("/"))
    assert entry["result"].startswith("refused")

    # The user allows that page in the options: from then on it may use the bridge.
    options = context.new_page()
    options.goto(f"{EXTENSION_ORIGIN}/options.html")
    options.get_by_label("Page origin").fill(other)
    options.get_by_role("button", name="Allow page").click()
    options.get_by_role("button", name=f"Remove page {other.rstrip('/')}").wait_for()
    options.close()
    page = open_probe(context, other + "bridge-probe.html")
    try:
        assert bridge_fetch(page, plain.origin + "/echo", method="GET")["head"]["status"] == 200
    finally:
        page.close()


def test_redirects_are_followed_hop_by_hop_only_to_approved_servers(
    extension: tuple[Any, Any], probe: Any, plain: PlainServer, page_origin: str
) -> None:
    _, worker = extension
    with PlainServer() as elsewhere:
        set_lists(worker, pages=[page_origin], targets=[plain.origin])
        to_elsewhere = f"{plain.origin}/redirect?to={elsewhere.origin}/echo"
        refused = bridge_fetch(probe, to_elsewhere, method="POST", body=b64({}))
        assert elsewhere.seen == []  # nothing, not even a preflight, reached the other host

    same = bridge_fetch(probe, f"{plain.origin}/redirect?to=/echo", method="POST", body=b64({}))
    see_other = bridge_fetch(
        probe, f"{plain.origin}/redirect?status=303&to=/echo", method="POST", body=b64({})
    )

    assert refused["error"]["kind"] == "refused"
    assert "redirected to" in refused["error"]["message"]
    assert elsewhere.origin in refused["error"]["message"]
    assert json.loads(same["body"])["path"] == "/echo"
    assert json.loads(same["body"])["method"] == "POST"  # 307 keeps the method and body
    assert json.loads(see_other["body"])["method"] == "GET"  # 303 turns it into a GET


def test_a_request_is_aborted_when_the_page_goes_away(
    extension: tuple[Any, Any], plain: PlainServer, base_url: str, page_origin: str
) -> None:
    context, worker = extension
    set_lists(worker, pages=[page_origin], targets=[plain.origin])
    page = open_probe(context, base_url + "bridge-probe.html")
    page.evaluate("r => window.bridgeStart(r)", {"url": plain.origin + "/slow", "method": "GET"})
    page.wait_for_function("window.slowHead === true")

    page.close()

    deadline = time.monotonic() + 10
    while not plain.disconnects and time.monotonic() < deadline:
        time.sleep(0.1)
    assert plain.disconnects, "the server kept streaming to a page that was gone"
    entry = wait_activity(worker, lambda e: e["target"] == plain.origin + "/slow")
    assert entry["result"] == "HTTP 200, then the page went away"


def test_the_options_page_approves_a_server_and_shows_the_activity(
    extension: tuple[Any, Any], plain: PlainServer, base_url: str, page_origin: str
) -> None:
    context, worker = extension
    set_lists(worker, pages=[page_origin], targets=[])
    options = context.new_page()
    options.goto(f"{EXTENSION_ORIGIN}/options.html")
    assert options.locator("#extension-origin").inner_text() == EXTENSION_ORIGIN
    assert options.get_by_role("button", name=f"Remove page {page_origin}").is_visible()

    options.get_by_label("Server URL").fill("http://10.0.0.5:8000/mcp")
    options.get_by_role("button", name="Approve server").click()
    assert "only https" in options.get_by_role("status").inner_text()

    options.get_by_label("Server URL").fill(plain.origin + "/mcp")
    options.get_by_role("button", name="Approve server").click()
    options.get_by_role("button", name=f"Remove server {plain.origin}").wait_for()
    assert "on this machine" in options.get_by_role("status").inner_text()

    page = open_probe(context, base_url + "bridge-probe.html")
    answer = bridge_fetch(page, plain.origin + "/echo", method="DELETE")
    page.close()
    assert answer["head"]["status"] == 200

    row = options.locator("#activity tbody tr", has_text="DELETE")
    row.wait_for()
    cells = row.locator("td").all_inner_texts()
    assert cells[1:] == [page_origin, "DELETE", plain.origin + "/echo", "HTTP 200"]

    options.get_by_role("button", name=f"Remove server {plain.origin}").click()
    options.get_by_text("No server is approved yet.").wait_for()
    options.close()
    assert activity(worker)[0]["method"] == "DELETE"


def test_the_extension_key_fixes_its_id(extension: tuple[Any, Any]) -> None:
    _, worker = extension
    manifest = json.loads((Path(__file__).parents[2] / "extension" / "manifest.json").read_text())
    assert worker.url.startswith(EXTENSION_ORIGIN + "/")
    assert manifest["content_scripts"][0]["matches"] == ["http://127.0.0.1/*", "http://localhost/*"]
    assert "<all_urls>" not in json.dumps(manifest)
