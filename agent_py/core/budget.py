"""Keeping prompts inside the model's context window.

A prompt that is too long loses parts in a fixed order, and never its newest instruction:

1. results of earlier tasks (``Keep.DIGEST``) are summarised, then dropped, oldest first;
2. then older turns (``Keep.HISTORY``): superseded plans, earlier replies, examples;
3. then the system prompt (``Keep.TOOLS``) takes its shorter forms: fewer tool schemas,
   then one line per tool;
4. last, the question and the current instruction (``Keep.CURRENT``) are cut head-and-tail;
   the full text stays in Python (the question in the run, results as ``${step_id}``).

A message says how long it survives with ``keep`` and may offer ``compact`` stand-ins, each
shorter than the last, made only when a prompt does not fit (the newest message is always
CURRENT, and is only ever cut). Without ``keep``, the system prompt counts as TOOLS and
everything else as HISTORY.

Without a tokenizer on the Python side, token counts are estimated on the safe side:
English prose runs at about four UTF-8 bytes per Qwen3 token and JSON or code at about three,
so three bytes per token over-counts rather than under-counts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from agent_py.core.errors import PromptTooLargeError
from agent_py.core.messages import Keep, Message

BYTES_PER_TOKEN = 3
MESSAGE_OVERHEAD_TOKENS = 8  # role markers and separators of a chat template
CURRENT_FLOOR_CHARS = 1_200  # a current message is never cut below this (its instruction)
SYSTEM_FLOOR_CHARS = 1_500  # nor the system prompt (its rules and reply format)
_CUT_PASSES = 6  # a tokenizer is not linear in characters: re-measure after each cut


def estimate_tokens(text: str) -> int:
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def truncate_middle(text: str, max_chars: int, *, note: str = "", tail_share: float = 1 / 3) -> str:
    """Keep the head and the tail of ``text``, replacing the middle with a visible marker.

    ``tail_share`` is the part of what is kept that comes from the end: instructions that
    close a prompt need a larger one."""
    if len(text) <= max_chars:
        return text
    cut = len(text) - max_chars
    marker = f"\n[... {cut} characters cut{'; ' + note if note else ''} ...]\n"
    keep = max(max_chars - len(marker), 0)
    tail = int(keep * tail_share)
    head = keep - tail
    return text[:head] + marker + (text[-tail:] if tail else "")


def prompt_tokens(messages: Sequence[Message], count: Callable[[str], int]) -> int:
    return sum(count(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)


Role = Literal["system", "user", "assistant"]


@dataclass
class _Part:
    role: Role
    content: str
    keep: Keep
    compact: Callable[[], list[str]] = list
    dropped: bool = False


def fit_messages(
    messages: Sequence[Message],
    budget_tokens: int,
    count: Callable[[str], int] = estimate_tokens,
) -> list[Message]:
    """Return plain ``{role, content}`` messages within ``budget_tokens``, degraded in the
    order of the module docstring. Raises :class:`PromptTooLargeError` when even the floors
    do not fit."""
    parts = [_part(m, i == len(messages) - 1) for i, m in enumerate(messages)]
    sizes: dict[str, int] = {}

    def size(text: str) -> int:
        if text not in sizes:
            sizes[text] = count(text)
        return sizes[text]

    def excess() -> int:
        used = sum(size(p.content) + MESSAGE_OVERHEAD_TOKENS for p in parts if not p.dropped)
        return used - budget_tokens

    def fitted() -> list[Message]:
        return _merge_neighbours([p for p in parts if not p.dropped])

    if excess() <= 0:
        return fitted()
    for level in (Keep.DIGEST, Keep.HISTORY, Keep.TOOLS):
        chosen = [p for p in parts if p.keep is level and not p.dropped]
        for part in chosen:  # oldest first
            for stand_in in part.compact():
                if len(stand_in) < len(part.content):
                    part.content = stand_in
                    if excess() <= 0:
                        return fitted()
        if level is Keep.TOOLS:
            break
        for index, part in enumerate(parts):
            if part.keep is level and not part.dropped and part.role != "system":
                part.dropped = True
                reply = parts[index + 1] if index + 1 < len(parts) else None
                if part.role == "user" and reply is not None and reply.role == "assistant":
                    reply.dropped = reply.keep <= part.keep  # a reply goes with its prompt
                if excess() <= 0:
                    return fitted()
    current = [p for p in parts if p.keep is Keep.CURRENT]
    system = [p for p in parts if p.role == "system" and p.keep is not Keep.CURRENT]
    for floor, group in ((CURRENT_FLOOR_CHARS, current), (SYSTEM_FLOOR_CHARS, system)):
        for part in sorted(group, key=lambda p: -len(p.content)):  # the longest first
            for _ in range(_CUT_PASSES):
                over = excess()
                if over <= 0:
                    return fitted()
                tokens = max(size(part.content), 1)
                share = max(tokens - over - 16, 0) / tokens
                target = max(int(len(part.content) * share), floor)
                if target >= len(part.content):
                    break
                part.content = truncate_middle(
                    part.content, target, note="to fit the context window", tail_share=0.5
                )
    if excess() <= 0:
        return fitted()
    raise PromptTooLargeError(
        f"the prompt does not fit the model's context window ({budget_tokens} tokens for the "
        "prompt), even with earlier results, older turns and the tool list cut to the minimum"
    )


def _part(message: Message, newest: bool) -> _Part:
    """The newest message is the current instruction, whatever it says of itself."""
    keep = message.get("keep")
    if newest:
        keep = Keep.CURRENT
    elif keep is None:
        keep = Keep.TOOLS if message["role"] == "system" else Keep.HISTORY
    return _Part(message["role"], message["content"], keep, message.get("compact", list))


def _merge_neighbours(parts: list[_Part]) -> list[Message]:
    """Plain messages; two of the same role side by side (left by a dropped turn) become
    one, so chat templates that expect user and assistant to alternate still work."""
    merged: list[Message] = []
    for part in parts:
        if merged and part.role != "system" and merged[-1]["role"] == part.role:
            merged[-1]["content"] += "\n\n" + part.content
        else:
            merged.append({"role": part.role, "content": part.content})
    return merged
