"""The bridge extension (extension/) in headless Chromium, driven through the page's relay
(web/ui/extension-relay.js): what it lets through, what it refuses, what servers see, and the
user's consent, given and taken back in the extension's own pages (consent.html, options.html).

The page is a small probe served from the test server's origin (a Playwright route), so these
tests need no Pyodide boot; test_page_mcp.py runs the whole agent through the bridge.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from extension_support import (
    EXTENSION_ORIGIN,
    PlainServer,
    activity,
    consent_page,
    holds_access,
    launch_with_extension,
    policy,
    set_lists,
    set_policy,
    start_sdk_server,
    wait_activity,
)

from agent_py.cli import web_server as serve

pytestmark = pytest.mark.browser

PROBE = """<!doctype html><meta charset="utf-8"><title>bridge probe</title>
<script type="module">
import { ExtensionRelay } from "./ui/extension-relay.js";
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
  head: () => { window.slowHead = true; }, chunk: () => {}, end: () => {},
  error: (error) => { window.slowError = error; },
});
window.rawHello = () => new Promise((resolve) => {
  // What any script on the page can do, without the relay: ask, and wait for an answer.
  const channel = new MessageChannel();
  channel.port1.onmessage = (event) => resolve(event.data);
  setTimeout(() => resolve(null), 2000);
  const hello = { channel: "agent_py-bridge", type: "hello" };
  window.postMessage(hello, location.origin, [channel.port2]);
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
def probe(extension: tuple[Any, Any], base_url: str, page_origin: str) -> Iterator[Any]:
    """The probe page, one of the bridge's pages (no server allowed yet), with an empty log."""
    context, worker = extension
    worker.evaluate("chrome.storage.session.set({activity: {}, refusals: 0})")
    set_policy(extension, {page_origin: []})
    page = open_probe(context, base_url + "bridge-probe.html")
    yield page
    page.close()


@pytest.fixture
def other_port() -> Iterator[str]:
    """web/ served on another loopback port: the same host, another origin."""
    server, url = serve.start_server(port=0)
    yield url
    server.shutdown()
    server.server_close()


def start_fetch(page: Any, url: str, **request: Any) -> None:
    """Starts a bridge request without waiting for it; ``finish_fetch`` gives its outcome."""
    page.evaluate("r => { window.pending = window.bridgeFetch(r); }", {"url": url, **request})


def finish_fetch(page: Any) -> dict[str, Any]:
    return dict(page.evaluate("window.pending"))


def open_options(context: Any) -> Any:
    options = context.new_page()
    options.goto(f"{EXTENSION_ORIGIN}/options.html")
    return options


def bridge_fetch(page: Any, url: str, **request: Any) -> dict[str, Any]:
    return dict(page.evaluate("r => window.bridgeFetch(r)", {"url": url, **request}))


def test_the_page_cannot_fetch_a_server_without_cors_but_the_bridge_can(
    extension: tuple[Any, Any], probe: Any, mcp_url: str, page_origin: str
) -> None:
    _, worker = extension
    server_origin = mcp_url.rsplit("/", 1)[0]
    set_lists(extension, pages=[page_origin], targets=[server_origin])

    direct = probe.evaluate(
        """([url, body, headers]) => fetch(url, {method: "POST", body, headers})
            .then(r => "HTTP " + r.status, e => e.name)""",
        [mcp_url, json.dumps(INITIALIZE), MCP_HEADERS],
    )
    assert direct == "TypeError"  # the browser blocks it: no Access-Control-Allow-Origin

    answer = bridge_fetch(
        probe, mcp_url, method="POST", headers=MCP_HEADERS, body=b64(INITIALIZE), timeout_ms=10_000
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
    context, _ = extension
    set_lists(extension, pages=[page_origin], targets=[plain.origin])
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
    # such a server must list chrome-extension://<id> among its allowed origins (docs/mcp.md).
    with start_sdk_server(tmp_path_factory.mktemp("strict")) as strict_url:
        set_lists(extension, pages=[page_origin], targets=[strict_url.rsplit("/", 1)[0]])
        answer = bridge_fetch(
            probe, strict_url, method="POST", headers=MCP_HEADERS, body=b64(INITIALIZE)
        )
    assert answer["head"]["status"] == 403
    assert "Invalid Origin header" in answer["body"]


def test_headers_methods_and_sizes_outside_the_rules_are_refused(
    extension: tuple[Any, Any], probe: Any, plain: PlainServer, page_origin: str
) -> None:
    set_lists(extension, pages=[page_origin], targets=[plain.origin])
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
    set_lists(extension, pages=[page_origin], targets=[plain.origin])

    # The server would answer after 60 s: a timeout error proves the bridge cut it off.
    answer = bridge_fetch(probe, plain.origin + "/hang?s=60", method="GET", timeout_ms=500)

    assert answer["error"] == {
        "kind": "timeout",
        "message": f"{plain.origin} did not answer within 0.5 s.",
    }


def test_the_first_request_asks_the_user_and_deny_sends_nothing(
    extension: tuple[Any, Any], probe: Any, plain: PlainServer, page_origin: str
) -> None:
    context, worker = extension
    start_fetch(probe, plain.origin + "/echo", method="GET")

    prompt = consent_page(context, page_origin, plain.origin)
    assert "on this machine" in prompt.locator("#detail").inner_text()
    assert plain.seen == []  # nothing leaves while the question is open
    prompt.get_by_role("button", name="Deny").click()
    answer = finish_fetch(probe)

    assert answer["head"] is None
    assert answer["error"]["kind"] == "refused"
    assert f"You did not allow {page_origin} to reach {plain.origin}" in answer["error"]["message"]
    assert plain.seen == []
    assert policy(worker)["denied"] == [f"{page_origin} {plain.origin}"]
    # Denied is not asked again (until the browser restarts); the log and the badge show it.
    again = bridge_fetch(probe, plain.origin + "/echo", method="GET")
    assert again["error"]["kind"] == "refused"
    assert not [p for p in context.pages if p.url.startswith(f"{EXTENSION_ORIGIN}/consent")]
    assert plain.seen == []
    entry = wait_activity(worker, lambda e: e["refused"])
    assert entry["target"] == plain.origin + "/echo" and entry["page"] == page_origin
    assert worker.evaluate("chrome.action.getBadgeText({})") == "2"

    # The options list the denial under its page; forgotten, the next request asks again.
    options = open_options(context)
    options.get_by_role(
        "button", name=f"Forget the denial of {plain.origin} for {page_origin}"
    ).click()
    options.get_by_text("No server yet: the page's first request asks you.").wait_for()
    options.close()
    assert policy(worker)["denied"] == []
    start_fetch(probe, plain.origin + "/echo", method="GET")
    consent_page(context, page_origin, plain.origin).close()  # closed without an answer
    dismissed = finish_fetch(probe)
    assert dismissed["error"]["kind"] == "refused"
    assert "closed without an answer; nothing was sent" in dismissed["error"]["message"]
    assert plain.seen == []
    assert policy(worker)["denied"] == []  # not a denial: asked again next time


def test_allow_always_is_listed_by_page_and_revoke_asks_again(
    extension: tuple[Any, Any], probe: Any, plain: PlainServer, page_origin: str
) -> None:
    context, worker = extension
    assert not holds_access(worker, plain.origin)  # no host access before the user allows it
    start_fetch(probe, plain.origin + "/echo", method="DELETE")
    consent_page(context, page_origin, plain.origin).get_by_role(
        "button", name="Always allow"
    ).click()

    assert finish_fetch(probe)["head"]["status"] == 200
    assert holds_access(worker, plain.origin)  # asked for at consent, this origin only
    assert not holds_access(worker, "http://127.0.0.1:1")
    assert policy(worker)["pages"] == {page_origin: [plain.origin]}
    assert bridge_fetch(probe, plain.origin + "/echo", method="GET")["head"]["status"] == 200

    options = open_options(context)
    assert options.locator("#extension-origin").inner_text() == EXTENSION_ORIGIN
    row = options.locator("#activity tbody tr", has_text="DELETE")
    assert row.locator("td").all_inner_texts()[1:] == [
        page_origin,
        "DELETE",
        plain.origin + "/echo",
        "127.0.0.1",  # the address webRequest reported
        "HTTP 200",
    ]
    options.get_by_role("button", name=f"Revoke {plain.origin} for {page_origin}").click()
    options.get_by_text("No server yet: the page's first request asks you.").wait_for()
    options.close()
    assert policy(worker)["pages"] == {page_origin: []}
    assert not holds_access(worker, plain.origin)  # given back with the last grant

    start_fetch(probe, plain.origin + "/echo", method="GET")
    consent_page(context, page_origin, plain.origin).get_by_role("button", name="Deny").click()
    assert finish_fetch(probe)["error"]["kind"] == "refused"


def test_allow_once_lasts_until_its_tab_closes(
    extension: tuple[Any, Any], plain: PlainServer, base_url: str, page_origin: str
) -> None:
    context, worker = extension
    set_policy(extension, {page_origin: []})
    first = open_probe(context, base_url + "bridge-probe.html")
    start_fetch(first, plain.origin + "/echo", method="GET")
    consent_page(context, page_origin, plain.origin).get_by_role(
        "button", name="Allow once"
    ).click()
    assert finish_fetch(first)["head"]["status"] == 200
    assert [g["server"] for g in policy(worker)["once"]] == [plain.origin]
    assert policy(worker)["pages"] == {page_origin: []}  # nothing kept for later

    second = open_probe(context, base_url + "bridge-probe.html")  # another tab: asked again
    start_fetch(second, plain.origin + "/echo", method="GET")
    consent_page(context, page_origin, plain.origin).get_by_role("button", name="Deny").click()
    assert finish_fetch(second)["error"]["kind"] == "refused"
    second.close()

    first.close()
    deadline = time.monotonic() + 10
    while policy(worker)["once"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert policy(worker)["once"] == []


def test_plain_http_is_refused_except_on_loopback(
    extension: tuple[Any, Any], probe: Any, page_origin: str
) -> None:
    set_lists(extension, pages=[page_origin], targets=["http://192.168.1.20:8000"])

    answer = bridge_fetch(probe, "http://192.168.1.20:8000/mcp", method="GET")

    assert answer["error"]["kind"] == "refused"
    assert "only https" in answer["error"]["message"]


def test_a_page_the_user_did_not_add_hears_nothing(
    extension: tuple[Any, Any],
    plain: PlainServer,
    base_url: str,
    page_origin: str,
    other_port: str,
) -> None:
    context, worker = extension
    set_lists(extension, pages=[page_origin], targets=[plain.origin])
    worker.evaluate("chrome.storage.session.set({activity: {}, refusals: 0})")
    other_host = base_url.replace("127.0.0.1", "localhost")  # same port, another origin
    for other in (other_host, other_port):  # and the same host on another port
        page = open_probe(context, other + "bridge-probe.html")
        try:
            raw = page.evaluate("window.rawHello()")
            presence = page.evaluate("window.relay.detect({again: true})")
            answer = bridge_fetch(page, plain.origin + "/echo", method="GET")
        finally:
            page.close()
        assert raw is None  # no reply at all: the same as a browser without the extension
        assert presence["present"] is False
        assert answer["error"]["kind"] == "no-bridge"
    assert plain.seen == []
    # The page the user added is answered.
    page = open_probe(context, base_url + "bridge-probe.html")
    assert page.evaluate("window.rawHello()")["allowed"] is True
    page.close()

    # The user adds that page in the options: from then on the bridge answers it.
    options = open_options(context)
    options.get_by_label("Page origin").fill(other_host)
    options.get_by_role("button", name="Allow page").click()
    options.get_by_role("button", name=f"Remove page {other_host.rstrip('/')}").wait_for()
    options.close()
    deadline = time.monotonic() + 10
    while len(worker.evaluate("chrome.scripting.getRegisteredContentScripts()")) < 2:
        assert time.monotonic() < deadline, "the content script was not registered"
        time.sleep(0.05)
    page = open_probe(context, other_host + "bridge-probe.html")
    try:
        assert page.evaluate("window.rawHello()")["allowed"] is True
        start_fetch(page, plain.origin + "/echo", method="GET")
        # Another page, the same server: asked again (consent is per page and server).
        consent_page(context, other_host.rstrip("/"), plain.origin).get_by_role(
            "button", name="Always allow"
        ).click()
        assert finish_fetch(page)["head"]["status"] == 200
    finally:
        page.close()


def test_a_removed_page_that_is_still_open_is_refused_in_silence(
    extension: tuple[Any, Any], probe: Any, plain: PlainServer, page_origin: str
) -> None:
    _, worker = extension
    set_lists(extension, pages=[page_origin], targets=[plain.origin])
    assert bridge_fetch(probe, plain.origin + "/echo", method="GET")["head"]["status"] == 200
    set_policy(extension, {})  # removed; the content script stays in the open page

    assert probe.evaluate("window.rawHello()") is None
    probe.evaluate(
        "url => window.relay.start(99, {url, method: 'GET'}, {head() {}, chunk() {}, end() {},"
        " error: (e) => { window.silentError = e; }})",
        plain.origin + "/echo",
    )
    entry = wait_activity(worker, lambda e: "not one of the bridge's pages" in e["result"])
    assert entry["refused"] and entry["page"] == page_origin
    assert probe.evaluate("window.silentError") is None  # the page heard nothing
    assert len(plain.seen) == 1


def test_the_policy_is_unreadable_from_a_content_script(
    extension: tuple[Any, Any], probe: Any, plain: PlainServer, page_origin: str
) -> None:
    context, worker = extension
    set_lists(extension, pages=[page_origin], targets=[plain.origin])
    page = open_probe(context, probe.url)  # loaded after the policy: content script present
    session = context.new_cdp_session(page)
    worlds: list[dict[str, Any]] = []
    session.on(
        "Runtime.executionContextCreated",
        lambda event: worlds.append(event["context"]),
    )
    session.send("Runtime.enable")
    deadline = time.monotonic() + 10
    while not [w for w in worlds if w["name"] == "agent_py bridge"]:
        assert time.monotonic() < deadline, f"no content-script world among {worlds}"
        time.sleep(0.05)
    world = next(w for w in worlds if w["name"] == "agent_py bridge")
    assert world["auxData"]["type"] == "isolated"

    def in_content_script(expression: str) -> Any:
        answer = session.send(
            "Runtime.evaluate",
            {
                "expression": expression,
                "contextId": world["id"],
                "awaitPromise": True,
                "returnByValue": True,
            },
        )
        return answer["result"].get("value")

    probe_code = (
        "chrome.storage.{area}.get(null).then(v => 'read: ' + JSON.stringify(v),"
        " e => 'refused: ' + e.message)"
    )
    local = in_content_script(probe_code.format(area="local"))
    session_area = in_content_script(probe_code.format(area="session"))
    written = in_content_script(
        "chrome.storage.local.set({pages: {'http://evil.example': []}})"
        ".then(() => 'written', e => 'refused: ' + e.message)"
    )
    # Nor does it hear about changes: a listener there gets no event when the policy changes.
    in_content_script(
        "window.heard = []; chrome.storage.onChanged.addListener("
        "(changes, area) => window.heard.push(area + ' ' + Object.keys(changes))); 'listening'"
    )
    set_policy(extension, {page_origin: [plain.origin, "http://127.0.0.1:1"]})
    # A round trip to the service worker, started after the change: when its answer is in, a
    # storage event (dispatched when the change was made) would have arrived before it.
    heard = in_content_script(
        "chrome.runtime.sendMessage({type: 'hello'}).then(() => window.heard)"
    )
    page.close()

    assert heard == [], heard
    assert local.startswith("refused"), local
    assert session_area.startswith("refused"), session_area
    assert written.startswith("refused"), written
    assert policy(worker)["pages"] == {page_origin: [plain.origin, "http://127.0.0.1:1"]}


def test_a_server_listed_without_the_browsers_access_is_refused_until_given_it(
    extension: tuple[Any, Any], probe: Any, plain: PlainServer, page_origin: str
) -> None:
    """The extension holds host access only to origins the user allowed (asked for at
    consent). Rules that list a server anyway (kept from version 0.3, whose manifest held every
    loopback port, or its access taken back in the browser) reach nothing there; the options
    page names the origin and asks the browser for it in one click."""
    context, worker = extension
    worker.evaluate("(p) => chrome.storage.local.set({pages: p})", {page_origin: [plain.origin]})
    assert not holds_access(worker, plain.origin)

    answer = bridge_fetch(probe, plain.origin + "/echo", method="GET")

    assert answer["head"] is None
    assert answer["error"]["kind"] == "refused"
    assert answer["error"]["message"].startswith(
        f"The browser does not let the bridge reach {plain.origin}: the extension holds no access"
    )
    assert plain.seen == []

    options = open_options(context)
    notice = options.locator("#access")
    notice.wait_for()
    assert plain.origin in notice.inner_text()
    assert page_origin not in notice.inner_text()  # the page's access is held
    options.get_by_role("button", name=f"Give the bridge access to {plain.origin}").click()
    options.get_by_text("Access given: reload the bridge's pages.").wait_for()
    notice.wait_for(state="hidden")
    options.close()
    assert holds_access(worker, plain.origin)
    assert bridge_fetch(probe, plain.origin + "/echo", method="GET")["head"]["status"] == 200


def test_redirects_are_followed_hop_by_hop_only_to_allowed_servers(
    extension: tuple[Any, Any], probe: Any, plain: PlainServer, page_origin: str
) -> None:
    with PlainServer() as elsewhere:
        set_lists(extension, pages=[page_origin], targets=[plain.origin])
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
    assert json.loads(same["body"])["body"] == "{}"
    assert json.loads(see_other["body"])["method"] == "GET"  # 303 turns it into a GET


def test_a_redirect_to_another_server_drops_its_session_token_and_body(
    extension: tuple[Any, Any], probe: Any, plain: PlainServer, page_origin: str
) -> None:
    secrets = {"Authorization": "Bearer t0k", "Mcp-Session-Id": "s-1", "Last-Event-ID": "7"}
    # MCP 2026-07-28's headers that mirror the body (a tool's arguments among them) go where
    # the body goes, and it never goes to another server.
    mirrors = {"Mcp-Method": "tools/call", "Mcp-Name": "add", "Mcp-Param-Region_Id": "eu"}
    bound = [name.lower() for name in [*secrets, *mirrors]]
    with PlainServer() as elsewhere:
        set_lists(extension, pages=[page_origin], targets=[plain.origin, elsewhere.origin])
        same = bridge_fetch(
            probe,
            f"{plain.origin}/redirect?to=/echo",
            method="GET",
            headers={**secrets, **mirrors},
        )
        crossed = bridge_fetch(
            probe,
            f"{plain.origin}/redirect?to={elsewhere.origin}/echo",
            method="GET",
            headers={**secrets, **mirrors, "MCP-Protocol-Version": "2025-11-25"},
        )
        posted = bridge_fetch(
            probe,
            f"{plain.origin}/redirect?status=307&to={elsewhere.origin}/echo",
            method="POST",
            headers=secrets,
            body=b64({"secret": 1}),
        )
        see_other = bridge_fetch(  # the POST becomes a GET without its body
            probe,
            f"{plain.origin}/redirect?status=303&to={elsewhere.origin}/echo",
            method="POST",
            headers={**mirrors, "MCP-Protocol-Version": "2026-07-28"},
            body=b64({"method": "tools/call"}),
        )
        seen_elsewhere = list(elsewhere.seen)

    kept = json.loads(same["body"])["headers"]
    assert {name: kept.get(name) for name in bound} == {
        "authorization": "Bearer t0k",
        "mcp-session-id": "s-1",
        "last-event-id": "7",
        "mcp-method": "tools/call",
        "mcp-name": "add",
        "mcp-param-region_id": "eu",
    }
    arrived = json.loads(crossed["body"])["headers"]
    assert [name for name in bound if name in arrived] == []
    assert arrived["mcp-protocol-version"] == "2025-11-25"  # not a secret: kept
    assert posted["error"]["kind"] == "refused"
    assert "does not send a request body to another server" in posted["error"]["message"]
    rewritten = json.loads(see_other["body"])
    assert (rewritten["method"], rewritten["body"]) == ("GET", "")
    assert [name for name in bound if name in rewritten["headers"]] == []
    assert rewritten["headers"]["mcp-protocol-version"] == "2026-07-28"
    # The 307 POST never arrived.
    assert [seen["method"] for seen in seen_elsewhere] == ["GET", "GET"]


def test_a_request_is_aborted_when_the_page_goes_away(
    extension: tuple[Any, Any], plain: PlainServer, base_url: str, page_origin: str
) -> None:
    context, worker = extension
    set_lists(extension, pages=[page_origin], targets=[plain.origin])
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


def revoke_server(options: Any, page: str, server: str) -> None:
    options.get_by_role("button", name=f"Revoke {server} for {page}").click()


def remove_page(options: Any, page: str, server: str) -> None:
    options.get_by_role("button", name=f"Remove page {page}").click()


def pause_bridge(options: Any, page: str, server: str) -> None:
    options.get_by_label("Pause the bridge").check()


@pytest.mark.parametrize(
    ("undo", "why"),
    [
        (revoke_server, "access from {page} to {server} was revoked"),
        (remove_page, "{page} was removed from the bridge's pages"),
        (pause_bridge, "the bridge was paused"),
    ],
    ids=["revoke", "remove-page", "pause"],
)
def test_taking_consent_back_cuts_a_running_stream_at_once(
    extension: tuple[Any, Any],
    probe: Any,
    plain: PlainServer,
    page_origin: str,
    undo: Any,
    why: str,
) -> None:
    context, worker = extension
    set_lists(extension, pages=[page_origin], targets=[plain.origin])
    options = open_options(context)
    options.get_by_role("button", name=f"Revoke {plain.origin} for {page_origin}").wait_for()
    probe.evaluate("r => window.bridgeStart(r)", {"url": plain.origin + "/slow", "method": "GET"})
    probe.wait_for_function("window.slowHead === true")
    assert plain.disconnects == []

    undo(options, page_origin, plain.origin)
    probe.wait_for_function("window.slowError !== undefined")

    reason = why.format(page=page_origin, server=plain.origin)
    assert probe.evaluate("window.slowError") == {
        "kind": "refused",
        "message": f"Stopped: {reason}.",
    }
    deadline = time.monotonic() + 10
    while not plain.disconnects and time.monotonic() < deadline:
        time.sleep(0.05)
    # /slow streams for 30 s and ends without a disconnect unless the bridge cuts it.
    assert plain.disconnects, "the server kept streaming after consent was taken back"
    entry = wait_activity(worker, lambda e: e["target"] == plain.origin + "/slow")
    assert entry["result"] == f"HTTP 200, then stopped: {reason}"
    options.get_by_label("Pause the bridge").uncheck()
    options.close()


def test_a_noisy_page_cannot_push_another_page_out_of_the_log(
    extension: tuple[Any, Any],
    probe: Any,
    plain: PlainServer,
    base_url: str,
    page_origin: str,
    tmp_path: Path,
) -> None:
    context, worker = extension
    noisy_origin = base_url.replace("127.0.0.1", "localhost").rstrip("/")
    set_policy(extension, {page_origin: [plain.origin], noisy_origin: []})
    assert bridge_fetch(probe, plain.origin + "/echo", method="GET")["head"]["status"] == 200
    noisy = open_probe(context, noisy_origin + "/bridge-probe.html")
    refusals = noisy.evaluate(
        """url => Promise.all(Array.from({length: 120}, () =>
            window.bridgeFetch({url, method: "PUT"}))).then(all => all.filter(
            a => a.error && a.error.kind === "refused").length)""",
        plain.origin + "/echo",
    )
    noisy.close()
    assert refusals == 120
    deadline = time.monotonic() + 15
    while len([e for e in activity(worker) if e["page"] == noisy_origin]) < 50:
        assert time.monotonic() < deadline, "the refusals were not logged"
        time.sleep(0.1)

    log = activity(worker)
    assert len([e for e in log if e["page"] == noisy_origin]) == 50  # its quota
    ours = [e for e in log if e["page"] == page_origin]
    assert [e["result"] for e in ours] == ["HTTP 200"]
    deadline = time.monotonic() + 10
    while worker.evaluate("chrome.action.getBadgeText({})") != "120":
        assert time.monotonic() < deadline, worker.evaluate("chrome.action.getBadgeText({})")
        time.sleep(0.05)

    options = open_options(context)
    options.locator("#activity tbody tr").first.wait_for()
    options.get_by_label("Show").select_option(page_origin)
    rows = options.locator("#activity tbody tr")
    assert rows.count() == 1 and page_origin in rows.first.inner_text()
    with options.expect_download() as download:
        options.get_by_role("button", name="Export as JSON").click()
    saved = tmp_path / "activity.json"
    download.value.save_as(saved)
    exported = json.loads(saved.read_text())
    assert exported["page"] == page_origin
    assert [(e["page"], e["method"], e["result"]) for e in exported["entries"]] == [
        (page_origin, "GET", "HTTP 200")
    ]
    options.get_by_role("button", name="Clear the log").click()
    options.locator("#activity tbody tr").first.wait_for(state="detached")
    assert worker.evaluate("chrome.action.getBadgeText({})") == ""
    options.close()


def test_huge_paths_and_methods_cannot_flood_the_log_or_freeze_the_options(
    extension: tuple[Any, Any],
    probe: Any,
    plain: PlainServer,
    base_url: str,
    page_origin: str,
) -> None:
    """Refused requests with megabyte paths, methods and header names from an approved page:
    each entry is cut to a prefix with its length, the log stays small, another page is still
    logged, and the options page (which holds Revoke, Remove and Pause) renders at once."""
    context, worker = extension
    other_origin = base_url.replace("127.0.0.1", "localhost").rstrip("/")
    set_policy(extension, {page_origin: [plain.origin], other_origin: [plain.origin]})
    refused = probe.evaluate(
        """url => Promise.all(Array.from({length: 40}, (_, i) => window.bridgeFetch({
            url: url + "/" + "p".repeat(1024 * 1024) + i,
            method: "M".repeat(i % 2 ? 1024 * 1024 : 100 * 1024)}))).then(all =>
            all.filter(a => a.error && a.error.kind === "refused").length)""",
        plain.origin,
    )
    assert refused == 40
    names = probe.evaluate(
        """url => Promise.all(Array.from({length: 10}, (_, i) => window.bridgeFetch({
            url, method: "GET", headers: {["X-" + "h".repeat(100 * 1024) + i]: "v"}})))
            .then(all => all.map(a => a.error && a.error.message))""",
        plain.origin + "/echo",
    )
    assert all(m and "characters) is not allowed" in m and len(m) < 500 for m in names), names
    other = open_probe(context, other_origin + "/bridge-probe.html")
    assert bridge_fetch(other, plain.origin + "/echo", method="GET")["head"]["status"] == 200
    other.close()
    deadline = time.monotonic() + 60  # a hang guard: the log is written as requests end
    while not [e for e in activity(worker) if e["page"] == other_origin]:
        assert time.monotonic() < deadline, "the other page's request was not logged"
        time.sleep(0.1)

    log = activity(worker)
    flood = [e for e in log if e["page"] == page_origin]
    assert len(flood) == 50  # its quota: the 40 long paths and methods, the 10 header names
    assert all(len(e["target"]) < 400 and len(e["result"]) < 500 for e in flood)
    long_methods = [e for e in flood if e["method"] != "GET"]
    assert len(long_methods) == 40
    assert all(len(e["method"]) < 100 and "characters)" in e["method"] for e in long_methods)
    size = worker.evaluate(
        "async () => JSON.stringify((await chrome.storage.session.get('activity')).activity).length"
    )
    assert size < 1024 * 1024
    options = open_options(context)
    options.locator("#activity tbody tr").first.wait_for(timeout=10_000)
    assert options.locator("#activity tbody tr").count() == 51
    options.close()


def test_requests_waiting_on_a_prompt_leave_other_pages_their_share(
    extension: tuple[Any, Any],
    probe: Any,
    plain: PlainServer,
    base_url: str,
    page_origin: str,
) -> None:
    """40 requests of one page wait on the user's answer: 16 wait, the rest are refused at
    once, and another page's request still goes through (without the share, the 40 would
    have taken all 32 places)."""
    context, _ = extension
    other_origin = base_url.replace("127.0.0.1", "localhost").rstrip("/")
    set_policy(extension, {page_origin: [], other_origin: [plain.origin]})
    probe.evaluate(
        """url => { window.waiting = Array.from({length: 40}, () =>
            window.bridgeFetch({url, method: "GET"})); }""",
        plain.origin + "/echo",
    )
    prompt = consent_page(context, page_origin, plain.origin)
    other = open_probe(context, other_origin + "/bridge-probe.html")
    assert bridge_fetch(other, plain.origin + "/echo", method="GET")["head"]["status"] == 200
    other.close()
    prompt.get_by_role("button", name="Deny").click()
    answers = probe.evaluate("Promise.all(window.waiting)")
    messages = [a["error"]["message"] for a in answers]
    waited = [m for m in messages if f"You did not allow {page_origin}" in m]
    assert len(waited) == 16, messages  # its share; the other 24 were refused at once
    assert any(f"More than 16 requests at once from {page_origin}" in m for m in messages)
    assert all(a["error"]["kind"] == "refused" for a in answers)


def test_a_public_name_that_resolves_to_loopback_is_refused_dns_rebinding(
    playwright: Any,
    tmp_path: Path,
    browser_settings: Any,
    base_url: str,
) -> None:
    """A public name (https) that the browser resolves to 127.0.0.1, as a rebinding attacker's
    DNS would: the bridge refuses the answer. The extension as shipped, granted the https origin
    at runtime as consent grants it (the browser's dialog answered in advance); the name
    resolves to loopback (--host-resolver-rules), so nothing here leaves the machine."""
    name = "rebind.example.test"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", f"/CN={name}", "-addext", f"subjectAltName=DNS:{name}"),
            *("-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem")),
        ],
        check=True,
        capture_output=True,
    )
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    options = browser_settings.launch_options(
        extra_args=[
            f"--host-resolver-rules=MAP {name} 127.0.0.1",
            "--ignore-certificate-errors",  # the self-signed certificate of the test server
            f"--proxy-bypass-list={browser_settings.LOOPBACK_BYPASS};{name}",
        ]
    )
    context, worker = launch_with_extension(
        playwright, tmp_path / "profile", options, approve=(f"https://{name}/*",)
    )
    page_origin = base_url.rstrip("/")
    with PlainServer() as server:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
        target = f"https://{name}:{server.server_address[1]}"
        try:
            context.route(
                "**/bridge-probe.html",
                lambda route: route.fulfill(body=PROBE, content_type="text/html; charset=utf-8"),
            )
            set_policy((context, worker), {page_origin: [target]})
            probe = open_probe(context, base_url + "bridge-probe.html")
            answer = bridge_fetch(probe, target + "/echo", method="GET")
            entry = wait_activity(worker, lambda e: e["target"] == target + "/echo")
        finally:
            context.close()

    assert answer["head"] is None  # nothing of the answer reached the page
    assert answer["error"]["kind"] == "refused"
    assert answer["error"]["message"] == (
        f"{target} resolved to 127.0.0.1 (on this machine), not on the internet:"
        " refused (DNS rebinding?)."
    )
    assert entry["address"] == "127.0.0.1" and entry["refused"]
    # The request did reach the address: the browser knows it only once connected.
    assert [seen["path"] for seen in server.seen] == ["/echo"]


def test_the_rebinding_rule_judges_names_not_addresses(
    extension: tuple[Any, Any], probe: Any, plain: PlainServer, page_origin: str
) -> None:
    """The rule (policy.js addressRefusal), run in the extension's own context, for the cases
    the end-to-end test above cannot make: private and IPv6 addresses, no address at all, a
    public answer, and servers allowed by address. The address it judges is what webRequest
    reported for the request (shown in the log, 127.0.0.1 here)."""
    context, worker = extension
    set_lists(extension, pages=[page_origin], targets=[plain.origin])
    bridge_fetch(probe, plain.origin + "/echo", method="GET")
    assert wait_activity(worker, lambda e: e["method"] == "GET")["address"] == "127.0.0.1"

    options = open_options(context)
    verdicts = options.evaluate(
        """async () => {
            const { addressRefusal } = await import("./policy.js");
            return [
                addressRefusal("https://mcp.example.org", "127.0.0.1"),
                addressRefusal("https://mcp.example.org", "192.168.1.7"),
                addressRefusal("https://mcp.example.org", "::1"),
                addressRefusal("https://mcp.example.org", undefined),
                addressRefusal("https://mcp.example.org", "93.184.215.14"),
                addressRefusal("http://127.0.0.1:8000", "127.0.0.1"),
                addressRefusal("https://192.168.1.7", "192.168.1.7"),
            ];
        }"""
    )
    options.close()
    assert "resolved to 127.0.0.1 (on this machine), not on the internet" in verdicts[0]
    assert "resolved to 192.168.1.7 (on a private network)" in verdicts[1]
    assert "resolved to ::1" in verdicts[2]
    assert "could not see which address" in verdicts[3]
    assert verdicts[4:] == [None, None, None]


def test_a_requests_wait_for_headers_is_its_own_up_to_the_whole_requests_cap(
    extension: tuple[Any, Any],
) -> None:
    """A model server prefilling a long prompt sends nothing for minutes: the page's silence
    limit (up to 15 minutes) must be the wait, not a smaller cap of the extension's."""
    context, _ = extension
    options = open_options(context)
    waits = options.evaluate(
        """async () => {
            const { checkRequest, LIMITS } = await import("./policy.js");
            const wait = (timeout_ms) =>
                checkRequest({ method: "POST", timeout_ms }).headersTimeoutMs;
            return [wait(600_000), wait(36_000_000), wait(undefined), LIMITS.maxDurationMs];
        }"""
    )
    options.close()
    assert waits == [600_000, 900_000, 30_000, 900_000]


def test_the_extension_key_fixes_its_id_and_the_manifest_trusts_no_page(
    extension: tuple[Any, Any],
) -> None:
    _, worker = extension
    manifest = json.loads((Path(__file__).parents[2] / "extension" / "manifest.json").read_text())
    assert worker.url.startswith(EXTENSION_ORIGIN + "/")
    assert "content_scripts" not in manifest  # registered per page the user added
    assert "<all_urls>" not in json.dumps(manifest)
    # No host access at install: each page and server is asked for when the user allows it.
    assert "host_permissions" not in manifest
    assert manifest["optional_host_permissions"] == [
        "http://127.0.0.1/*",
        "http://localhost/*",
        "http://[::1]/*",
        "https://*/*",
    ]


def test_a_fresh_install_trusts_no_page(
    playwright: Any,
    tmp_path_factory: pytest.TempPathFactory,
    browser_settings: Any,
    base_url: str,
) -> None:
    context, worker = launch_with_extension(
        playwright, tmp_path_factory.mktemp("fresh"), browser_settings.launch_options()
    )
    try:
        context.route(
            "**/bridge-probe.html",
            lambda route: route.fulfill(body=PROBE, content_type="text/html; charset=utf-8"),
        )
        assert worker.evaluate("chrome.scripting.getRegisteredContentScripts()") == []
        # The browser's dialog is answered "Allow" in advance for loopback (approve_in_browser),
        # and still the extension holds no host: it has asked for none.
        assert worker.evaluate("chrome.permissions.getAll()")["origins"] == []
        page = open_probe(context, base_url + "bridge-probe.html")
        assert page.evaluate("window.rawHello()") is None
        assert worker.evaluate("chrome.storage.local.get(null)") == {}
    finally:
        context.close()
