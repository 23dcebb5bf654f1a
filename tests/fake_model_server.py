"""A scripted OpenAI-compatible server: the test double for a model server that misbehaves.

It answers ``/v1/models`` with one model, ``/props`` or ``/api/version`` when it plays
llama.cpp's server or Ollama, and each chat request with the next scripted reply (the last
one repeats). With ``cors`` it allows any origin, as llama.cpp's servers do, so the page can
reach it. :class:`ThreadedServer` runs it beside synchronous code (the browser tests).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.mcp.scripted_server import Reply, Request, ScriptedServer, json_reply, sse_reply

CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Headers": "*",
    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
}

MODEL = "tiny"


def chunk(content: str | None = None, finish: str | None = None, **extra: Any) -> bytes:
    delta = {} if content is None else {"content": content}
    body = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return f"data: {json.dumps(body)}\n\n".encode()


DONE = b"data: [DONE]\n\n"


def stream(*parts: str, usage: dict[str, int] | None = None) -> Reply:
    """A well-formed streamed reply of ``parts``."""
    chunks = [chunk(part) for part in parts] + [chunk(finish="stop")]
    if usage:
        chunks.append(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
    return sse_reply(*chunks, DONE)


class FakeModelServer:
    """An OpenAI-compatible server whose chat replies a test scripts, one per request."""

    def __init__(self, *replies: Reply | Callable[[Request], Reply], kind: str = "") -> None:
        self.replies = list(replies)
        self.kind = kind
        self.chats: list[dict[str, Any]] = []
        self.prefills: list[dict[str, Any]] = []

    def __call__(self, request: Request) -> Reply:
        path = request.path
        if path.endswith("/v1/models"):
            return json_reply({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        if path == "/props" and self.kind == "llama.cpp":
            return json_reply({"default_generation_settings": {"n_ctx": 2048}})
        if path == "/api/version" and self.kind == "ollama":
            return json_reply({"version": "0.9.0"})
        if path == "/tokenize" and self.kind == "llama.cpp":
            # A tokenizer that counts a token per word: far from the agent's estimate.
            return json_reply({"tokens": list(range(len(request.json()["content"].split())))})
        if path == "/api/show" and self.kind == "ollama":
            return json_reply(
                {"parameters": 'num_ctx                        8192\nstop "<|im_end|>"'}
            )
        if path.endswith("/chat/completions"):
            body = request.json()
            if body.get("max_tokens") == 1:  # the engine's prefill: not a scripted call
                self.prefills.append(body)
                return stream("")
            self.chats.append(body)
            reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
            return reply(request) if callable(reply) else reply
        return json_reply({"detail": "Not Found"}, status=404)


class CorsFakeModelServer(FakeModelServer):
    """The same, answering preflights and allowing any origin."""

    def __call__(self, request: Request) -> Reply:
        if request.method == "OPTIONS":
            return Reply(204, dict(CORS))
        reply = super().__call__(request)
        reply.headers.update(CORS)
        return reply


@contextmanager
def threaded(fake: FakeModelServer) -> Iterator[str]:
    """``fake`` on a loopback port, served from a thread of its own; yields the base URL
    (``http://127.0.0.1:PORT/v1``)."""
    loop = asyncio.new_event_loop()
    server = ScriptedServer(fake)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
    try:
        yield server.url.removesuffix("/mcp") + "/v1"
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()
