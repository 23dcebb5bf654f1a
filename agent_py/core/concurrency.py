"""Running coroutines side by side in few turns of the event loop.

In Pyodide each turn of asyncio's loop (a task waking up, a done-callback) is a task of the
browser's event loop and costs more than most of what a step computes. Its loop
also adds a done-callback to every task that ``loop.create_task`` makes, one more turn when
the task ends, and ``asyncio.gather`` / ``asyncio.wait`` take a turn per finished task to
tell the waiter. So the tasks here are made directly, and each wakes its waiter itself as it
ends: one turn per wait. The guarantees are those of gather and wait (see each function).

Time limits share one timer per loop (:func:`deadline`): each timer is a browser timer there,
and one that is no longer needed stays pending until it comes due.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import sys
import weakref
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")
D = TypeVar("D")


async def run_together(coroutines: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Run ``coroutines`` at the same time; their results in order. If one raises (a bug of
    ours), the others are cancelled before the error goes on, and a cancelled caller cancels
    them all: either way every one has ended when this returns or raises."""
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = asyncio.Future(loop=loop)
    left = len(coroutines)
    failure: list[BaseException] = []

    async def tracked(coroutine: Coroutine[Any, Any, T]) -> T:
        nonlocal left
        try:
            return await coroutine
        except BaseException as exc:
            failure.append(exc)
            raise
        finally:
            left -= 1
            if (failure or not left) and not ended.done():
                ended.set_result(None)

    running = [_started(tracked(c), loop) for c in coroutines]
    if not running:
        return []
    try:
        await ended
        if failure:
            raise failure[0]
    except BaseException:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        raise
    return [task.result() for task in running]


async def run_abandonable(awaitable: Awaitable[T], timeout_s: float, timed_out: D) -> T | D:
    """The result of ``awaitable``, run as its own task for at most ``timeout_s``;
    ``timed_out`` when it ran past that.

    At the limit the task is cancelled and left behind, so the caller goes on at the limit
    even when the awaitable ignores the cancellation. A cancelled caller cancels the task the
    same way."""
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = asyncio.Future(loop=loop)

    async def tracked() -> T:
        try:
            return await awaitable
        finally:
            if not ended.done():
                ended.set_result(None)

    run = asyncio.Task(tracked(), loop=loop)
    try:
        async with deadline(timeout_s):
            await ended
    except TimeoutError:  # the limit's (``ended`` never raises it)
        if not run.done():  # it may have ended just as the limit came
            _abandon(run)
            return timed_out
    except BaseException:
        _abandon(run)
        raise
    return run.result()


def _started(coroutine: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop) -> asyncio.Task[T]:
    """A task that runs at once up to its first wait (Python 3.12 and later), a turn sooner
    than at the loop's next turn. Tasks started one after the other run their first parts in
    the same order either way."""
    if sys.version_info >= (3, 12):
        return asyncio.Task(coroutine, loop=loop, eager_start=True)
    return asyncio.Task(coroutine, loop=loop)


def _abandon(run: asyncio.Future[Any]) -> None:
    """Cancel ``run`` without waiting for it; whatever it ends with is consumed."""
    run.cancel()
    run.add_done_callback(lambda done: done.cancelled() or done.exception())


class deadline:
    """``asyncio.timeout(timeout_s)`` (the same TimeoutError, cancellation and nesting), on a
    timer shared by the loop's deadlines: no timer of its own unless it is the earliest."""

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._timeout = asyncio.timeout(None)  # rescheduled by the shared timer when due
        self._entry: _Deadline | None = None

    async def __aenter__(self) -> None:
        await self._timeout.__aenter__()
        loop = asyncio.get_running_loop()
        deadlines = _deadlines.get(loop)
        if deadlines is None:
            deadlines = _deadlines[loop] = _Deadlines(loop)
        self._entry = deadlines.add(loop.time() + self._timeout_s, self._timeout)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._entry is not None:
            deadlines = _deadlines.get(asyncio.get_running_loop())
            if deadlines is not None:
                deadlines.end(self._entry)
            self._entry.timeout = None  # ended: the shared timer passes it by
        await self._timeout.__aexit__(exc_type, exc, traceback)


@dataclass(order=True)
class _Deadline:
    when: float
    order: int
    timeout: asyncio.Timeout | None = field(compare=False)


class _Deadlines:
    """The pending deadlines of one loop, on one timer set for the earliest. Ended ones are
    dropped when the timer comes to them, or all at once when they are most of the heap: a
    long session ends dozens of deadlines a run, each due only minutes later."""

    COMPACT_AFTER = 64
    """Ended deadlines that may wait in the heap before it is rebuilt without them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._ended = 0
        self._heap: list[_Deadline] = []
        self._order = itertools.count()
        self._timer: asyncio.TimerHandle | asyncio.Handle | None = None
        self._timer_at = math.inf

    def add(self, when: float, timeout: asyncio.Timeout) -> _Deadline:
        entry = _Deadline(when, next(self._order), timeout)
        heapq.heappush(self._heap, entry)
        if when < self._timer_at:
            self._arm(when)
        return entry

    def end(self, entry: _Deadline) -> None:
        """``entry`` is over; past COMPACT_AFTER such entries, once they are half the heap,
        the heap keeps only the pending ones."""
        if entry.timeout is None:
            return
        self._ended += 1
        if self._ended > self.COMPACT_AFTER and 2 * self._ended > len(self._heap):
            self._heap = [e for e in self._heap if e.timeout is not None and e is not entry]
            heapq.heapify(self._heap)
            self._ended = 0

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self._loop.call_later(max(when - self._loop.time(), 0.0), self._fire)

    def _fire(self) -> None:
        self._timer, self._timer_at = None, math.inf
        now = self._loop.time()
        heap = self._heap
        while heap and (heap[0].timeout is None or heap[0].when <= now):
            entry = heapq.heappop(heap)
            if entry.timeout is not None:
                entry.timeout.reschedule(entry.when)  # due: it cancels its task now
            else:
                self._ended = max(self._ended - 1, 0)
        if heap:
            self._arm(heap[0].when)


_deadlines: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Deadlines] = (
    weakref.WeakKeyDictionary()
)
