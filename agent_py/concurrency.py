"""Running coroutines side by side in few turns of the event loop.

In Pyodide each turn of asyncio's loop (a task waking up, a done-callback) is a task of the
browser's event loop and costs about 0.1 ms, more than most of what a step computes. Its loop
also adds a done-callback to every task that ``loop.create_task`` makes, one more turn when
the task ends, and ``asyncio.gather`` / ``asyncio.wait`` take a turn per finished task to
tell the waiter. So the tasks here are made directly, and each wakes its waiter itself as it
ends: one turn per wait. The guarantees are those of gather and wait (see each function).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Coroutine
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
        async with asyncio.timeout(timeout_s):
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
