"""web/ui/sessions.js: the session history in IndexedDB, driven through
dev/sessions_harness.html."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

HARNESS = "dev/sessions_harness.html"


def event(session: str, type_: str, content: str = "", turn: int = 1, **meta: Any) -> dict:
    return {
        "ts": time.time(),
        "session": session,
        "turn": turn,
        "step": None,
        "type": type_,
        "content": content,
        "meta": meta,
    }


def turn(session: str, question: str, state: str | None, turn_no: int = 1) -> list[dict]:
    """The events of one turn; state None leaves the turn without its final event."""
    events = [
        event(session, "turn_start", question, turn_no),
        event(session, "plan_started", "", turn_no, plan={"tasks": []}),
        event(session, "step_started", "s1", turn_no),
    ]
    if state is not None:
        events += [
            event(session, "final", f"answer to {question}", turn_no, state=state, error=None),
            event(session, "turn_end", "", turn_no, state=state),
        ]
    return events


def open_harness(page, page_url) -> None:
    page.goto(page_url(HARNESS))
    page.wait_for_selector("body[data-status='ready']")


def append_all(page, events: list[dict]) -> None:
    page.evaluate("async (events) => { for (const e of events) await store.append(e); }", events)


def test_append_then_events_round_trip_in_arrival_order(page, page_url) -> None:
    open_harness(page, page_url)
    events = [event("s-a", "session_start", turn=0), *turn("s-a", "What is 6*7?", "completed")]
    other = turn("s-b", "Unrelated", "failed")
    # Interleave two sessions: each must come back alone and in its own order.
    append_all(page, [events[0], other[0], *events[1:3], *other[1:], *events[3:]])

    assert page.evaluate("store.events('s-a')") == events
    assert page.evaluate("store.events('s-b')") == other
    assert page.evaluate("store.events('no-such-session')") == []


def test_append_without_awaiting_keeps_arrival_order(page, page_url) -> None:
    open_harness(page, page_url)
    events = [event("burst", "step_progress", f"#{i}") for i in range(200)]
    # A UI relaying a fast stream fires appends without waiting for each one.
    page.evaluate("(events) => Promise.all(events.map((e) => store.append(e)))", events)
    assert [e["content"] for e in page.evaluate("store.events('burst')")] == [
        f"#{i}" for i in range(200)
    ]


def test_sessions_lists_newest_first_with_title_count_and_last_state(page, page_url) -> None:
    open_harness(page, page_url)
    done = [event("done", "session_start", turn=0), *turn("done", "First question", "completed")]
    done += turn("done", "Second question", "cancelled", turn_no=2)
    failed = turn("failed", "Will fail", "failed")
    open_turn = turn("open", "Still working", None)
    for events in (done, failed, open_turn):
        append_all(page, events)
        time.sleep(0.01)  # distinct start times

    listing = page.evaluate("store.sessions()")
    assert [s["session"] for s in listing] == ["open", "failed", "done"]
    by_id = {s["session"]: s for s in listing}
    # The title is the first question; the state is the last turn's final state.
    assert by_id["done"]["title"] == "First question"
    assert by_id["done"]["lastState"] == "cancelled"
    assert by_id["done"]["events"] == len(done)
    assert by_id["failed"]["lastState"] == "failed"
    # This page is writing that turn and it has no final event yet.
    assert by_id["open"]["lastState"] == "running"
    assert by_id["open"]["title"] == "Still working"
    for summary in listing:
        events = page.evaluate("(id) => store.events(id)", summary["session"])
        assert summary["started"] == events[0]["ts"]
        assert summary["updated"] == max(e["ts"] for e in events)

    # Once the final event arrives the turn is no longer running.
    append_all(page, [event("open", "final", "ok", state="completed")])
    assert page.evaluate("store.sessions()")[0]["lastState"] == "completed"


def test_export_jsonl_gives_back_exactly_the_appended_events(page, page_url) -> None:
    open_harness(page, page_url)
    events = [event("exp", "session_start", turn=0), *turn("exp", "Export me", "completed")]
    events[2]["meta"]["plan"] = {"tasks": [{"task_id": 1, "text": 'ünïcödé ✓ "quoted"\nline'}]}
    events[3]["step"] = "s1"
    append_all(page, events)

    text = page.evaluate("store.exportJsonl('exp')")
    lines = text.splitlines()
    assert text.endswith("\n")
    assert len(lines) == len(events)
    assert [json.loads(line) for line in lines] == events
    assert page.evaluate("store.exportJsonl('nothing')") == ""


def test_download_jsonl_offers_the_text_as_a_file(page, page_url) -> None:
    open_harness(page, page_url)
    with page.expect_download() as info:
        page.evaluate("downloadJsonl('run.jsonl', '{\"a\": 1}\\n')")
    download = info.value
    assert download.suggested_filename == "run.jsonl"
    assert Path(download.path()).read_text() == '{"a": 1}\n'


def test_reload_mid_run_keeps_every_event_already_shown(page, page_url) -> None:
    open_harness(page, page_url)
    append_all(page, [event("live", "session_start", turn=0), event("live", "turn_start", "Go")])
    page.evaluate("() => { runEvents('live', 100000); }")  # not awaited: the run goes on
    page.wait_for_function("Number(sessionStorage.getItem('shown:live')) >= 150")
    page.reload()
    page.wait_for_selector("body[data-status='ready']")

    shown_last = int(page.evaluate("sessionStorage.getItem('shown:live')"))
    stored = page.evaluate("store.events('live')")
    indexes = [e["meta"]["index"] for e in stored[2:]]
    # Everything shown before the reload is there, in order, with no gap; an append that was
    # still in flight may or may not have landed.
    assert indexes == list(range(len(indexes)))
    assert len(indexes) >= shown_last + 1 >= 151
    # The page that ran that turn is gone: it is interrupted, not running.
    listing = {s["session"]: s for s in page.evaluate("store.sessions()")}
    assert listing["live"]["lastState"] == "interrupted"
    assert listing["live"]["events"] == len(stored)


def test_delete_removes_one_session_and_clear_removes_all(page, page_url) -> None:
    open_harness(page, page_url)
    keep = turn("keep", "Keep me", "completed")
    drop = turn("drop", "Drop me", "completed")
    append_all(page, [*keep, *drop])

    page.evaluate("store.delete('drop')")
    assert page.evaluate("store.events('drop')") == []
    assert [s["session"] for s in page.evaluate("store.sessions()")] == ["keep"]
    assert page.evaluate("store.events('keep')") == keep

    page.evaluate("store.clear()")
    assert page.evaluate("store.sessions()") == []
    assert page.evaluate("store.events('keep')") == []


def test_oversized_content_is_stored_cut_with_a_note(page, page_url) -> None:
    open_harness(page, page_url)
    stored = page.evaluate(
        """async () => {
            const big = "x".repeat(1_500_000) + "END";
            await store.append({ts: 1, session: "big", turn: 1, step: "s1",
                                type: "observation", content: big, meta: {tool: "t"}});
            return (await store.events("big"))[0];
        }"""
    )
    assert len(stored["content"]) < 1_100_000
    assert stored["content"].endswith("END")  # head and tail are kept
    assert "characters cut" in stored["content"]
    assert stored["meta"]["tool"] == "t"
    assert stored["meta"]["truncated"]["content_chars"] == 1_500_003


def test_invalid_event_is_rejected_with_a_clear_error(page, page_url) -> None:
    open_harness(page, page_url)
    message = page.evaluate(
        "store.append({type: 'final', content: 'no session'}).then(() => null, (e) => e.message)"
    )
    assert message and '"session"' in message


def test_missing_indexeddb_gives_a_clear_error_instead_of_hanging(page, page_url) -> None:
    page.add_init_script("Object.defineProperty(window, 'indexedDB', {value: undefined})")
    page.goto(page_url(HARNESS))
    page.wait_for_selector("body[data-status='failed']", timeout=60_000)  # a hang guard
    assert page.evaluate("window.openError").startswith("Session history is unavailable:")
