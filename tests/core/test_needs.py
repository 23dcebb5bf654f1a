"""tests/needs.py: a check that cannot run fails in CI and is skipped, with its reason,
elsewhere."""

from __future__ import annotations

import pytest

from tests.needs import need


def test_a_missing_tool_fails_in_ci_with_the_reason_and_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="strace is missing: install it"):
        need("strace is missing", "install it")


def test_a_missing_tool_is_a_skip_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="strace is missing: install it"):
        need("strace is missing", "install it")


def test_nothing_missing_is_no_event(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    need(None, "install it")
