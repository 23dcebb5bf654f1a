"""The terminal's line about the model's preparation (the page's PREPARED report)."""

from __future__ import annotations

import io

from agent_py.cli.run_report import print_prepared


def said(report: dict[str, object]) -> str:
    out = io.StringIO()
    print_prepared(report, out)
    return out.getvalue().strip()


def test_the_line_counts_the_prompt_where_the_engine_said_how_long_it_was() -> None:
    assert said({"prefilled": True, "prompt_tokens": 812, "ms": 2500}) == (
        "model prepared before the task in 2.5 s: 812 prompt tokens of the planner's prompt "
        "prefilled"
    )


def test_a_server_that_reports_no_usage_gets_no_count_of_zero() -> None:
    assert said({"prefilled": True, "prompt_tokens": 0, "ms": 37400}) == (
        "model prepared before the task in 37.4 s: the planner's prompt prefilled"
    )


def test_an_unprepared_model_says_nothing_but_its_warning() -> None:
    assert said({"prefilled": False, "skipped": "stopped"}) == ""
    assert said({"prefilled": False, "warning": "the state was not saved"}) == (
        "warning: the state was not saved"
    )
