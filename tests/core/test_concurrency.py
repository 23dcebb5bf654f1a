"""The few-turns helpers keep the guarantees of what they replace: gather's (every step has
ended when the group returns or raises), wait's (a run that ignores cancellation is left
behind at its limit) and asyncio.timeout's (TimeoutError at the limit, on a shared timer)."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from agent_py.core.concurrency import deadline, run_abandonable, run_together

TIMED_OUT = object()


async def test_run_together_returns_results_in_order() -> None:
    async def after(delay: float, value: int) -> int:
        await asyncio.sleep(delay)
        return value

    assert await run_together([after(0.03, 1), after(0.0, 2), after(0.01, 3)]) == [1, 2, 3]
    assert await run_together([]) == []


async def test_run_together_cancels_the_others_when_one_raises() -> None:
    ended: list[str] = []

    async def slow() -> str:
        try:
            await asyncio.sleep(30)
        finally:
            ended.append("slow")
        return "never"

    async def broken() -> str:
        await asyncio.sleep(0)
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        await asyncio.wait_for(run_together([slow(), broken()]), 10)
    assert ended == ["slow"]  # it had ended before the error went on


async def test_a_cancelled_caller_cancels_every_coroutine_and_waits_for_them() -> None:
    ended: list[int] = []

    async def slow(index: int) -> int:
        try:
            await asyncio.sleep(30)
        finally:
            await asyncio.sleep(0.01)  # cleans up for a moment
            ended.append(index)
        return index

    group = asyncio.ensure_future(run_together([slow(1), slow(2)]))
    await asyncio.sleep(0.01)
    group.cancel()
    with pytest.raises(asyncio.CancelledError):
        await group
    assert sorted(ended) == [1, 2]


async def test_run_abandonable_leaves_a_stubborn_run_behind_at_its_limit() -> None:
    finished = asyncio.Event()

    async def stubborn() -> str:
        for _ in range(10):
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.05)
        finished.set()
        return "late"

    assert await run_abandonable(stubborn(), 0.1, TIMED_OUT) is TIMED_OUT
    assert not finished.is_set(), "it returned at its limit, before the run ended"
    await asyncio.wait_for(finished.wait(), 10)  # let it end before the loop closes


async def test_run_abandonable_passes_on_results_and_errors_of_the_run() -> None:
    async def fine() -> str:
        await asyncio.sleep(0)
        return "ok"

    async def own_timeout() -> str:
        raise TimeoutError("the tool's own")

    assert await run_abandonable(fine(), 5, TIMED_OUT) == "ok"
    with pytest.raises(TimeoutError, match="the tool's own"):  # not taken for the limit
        await run_abandonable(own_timeout(), 5, TIMED_OUT)


async def test_deadlines_fire_at_their_own_time_whatever_their_order() -> None:
    fired: list[str] = []

    async def limited(name: str, timeout_s: float) -> None:
        try:
            async with deadline(timeout_s):
                await asyncio.sleep(30)
        except TimeoutError:
            fired.append(name)

    async with deadline(20):  # a long one first: the shorter ones must not wait for it
        started = time.perf_counter()
        await asyncio.gather(limited("late", 0.2), limited("early", 0.05))
        assert time.perf_counter() - started < 1
    assert fired == ["early", "late"]


async def test_an_ended_deadline_never_cancels_anything() -> None:
    async with deadline(0.05):
        await asyncio.sleep(0)
    await asyncio.sleep(0.15)  # past the limit: nothing is cancelled


async def test_a_deadline_nested_in_another_reports_its_own_expiry() -> None:
    async with deadline(10):
        with pytest.raises(TimeoutError):
            async with deadline(0.05):
                await asyncio.sleep(30)
        await asyncio.sleep(0.01)  # the outer one still runs


async def test_ended_deadlines_do_not_pile_up_until_they_would_have_been_due() -> None:
    """A long session ends dozens of deadlines a run, each due minutes later: the shared heap
    keeps only a bounded number of ended ones, not every one of the last ten minutes."""
    from agent_py.core.concurrency import _Deadlines, _deadlines

    for _ in range(1000):
        async with deadline(600):
            pass
    heap = _deadlines[asyncio.get_running_loop()]._heap
    assert len(heap) <= 2 * _Deadlines.COMPACT_AFTER + 2, len(heap)
    with pytest.raises(TimeoutError):  # one that is due still fires
        async with deadline(0.01):
            await asyncio.sleep(10)
