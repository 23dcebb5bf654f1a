"""What a model server is: the models it serves, its kind and its context window.

Learnt from its endpoints at the engine's ``reload``: ``/v1/models`` (required), then
llama.cpp's ``/props``, Ollama's ``/api/version`` and ``/api/show``, and llama-cpp-python's
``/openapi.json``. The requests themselves are the engine's (:class:`AskJSON`), so a
server's failure is said the same way here as in a call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol
from urllib.parse import urlsplit

from agent_py.core.llm import LLMError


class ServerKind(StrEnum):
    LLAMA_CPP = "llama.cpp"
    LLAMA_CPP_PYTHON = "llama-cpp-python"
    OLLAMA = "ollama"
    OPENAI = "openai-compatible"


@dataclass
class ServerInfo:
    kind: ServerKind = ServerKind.OPENAI
    models: list[str] = field(default_factory=list)
    context_window: int | None = None


class AskJSON(Protocol):
    """The engine's small JSON request (``ModelServerLLM._ask_json``): a GET's JSON
    answer (a POST's, with ``body``); None when an optional endpoint is missing or not JSON."""

    async def __call__(
        self,
        url: str,
        *,
        required: bool = ...,
        limit: int = ...,
        body: dict[str, Any] | None = ...,
    ) -> Any: ...


def api_root(base_url: str) -> str:
    """The server's root for its own endpoints (``/props``, ``/api/version``): the base URL
    without its ``/v1``."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


async def discover(base_url: str, ask: AskJSON) -> ServerInfo:
    """The models the server at ``base_url`` serves, and what kind of server it is."""
    listing = await ask(f"{base_url}/models", required=True)
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        raise LLMError(
            f"{base_url}/models did not answer with a model list: is this the "
            "server's OpenAI API (its URL usually ends in /v1)?"
        )
    models = [str(item["id"]) for item in data if isinstance(item, dict) and "id" in item]
    info = ServerInfo(models=models)
    root = api_root(base_url)
    props = await ask(f"{root}/props")
    if isinstance(props, dict) and isinstance(props.get("default_generation_settings"), dict):
        info.kind = ServerKind.LLAMA_CPP
        n_ctx = props["default_generation_settings"].get("n_ctx") or props.get("n_ctx")
        info.context_window = int(n_ctx) if isinstance(n_ctx, int) and n_ctx > 0 else None
        return info
    version = await ask(f"{root}/api/version")
    if isinstance(version, dict) and "version" in version:
        info.kind = ServerKind.OLLAMA
        return info
    openapi = await ask(f"{root}/openapi.json", limit=2 * 1024 * 1024)
    title = openapi.get("info", {}).get("title", "") if isinstance(openapi, dict) else ""
    if "llama.cpp python" in str(title).lower():
        info.kind = ServerKind.LLAMA_CPP_PYTHON
    return info


async def ollama_window(base_url: str, model: str, ask: AskJSON) -> int | None:
    """The window Ollama runs ``model`` with, where its parameters set one (``num_ctx``);
    otherwise Ollama's own default applies, which it does not report."""
    shown = await ask(
        f"{api_root(base_url)}/api/show", body={"model": model}, limit=4 * 1024 * 1024
    )
    parameters = shown.get("parameters") if isinstance(shown, dict) else None
    found = re.search(r"^\s*num_ctx\s+(\d+)", str(parameters or ""), re.MULTILINE)
    return int(found.group(1)) if found else None
