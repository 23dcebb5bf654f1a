"""scripts/bench_page.py's reading of a Chrome trace: each thread's CPU and busy time."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from bench_page import threads_cpu


def _named(pid: int, tid: int, process: str, thread: str) -> list[dict[str, object]]:
    return [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": tid, "args": {"name": process}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": thread}},
    ]


def _slice(pid: int, tid: int, ts: int, dur: int, tdur: int) -> dict[str, object]:
    return {
        "ph": "X",
        "name": "RunTask",
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "tdur": tdur,
    }


def test_only_outermost_slices_count_and_a_pools_threads_add_up() -> None:
    trace = [
        *_named(1, 10, "Renderer", "DedicatedWorker thread"),
        *_named(2, 20, "Browser", "ThreadPoolForegroundWorker"),
        *_named(2, 21, "Browser", "ThreadPoolForegroundWorker"),
        _slice(1, 10, ts=0, dur=4000, tdur=1000),  # a task: 4 ms busy, 1 ms on the CPU
        _slice(1, 10, ts=500, dur=1000, tdur=500),  # inside it: already counted
        _slice(1, 10, ts=5000, dur=2000, tdur=2000),
        _slice(2, 20, ts=0, dur=1000, tdur=1000),
        _slice(2, 21, ts=0, dur=3000, tdur=1500),  # another thread of the same pool
        {"ph": "I", "name": "mark", "pid": 1, "tid": 10, "ts": 100},  # not a slice
    ]
    totals = threads_cpu(trace)
    assert totals == {
        "Renderer/DedicatedWorker thread": (3.0, 6.0),
        "Browser/ThreadPoolForegroundWorker": (2.5, 4.0),
    }
