"""Reading model replies: tolerant, and with one documented error for what cannot be read.

Small models wrap JSON in code fences, think aloud first (Qwen3's ``<think>``), stop in the
middle, or add chatter after the closing tag. The functions here take what is usable and
say exactly what was wrong otherwise.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from agent_py.core.errors import PlanParseError, ReplyParseError
from agent_py.core.plan import PlanSchema

_THINK_LEAD = re.compile(r"\s*<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)(?:```|$)", re.DOTALL)


def split_thinking(text: str) -> tuple[str, str]:
    """Return ``(reply, thinking)``: the reply without its leading ``<think>`` block, and
    that block's text.

    Only a block at the very start is reasoning (Qwen3 thinks first, then answers); a
    ``<think>`` later in the reply is part of what the model says, so the reply is never
    shortened anywhere else. An unclosed leading block (cut while thinking) is all thinking.
    """
    opened = _THINK_LEAD.match(text)
    if opened is None:
        return text.strip(), ""
    rest = text[opened.end() :]
    closed = _THINK_CLOSE.search(rest)
    if closed is None:
        return "", rest.strip()
    return rest[closed.end() :].strip(), rest[: closed.start()].strip()


def extract_tag(text: str, tag: str) -> str | None:
    """The content of the first ``<tag>…</tag>`` (any case); to the end of the text when the
    close is missing."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a character whose lower case is longer: slower, exact
        match = re.search(rf"<{tag}>(.*?)(?:</{tag}>|$)", text, re.DOTALL | re.IGNORECASE)
        return match.group(1).strip() if match else None
    # Plain searches: the regex took a third of reading a plan (0.1 ms in Pyodide).
    opening = lowered.find(f"<{tag}>")
    if opening < 0:
        return None
    start = opening + len(tag) + 2
    end = lowered.find(f"</{tag}>", start)
    return text[start : end if end >= 0 else len(text)].strip()


