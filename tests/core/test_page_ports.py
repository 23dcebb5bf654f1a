"""The one reply envelope of the page's ports (agent_py.page.ports.Reply): every port's JSON
reply is read through it, the sign-in's included."""

from __future__ import annotations

import json

import pytest

from agent_py.mcp.errors import MCPAuthorizationError
from agent_py.page.http import ReadReply, StartReply
from agent_py.page.ports import EngineReply, Reply
from agent_py.page.user import PopupFrontEnd


class SignInUser:
    callbackUrl = "http://127.0.0.1/oauth-callback.html"

    def __init__(self, reply: str) -> None:
        self.reply = reply

    async def authorize(self, request_json: str) -> str:
        return self.reply

    def saveAuth(self, record_json: str) -> None: ...

    async def elicit(self, form_json: str) -> str:
        return "{}"


def front_end(reply: str) -> PopupFrontEnd:
    return PopupFrontEnd(SignInUser(reply), server="docs", redirect_uri=SignInUser.callbackUrl)


def test_every_reply_is_the_one_envelope() -> None:
    for shape in (EngineReply, StartReply, ReadReply):
        assert issubclass(shape, Reply)
    failed = json.dumps({"ok": False, "error": {"kind": "timeout", "message": "too slow"}})
    for shape in (EngineReply, StartReply, ReadReply):
        reply = shape.model_validate_json(failed)
        assert (reply.ok, reply.error.kind, reply.error.message) == (False, "timeout", "too slow")


async def test_a_sign_in_reply_is_read_through_the_envelope() -> None:
    signed_in = json.dumps({"ok": True, "url": "http://127.0.0.1/cb?code=1"})
    assert await front_end(signed_in).authorize("http://as/authorize") == (
        "http://127.0.0.1/cb?code=1"
    )
    closed = json.dumps({"ok": False, "error": {"kind": "cancelled", "message": "popup blocked"}})
    with pytest.raises(MCPAuthorizationError, match=r"'docs' did not finish: popup blocked\."):
        await front_end(closed).authorize("http://as/authorize")
    # The old shape, a bare string for the error, is not the envelope.
    with pytest.raises(MCPAuthorizationError, match="unreadable answer"):
        await front_end(json.dumps({"ok": False, "error": "cancelled"})).authorize("http://as/a")


def test_the_worker_offers_every_method_of_the_bridge() -> None:
    """Python calls the worker's bridge object by these names (ports.Bridge); a method the
    worker lacks would fail only when first called, in the page."""
    import inspect
    import re
    from pathlib import Path

    from agent_py.page.ports import Bridge

    web = Path(__file__).resolve().parents[2] / "web"
    source = "".join(
        (web / name).read_text()
        for name in ("worker/bridge.js", "worker/engine-port.js", "workspace.js")
    )
    offered = set(re.findall(r"^\s*(?:async\s+)?(\w+)\s*(?:\(|:)", source, re.MULTILINE))
    offered |= set(re.findall(r"bridge\.(\w+)\s*=", source))
    wanted = {name for name, _ in inspect.getmembers(Bridge) if not name.startswith("_")}
    assert wanted and wanted <= offered, sorted(wanted - offered)
