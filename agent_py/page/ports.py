"""The contracts of the JavaScript objects Python calls in the page's worker.

The worker (``web/worker/worker.js``) hands :class:`~agent_py.page.session.PageSession` a bridge
object whose methods are JavaScript functions. Only JSON strings cross the boundary, in both
directions, so no proxy outlives a call. Bridge methods never reject: failures come back as
``{"ok": false, "error": {"kind": ..., "message": ...}}``.

Bridge methods (all but ``emit`` and ``mcpStatus`` return a promise of a JSON string; the
JSON is typed here):

- ``engineReload(model)``, ``engineUnload()``, ``engineInterrupt()`` → :class:`EngineReply`
- ``engineChat(messages_json, call_json)``: ``call_json`` is a :class:`CallInfo` as
  :func:`call_json` writes it → :class:`EngineReply` with the text, the usage and the finish reason
- ``enginePrefill(messages_json, call_json)``: the engine computes and keeps the prompt's KV
  cache (no reply) → :class:`EngineReply` with the usage; ``prefilled`` is false where the
  engine keeps no cache to fill
- ``runJavaScript(code, timeout_ms, output_limit)`` → the tool's own
  :class:`~agent_py.tools.javascript.JSRunResult`
- ``runPython(program, timeout_ms)`` → :class:`PythonSandboxReply`; ``endPython()`` ends the
  Python sandbox's worker (the run is over)
- ``readPage(html, url)``: a fetched page's readable text, made on the UI thread →
  ``{"ok", "title", "text"}`` or ``{"ok": false, "error"}`` (``agent_py.page.pages``);
  ``online()`` (not a promise): ``{"ok": true, "online": navigator.onLine}``
- ``emit(event_json)``: an agent event for the UI (and the session store).
- ``mcpStatus(status_json)``: an MCP server's state for the servers panel (not an agent
  event: it is not stored in the session history). Called only once servers are configured.

Names: a JavaScript method's parameters are positional, so Python's ``timeout_ms`` is the
worker's ``timeoutMs`` (JavaScript's spelling from there to the sandbox); JSON that Python
writes (a :class:`CallInfo`, an HTTP request) keeps Python's names on the JavaScript side.

The MCP client's HTTP (``agent_py.page.http``) and the user's answers (``agent_py.page.user``)
cross through two more objects, typed in those modules.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agent_py.core.llm import CallInfo, Usage
from agent_py.tools.javascript import JSRunResult


class Bridge(Protocol):
    """The worker's JavaScript object; method names are JavaScript's."""

    def engineReload(self, model: str) -> Awaitable[str]: ...
    def engineUnload(self) -> Awaitable[str]: ...
    def engineInterrupt(self) -> Awaitable[str]: ...
    def engineChat(self, messages_json: str, call_json: str) -> Awaitable[str]: ...
    def enginePrefill(self, messages_json: str, call_json: str) -> Awaitable[str]: ...
    def engineTokenize(self, texts_json: str) -> Awaitable[str]: ...
    def runJavaScript(self, code: str, timeout_ms: int, output_limit: int) -> Awaitable[str]: ...
    def runPython(self, program: str, timeout_ms: int) -> Awaitable[str]: ...
    def endPython(self) -> None: ...
    def workspaceFiles(self) -> Awaitable[str]: ...
    def workspaceRead(self, name: str) -> Awaitable[str]: ...
    def workspaceWrite(self, name: str, base64_data: str) -> Awaitable[str]: ...
    def readPage(self, html: str, url: str) -> Awaitable[str]: ...
    def online(self) -> str: ...
    def emit(self, event_json: str) -> None: ...
    def mcpStatus(self, status_json: str) -> None: ...
    def engineToken(self, purpose: str, step: str | None, text: str) -> None:
        """Streamed reply text of an engine that runs in Python (a model server)."""

    def engineNote(self, text: str) -> None:
        """A remark of an engine that runs in Python, for the live view."""

    def engineWait(self, what: str | None) -> None:
        """What an engine that runs in Python waits for (``"the model server at … to answer
        …"``), shown with its time once it lasts; None when the wait is over."""


_CALL = TypeAdapter(CallInfo)


def call_json(call: CallInfo) -> str:
    """``call`` as ``engineChat`` and ``enginePrefill`` are given it: :class:`CallInfo`'s
    fields under their own names, those unset (None) left out, the sampling's too. The
    engines in ``web/worker/engines/`` read these names (the ``CallInfo`` typedef of
    ``web/worker/engine-port.js``)."""
    return _CALL.dump_json(call, exclude_none=True).decode()


class Failure(BaseModel):
    """Why a call across a port failed: a kind the caller reacts to, and words for the user."""

    kind: str = "error"
    message: str = "the call failed"


class Reply(BaseModel):
    """The one envelope of every port's JSON reply: ``{"ok": true, ...}`` with the method's
    fields, or ``{"ok": false, "error": {"kind", "message"}}`` (``web/protocol.js``,
    ``bridgeOk`` and ``bridgeFailed``, writes it)."""

    model_config = ConfigDict(extra="ignore")

    ok: bool
    error: Failure = Failure()


class EngineReply(Reply):
    """What every engine bridge method resolves to: ``ok`` with the chat's reply, or the
    failure, whose kind is ``memory`` (the GPU or the tab ran out), ``crashed`` (the engine's
    worker died with the model), ``config``, ``engine``, ``aborted`` ...
    (``web/worker/engines/errors.js``)."""

    text: str = ""
    usage: Usage = Usage()
    finish_reason: str = "stop"
    prefilled: bool = False
    """``enginePrefill`` only: the engine kept the prompt's cache."""
    counts: list[int] | None = None
    """``engineTokenize`` only: each text's token count, or None (the engine has no
    tokenizer to offer)."""
    error: Failure = Failure(kind="engine", message="the engine failed")


# What ``runJavaScript`` resolves to (the UI's sandbox, ``web/ui/sandbox-host.js``): the tool's
# own result, read straight from the JSON.
SANDBOX_RESULT: TypeAdapter[JSRunResult] = TypeAdapter(JSRunResult)


class PythonSandboxReply(BaseModel):
    """What ``runPython`` resolves to (the UI's Python sandbox, ``web/ui/python-sandbox-host.js``):
    the program's last expression (the driver's JSON, ``agent_py/tools/python_driver.py``), or
    the sandbox's own error."""

    model_config = ConfigDict(extra="ignore")

    json_text: str | None = Field(default=None, alias="json")
    error: str | None = None
    timed_out: bool = False
