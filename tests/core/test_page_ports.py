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
