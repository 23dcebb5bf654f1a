"""How a model server's failures are read and said.

A server's error answer is read for its own words (:func:`error_text`); a refused reply
format (:class:`FormatRefused`) is told apart from other errors, so the engine can ask once
more without the format. The other failures become messages that say which server failed,
what it was doing, and what the user can change.
"""

from __future__ import annotations

import json

from agent_py.mcp.errors import MCPError

ERROR_BODY_LIMIT = 2000
"""Characters of an error answer's body quoted in the message."""
REFUSED_FORMAT = (400, 422)
"""Statuses with which servers refuse a request field they do not take."""


class FormatRefused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def error_text(body: bytes) -> str:
    """The server's words from an error answer: OpenAI's ``{"error": {"message"}}``,
    FastAPI's ``{"detail": ...}``, or the body itself, cut short."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        return text[:ERROR_BODY_LIMIT] or "(an empty body)"
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:ERROR_BODY_LIMIT]
        if isinstance(error, str):
            return error[:ERROR_BODY_LIMIT]
        if "detail" in parsed:
            return json.dumps(parsed["detail"])[:ERROR_BODY_LIMIT]
    return text[:ERROR_BODY_LIMIT]


def names_format(reason: str) -> bool:
    lowered = reason.lower()
    return any(word in lowered for word in ("response_format", "grammar", "json_schema", "schema"))


def silence_message(base_url: str, silence_s: float, what: str, when: str) -> str:
    return (
        f"the model server at {base_url} sent nothing for {silence_s:g} s "
        f"while answering {what} ({when}): it is stalled, or slower than that on this "
        "machine. Raise the limit in Settings → Model server → Silence limit (in the "
        "terminal: --settings '{\"openai_silence_s\": 900}')."
    )


def unreachable_message(base_url: str, error: MCPError, *, answered: bool) -> str:
    if answered:
        return (
            f"the model server at {base_url} stopped answering: it answered earlier, "
            "and now it cannot be reached. It has stopped or crashed (its own output says "
            "why), or it was restarted at another address: start it again, or change its "
            "URL in Settings"
        )
    said = str(error).rstrip(".")
    if "model server" not in said:  # the CPython transport names only the address
        said = f"the model server at {base_url} cannot be reached: {said}"
    return (
        f"{said}. Check that the server is running at that URL. For Ollama, "
        "OLLAMA_ORIGINS must include this page's origin; llama.cpp's servers allow any."
    )


def http_error_message(base_url: str, url: str, status: int, body: bytes) -> str:
    detail = error_text(body)
    if status in (401, 403):
        return (
            f"the model server at {base_url} refused the request (HTTP {status}: "
            f"{detail}): set its API key in Settings (or --api-key-env in the terminal)"
        )
    if status == 404 and url.endswith("/models"):
        return (
            f"{url} does not exist (HTTP 404): the base URL should be the server's "
            "OpenAI API, which usually ends in /v1"
        )
    return f"the model server answered HTTP {status} to {url}: {detail}"
