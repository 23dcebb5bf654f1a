"""What a test needs from the machine, and what happens when it is missing.

In CI (``CI=true``) a missing tool fails the test with the reason and the set-up step that
provides it: a promise that is not checked must not pass as checked. Elsewhere it is skipped
with the same words, which pytest prints in its summary (``-rs``, set in pyproject.toml).
"""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def need(missing: str | None, setup: str) -> None:
    """Fail (CI) or skip (elsewhere) when ``missing`` names what is missing; ``setup`` says
    how to provide it."""
    if missing is None:
        return
    reason = f"{missing}: {setup}"
    if in_ci():
        pytest.fail(f"this check cannot run, and CI must run it: {reason}", pytrace=False)
    pytest.skip(reason)
