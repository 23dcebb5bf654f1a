"""What one chat-completions request sends: the format its reply is held to, and its body.

The kind of server (:mod:`agent_py.engines.model_server_discovery`) decides how a reply is
held to a JSON schema:

- llama.cpp's server (it answers ``/props``, which also gives its context window): the
  GBNF ``grammar`` when the call has one, else ``response_format`` of type ``json_schema``;
- llama-cpp-python's server (its OpenAPI title says so): ``grammar``, else its own
  ``response_format`` of type ``json_object`` with a ``schema``;
- any other server (Ollama, LM Studio, vLLM): ``response_format`` of type ``json_schema``.

A call held by a grammar alone (a code call's one fenced block) sends it to llama.cpp's
servers; the others get that call unconstrained.
"""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum
from typing import Any

from agent_py.core.llm import CallInfo, Message
from agent_py.engines.model_server_discovery import ServerKind


class OutputFormat(StrEnum):
    """How a reply is held to a JSON schema."""

    AUTO = "auto"
    """By the kind of server (see the module's docstring)."""
    JSON_SCHEMA = "json_schema"
    JSON_OBJECT = "json_object"
    GRAMMAR = "grammar"
    NONE = "none"


def reply_format(configured: OutputFormat, kind: ServerKind, call: CallInfo) -> OutputFormat:
    """The format ``call`` is sent with: ``configured`` (the user's choice), or by ``kind``."""
    llama = kind in (ServerKind.LLAMA_CPP, ServerKind.LLAMA_CPP_PYTHON)
    if call.schema is None:
        # A grammar alone (a code call's one fenced block): llama.cpp's servers take it;
        # an OpenAI-style API has no field for it, so the call goes as it is.
        takes_grammar = configured is OutputFormat.GRAMMAR or (
            configured is OutputFormat.AUTO and llama
        )
        return OutputFormat.GRAMMAR if call.grammar and takes_grammar else OutputFormat.NONE
    if configured is not OutputFormat.AUTO:
        if configured is OutputFormat.GRAMMAR and call.grammar is None:
            return OutputFormat.JSON_SCHEMA
        return configured
    if llama and call.grammar:
        return OutputFormat.GRAMMAR
    if kind is ServerKind.LLAMA_CPP_PYTHON:
        return OutputFormat.JSON_OBJECT
    return OutputFormat.JSON_SCHEMA


def request_body(
    messages: list[Message],
    call: CallInfo,
    fmt: OutputFormat,
    kind: ServerKind,
    *,
    keep_alive: str = "",
) -> dict[str, Any]:
    """The JSON body of a streamed chat-completions request for ``call``."""
    body: dict[str, Any] = {
        "model": call.model,
        "messages": messages,
        "max_tokens": call.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    llama = kind in (ServerKind.LLAMA_CPP, ServerKind.LLAMA_CPP_PYTHON)
    if llama:
        # llama-cpp-python's server penalises repeats by default (1.1), which breaks
        # code and JSON; llama.cpp's own default, and our CPU engine's, is none.
        body["repeat_penalty"] = 1.0
    if call.sampling is not None:
        sampling = call.sampling.model_dump(exclude_none=True)
        standard = ("temperature", "top_p", "frequency_penalty", "presence_penalty", "seed")
        body.update({key: value for key, value in sampling.items() if key in standard})
        if llama or kind is ServerKind.OLLAMA:  # llama.cpp's own samplers, by their names
            body.update({key: value for key, value in sampling.items() if key not in standard})
    if fmt is OutputFormat.GRAMMAR and call.grammar is not None:
        body["grammar"] = call.grammar
    elif fmt is OutputFormat.JSON_OBJECT:
        body["response_format"] = {"type": "json_object", "schema": call.schema}
    elif fmt is OutputFormat.JSON_SCHEMA or fmt is OutputFormat.GRAMMAR:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": f"{call.purpose.value}_reply", "schema": call.schema},
        }
    if keep_alive and kind is ServerKind.OLLAMA:
        body["keep_alive"] = keep_alive
    return body


def one_token(call: CallInfo) -> CallInfo:
    """``call`` cut to one token, unconstrained: a prefill's request."""
    return replace(call, max_tokens=1, schema=None, grammar=None)