def extract_json(text: str) -> Any:
    """The first JSON value in ``text`` (inside a code fence or bare, chatter around it)."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    error = "no JSON object found"
    for candidate in candidates:
        start = _first_json_start(candidate)
        if start < 0:
            continue
        try:
            value, _ = json.JSONDecoder().raw_decode(candidate, start)
        except json.JSONDecodeError as exc:
            # An unterminated string reports where the string began, not where the text ended.
            if exc.pos >= len(candidate.rstrip()) or exc.msg.startswith("Unterminated string"):
                error = (
                    "the JSON is cut off before its end (the reply was too long: make it shorter)"
                )
            else:
                error = f"invalid JSON: {exc.msg} at character {exc.pos - start}"
            continue
        except RecursionError:
            error = "the JSON is nested too deeply"
            continue
        return value
    raise ReplyParseError(error)


def _first_json_start(text: str) -> int:
    positions = [p for p in (text.find("{"), text.find("[")) if p >= 0]
    return min(positions) if positions else -1


def parse_plan(text: str) -> PlanSchema:
    """Read a plan from a reply: ``<plan>{…}</plan>``, tolerating fences, thinking and
    trailing text. Raises :class:`PlanParseError` and nothing else."""
    try:
        return _parse_plan(text)
    except PlanParseError:
        raise
    except ReplyParseError as exc:
        raise PlanParseError(exc.reason) from None
    except (ValueError, TypeError, RecursionError) as exc:  # defensive: never leak others
        raise PlanParseError(f"unreadable plan: {exc}") from None


def _parse_plan(text: str) -> PlanSchema:
    reply, _ = split_thinking(text)
    body = extract_tag(reply, "plan")
    value = extract_json(body if body is not None else reply)
    if isinstance(value, list):
        value = {"tasks": value}
    if isinstance(value, dict) and "tasks" not in value and isinstance(value.get("plan"), dict):
        value = value["plan"]
    if not isinstance(value, dict):
        raise PlanParseError('the plan must be a JSON object with a "tasks" list')
    _rename_duplicate_step_ids(value)
    try:
        return PlanSchema.model_validate(value)
    except ValidationError as exc:
        raise PlanParseError(describe_validation_error(exc)) from None


def _rename_duplicate_step_ids(plan: dict[str, Any]) -> None:
    """Give repeated step ids fresh ones (small models number every step "s1").

    The first step keeps the id, so ``${s1}`` still means the first step called s1.
    """
    steps = [
        step
        for task in plan.get("tasks") or []
        if isinstance(task, dict) and isinstance(task.get("steps"), list)
        for step in task["steps"]
        if isinstance(step, dict) and isinstance(step.get("step_id"), str | int)
    ]
    used = {str(step["step_id"]) for step in steps}
    seen: set[str] = set()
    for step in steps:
        step_id = str(step["step_id"])
        if step_id in seen:
            number = 1
            while f"s{number}" in used:
                number += 1
            step_id = f"s{number}"
            used.add(step_id)
            step["step_id"] = step_id
        seen.add(step_id)


def describe_validation_error(exc: ValidationError, limit: int = 5) -> str:
    parts = []
    for error in exc.errors()[:limit]:
        where = ".".join(str(p) for p in error["loc"]) or "plan"
        parts.append(f"{where}: {error['msg']}")
    more = len(exc.errors()) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


class RethinkStatus(StrEnum):
    CONTINUE = "continue"
    CHANGED = "changed"
    DONE = "done"
    FAILED = "failed"
    """The task cannot be done with these tools; ``final`` says why."""


@dataclass(frozen=True)
class RethinkDecision:
    status: RethinkStatus
    plan: PlanSchema | None = None
    final: str | None = None
    unreadable: bool = False
    """No readable reply: the planner goes on with its plan (already reported)."""


def parse_rethink(text: str) -> RethinkDecision:
    """Read ``<status>continue|changed|done|failed</status>`` and its ``<plan>`` or
    ``<final>`` (the answer, or for failed the reason).

    A missing status is inferred from what follows it. Raises :class:`ReplyParseError`
    when the status is unknown, or a changed plan or a final answer is missing or invalid.
    """
    reply, _ = split_thinking(text)
    raw_status = extract_tag(reply, "status")
    final = extract_tag(reply, "final")
    has_plan = extract_tag(reply, "plan") is not None
    if raw_status is None:
        if final is not None:
            raw_status = "done"
        elif has_plan:
            raw_status = "changed"
        else:
            raise ReplyParseError("the reply has no <status>continue|changed|done|failed</status>")
    try:
        status = RethinkStatus(raw_status.strip().lower())
    except ValueError:
        raise ReplyParseError(
            f"unknown status {raw_status.strip()[:40]!r}; use continue, changed, done or failed"
        ) from None
    if status is RethinkStatus.CHANGED:
        return RethinkDecision(status, plan=parse_plan(reply))
    if status is RethinkStatus.DONE:
        if not final:
            raise ReplyParseError("status done needs the answer in <final>…</final>")
        return RethinkDecision(status, final=final)
    if status is RethinkStatus.FAILED:
        if not final:
            raise ReplyParseError("status failed needs the reason in <final>…</final>")
        return RethinkDecision(status, final=final)
    return RethinkDecision(status)


# The reply format's own markup, which a model may carry into its answer: our tags
# (<final>, <status>, <answer>), and a fence around the whole answer (```markdown ... ```).
_WRAPPING_FENCE = re.compile(
    r"\A\s*```(?:markdown|md|text|plaintext)?[ \t]*\n(.*?)\n?```\s*\Z", re.DOTALL | re.IGNORECASE
)
_STATUS_TAG = re.compile(r"<status>\s*\w*\s*</status>", re.IGNORECASE)
_ANSWER_TAGS = re.compile(r"</?(?:final|answer)>", re.IGNORECASE)
# The label our prompts give the answer ("the answer for the user: the result itself"), which a
# small model copies in front of it ("the answer for the user: 150"); dropped when an answer
# follows it.
_COPIED_LABEL = re.compile(
    r"\A\s*(?:the\s+)?answer\s+for\s+the\s+user\s*[:\-–]\s*(?=\S)", re.IGNORECASE
)


def clean_answer(text: str) -> str:
    """The answer without the markup of our reply formats: its thinking, a ``<status>`` tag,
    the ``<final>`` or ``<answer>`` tags around it (their content kept), a Markdown or
    plain-text fence around the whole of it (a fence of code, or one inside an answer, is
    the answer's own, and stays), and our prompts' label for it copied in front of it."""
    answer, _ = split_thinking(text)
    inside = extract_tag(answer, "final")
    if inside is not None:
        answer = inside
    answer = _ANSWER_TAGS.sub("", _STATUS_TAG.sub("", answer)).strip()
    fenced = _WRAPPING_FENCE.match(answer)
    if fenced and "```" not in fenced.group(1):
        answer = fenced.group(1).strip()
    return _COPIED_LABEL.sub("", answer, count=1)
