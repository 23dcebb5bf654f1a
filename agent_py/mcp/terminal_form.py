"""Elicitation forms in a terminal, for ``python -m agent_py.mcp``.

Questions go to stderr (stdout carries the tool's output); answers are read from stdin.
With ``--yes`` the schema's defaults are the answer; without a terminal and without
``--yes`` the request is declined, since nobody can answer it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TextIO

from agent_py.mcp.elicitation import (
    ElicitationAnswer,
    ElicitationField,
    ElicitationForm,
    ElicitationHandler,
)


def _describe(field: ElicitationField) -> str:
    parts = [field.label]
    if field.description and field.description != field.label:
        parts.append(f"({field.description})")
    if field.choices:
        options = ", ".join(
            f"{i}={c.label}" if c.label == c.value else f"{i}={c.label} [{c.value}]"
            for i, c in enumerate(field.choices, 1)
        )
        several = "several, comma-separated; " if field.kind == "choices" else ""
        parts.append(f"[{several}{options}]")
    elif field.kind == "boolean":
        parts.append("[yes/no]")
    if field.default is not None:
        shown = ", ".join(field.default) if isinstance(field.default, list) else field.default
        parts.append(f"(default: {shown})")
    elif not field.required:
        parts.append("(optional)")
    return " ".join(str(part) for part in parts) + ": "


def ask(form: ElicitationForm, read: Callable[[], str], out: TextIO) -> ElicitationAnswer:
    """Ask every field until its answer fits the schema. An empty answer takes the
    default, or leaves an optional field out."""
    print(f"\n{form.server} asks: {form.message}", file=out)
    print("Answer it? [y]es, [n]o (decline), [c]ancel: ", end="", file=out, flush=True)
    choice = read().strip().lower()
    if choice in ("n", "no"):
        return ElicitationAnswer("decline")
    if choice not in ("", "y", "yes"):
        return ElicitationAnswer("cancel")
    content = {}
    for field in form.fields:
        while True:
            print(_describe(field), end="", file=out, flush=True)
            text = read()
            if not text.strip():
                if field.default is not None:
                    content[field.name] = field.default
                    break
                if not field.required:
                    break
                print(f"  {field.label} is required.", file=out)
                continue
            try:
                content[field.name] = field.parse_text(text)
                break
            except ValueError as error:
                print(f"  {error}.", file=out)
    return ElicitationAnswer("accept", content)


def terminal_handler(*, assume_yes: bool) -> ElicitationHandler:
    """The CLI's elicitation handler."""

    async def handle(form: ElicitationForm) -> ElicitationAnswer:
        if assume_yes:
            content = form.defaults()
            if form.problems(content):
                print(
                    f"{form.server} asked: {form.message} --yes cannot answer it: "
                    f"{'; '.join(form.problems(content))}. Declined.",
                    file=sys.stderr,
                )
                return ElicitationAnswer("decline")
            return ElicitationAnswer("accept", content)
        if not sys.stdin.isatty():
            print(
                f"{form.server} asked: {form.message} There is no terminal to answer on; "
                "declined (pass --yes to accept the defaults).",
                file=sys.stderr,
            )
            return ElicitationAnswer("decline")

        def read() -> str:
            line = sys.stdin.readline()
            if not line:
                raise EOFError
            return line.rstrip("\n")

        try:
            return await asyncio.to_thread(ask, form, read, sys.stderr)
        except EOFError:
            return ElicitationAnswer("cancel")

    return handle
