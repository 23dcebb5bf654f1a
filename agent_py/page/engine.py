"""The page's engine and sandbox, reached through the worker bridge (``agent_py.page.ports``)."""

from __future__ import annotations

import json

from agent_py.core.llm import (
    LLM,
    CallInfo,
    ChatReply,
    LLMError,
    MemoryPressureError,
    Message,
    TokenCallback,
    Usage,
)
from agent_py.page.ports import (
    SANDBOX_RESULT,
    Bridge,
    EngineReply,
    PythonSandboxReply,
    call_json,
)
from agent_py.tools.javascript import JSRunResult
from agent_py.tools.python import PyRunResult


class EngineCrashedError(LLMError):
    """The engine's worker died with the model in it: the next call loads the model again."""


def _checked(reply_json: str) -> EngineReply:
    """Parse an engine bridge reply and turn ``ok: false`` into the matching exception."""
    try:
        reply = EngineReply.model_validate_json(reply_json)
    except (TypeError, ValueError):
        raise LLMError(f"the engine bridge sent an unreadable reply: {reply_json!r:.200}") from None
    if not reply.ok:
        if reply.error.kind == "crashed":
            raise EngineCrashedError(reply.error.message)
        if reply.error.kind == "memory":
            raise MemoryPressureError(reply.error.message)
        raise LLMError(reply.error.message)
    return reply


class BridgeLLM(LLM):
    """An engine in JavaScript (WebLLM, the CPU engine, the scripted test engine).

    Tokens stream from the engine to the UI on the JavaScript side, so ``on_token`` is not
    used here: no per-token crossing into Python.
    """

    # Of the page's engines only the CPU engine takes a GBNF grammar, and it writes the text
    # a grammar forces itself (WebLLM and the scripted engine never read one).
    json_grammar_spaced = True

    def __init__(self, bridge: Bridge) -> None:
        self._bridge = bridge
        self._loaded: str | None = None

    @property
    def loaded_model(self) -> str | None:
        return self._loaded

    def _reply(self, reply_json: str) -> EngineReply:
        """``_checked``, and a crashed engine's model counted as gone (the next call loads
        it again instead of meeting an engine with nothing loaded)."""
        try:
            return _checked(reply_json)
        except EngineCrashedError:
            self._loaded = None
            raise

    async def reload(self, model: str) -> None:
        self._loaded = None
        _checked(await self._bridge.engineReload(model))
        self._loaded = model

    async def unload(self) -> None:
        self._loaded = None
        _checked(await self._bridge.engineUnload())

    async def interrupt(self) -> None:
        _checked(await self._bridge.engineInterrupt())

    async def chat(
        self, messages: list[Message], call: CallInfo, on_token: TokenCallback | None = None
    ) -> ChatReply:
        reply = self._reply(await self._bridge.engineChat(json.dumps(messages), call_json(call)))
        return ChatReply(text=reply.text, usage=reply.usage, finish_reason=reply.finish_reason)

    async def count_tokens_exact(self, texts: list[str]) -> list[int] | None:
        reply = self._reply(await self._bridge.engineTokenize(json.dumps(texts)))
        return reply.counts

    async def prefill(self, messages: list[Message], call: CallInfo) -> Usage | None:
        sent = call_json(call)
        reply = self._reply(await self._bridge.enginePrefill(json.dumps(messages), sent))
        return reply.usage if reply.prefilled else None


class BridgeJSRunner:
    """Runs ``javascript_execute`` code in the page's sandbox (a fresh Worker per call)."""

    def __init__(self, bridge: Bridge) -> None:
        self._bridge = bridge

    async def run(self, code: str, *, timeout_s: float, output_limit: int) -> JSRunResult:
        raw = await self._bridge.runJavaScript(code, int(timeout_s * 1000), output_limit)
        try:
            return SANDBOX_RESULT.validate_json(raw)
        except (TypeError, ValueError):
            return JSRunResult(error="the sandbox sent an unreadable reply")


class BridgePyRunner:
    """Runs ``python_execute`` programs in the page's Python sandbox: a Pyodide worker of its
    own, started at the run's first call and ended by :meth:`close` when the run is over."""

    def __init__(self, bridge: Bridge) -> None:
        self._bridge = bridge

    async def run(self, program: str, *, timeout_s: float, output_limit: int) -> PyRunResult:
        raw = await self._bridge.runPython(program, int(timeout_s * 1000))
        try:
            reply = PythonSandboxReply.model_validate_json(raw)
        except (TypeError, ValueError):
            return PyRunResult(error="the Python sandbox sent an unreadable reply")
        if reply.timed_out:
            return PyRunResult(timed_out=True)
        if reply.json_text is None:
            return PyRunResult(error=reply.error or "the Python sandbox gave no result")
        return PyRunResult.from_driver(reply.json_text)

    async def close(self) -> None:
        self._bridge.endPython()
