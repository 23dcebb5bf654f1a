"""Keeping prompts inside the model's context window.

We have no tokenizer on the Python side, so token counts are estimated on the safe side:
English prose runs at about four UTF-8 bytes per Qwen3 token and JSON or code at about three,
so three bytes per token over-counts rather than under-counts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_py.llm import Message

BYTES_PER_TOKEN = 3
MESSAGE_OVERHEAD_TOKENS = 8  # role markers and separators of a chat template
_CUT_FLOOR = 120  # an older message this short is left alone (a cut marker is about 50)


def estimate_tokens(text: str) -> int:
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def truncate_middle(text: str, max_chars: int, *, note: str = "") -> str:
    """Keep the head and the tail of ``text``, replacing the middle with a visible marker."""
    if len(text) <= max_chars:
        return text
    cut = len(text) - max_chars
    marker = f"\n[... {cut} characters cut{'; ' + note if note else ''} ...]\n"
    keep = max(max_chars - len(marker), 0)
    head = keep * 2 // 3
    tail = keep - head
    return text[:head] + marker + (text[-tail:] if tail else "")


def prompt_tokens(messages: Sequence[Message], count: Callable[[str], int]) -> int:
    return sum(count(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def fit_messages(
    messages: list[Message],
    budget_tokens: int,
    count: Callable[[str], int] = estimate_tokens,
) -> list[Message]:
    """Return messages whose estimated size is within ``budget_tokens``.

    Older messages are cut first: the longest of them in the middle, until the prompt fits.
    The newest message (the current instruction) is cut only when the older ones are down
    to their markers, and the system prompt last.
    """
    fitted: list[Message] = [{"role": m["role"], "content": m["content"]} for m in messages]
    newest = len(fitted) - 1
    for _ in range(64):
        excess = prompt_tokens(fitted, count) - budget_tokens
        if excess <= 0:
            return fitted
        older = [
            i
            for i, m in enumerate(fitted)
            if m["role"] != "system" and i != newest and len(m["content"]) > _CUT_FLOOR
        ]
        candidates = older or [i for i, m in enumerate(fitted) if m["role"] != "system"]
        longest = max(candidates or range(len(fitted)), key=lambda i: len(fitted[i]["content"]))
        content = fitted[longest]["content"]
        # Cut a little more than the excess, in characters (at least one char per token).
        target = max(len(content) - (excess + 16) * BYTES_PER_TOKEN, 0)
        if target >= len(content):
            break
        fitted[longest]["content"] = truncate_middle(content, target, note="prompt budget")
    raise ValueError(f"cannot fit the prompt into {budget_tokens} tokens")
