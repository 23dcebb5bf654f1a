"""An asyncio event loop for Pyodide that runs ready callbacks together, in one browser task.

Pyodide's ``WebLoop`` hands every ready callback (a task's next step, a future's done
callback) to the browser as a task of its own: a JavaScript proxy for the callback, a trip
through the browser's task queue, and an entry into Python armed for stack switching. In
Chromium's worker that is about 90 µs per callback, against 5 µs for a turn of CPython's
loop, and an agent step takes several turns (scripts/bench_page.py measured a third of a
step's orchestration time there).

:class:`BatchedWebLoop` keeps a ready queue as CPython's loop does and runs it in one browser
task, callbacks queued meanwhile included, until the queue is empty or :data:`TIME_SLICE_S`
has passed; then it yields to the browser, so the page's messages (Stop above all), timers
and promise callbacks still get their turn while Python is busy. Timers with a delay stay
the browser's (``setTimeout``), as in ``WebLoop``.

Only importable inside Pyodide. The worker installs it once, before the agent runs::

    agent_py.pyodide_loop.install()
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import time
from collections.abc import Callable
from typing import Any

from pyodide.ffi import create_once_callable  # type: ignore[import-not-found]
from pyodide.webloop import WebLoop  # type: ignore[import-not-found]
from pyodide_js._api import scheduleCallback  # type: ignore[import-not-found]

TIME_SLICE_S = 0.005
"""Longest stretch of Python callbacks in one browser task (the page's messages wait that
long at most while Python is busy)."""


class BatchedWebLoop(WebLoop):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self._ready: collections.deque[asyncio.Handle] = collections.deque()
        self._drain_pending = False
        self.browser_tasks = 0
        """Browser tasks that ran ready callbacks so far (the tests read it)."""

    def call_soon(
        self,
        callback: Callable[..., Any],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        handle = asyncio.Handle(callback, args, self, context=context)
        self._ready.append(handle)
        if not self._drain_pending:
            self._drain_pending = True
            self._schedule_drain()
        return handle

    def call_later(
        self,
        delay: float,
        callback: Callable[..., Any],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        # A due time already reached runs soon, as in CPython (WebLoop refuses one in the past).
        if delay <= 0:
            return self.call_soon(callback, *args, context=context)
        handle: asyncio.Handle = super().call_later(delay, callback, *args, context=context)
        return handle

    def _schedule_drain(self) -> None:
        # As WebLoop schedules a callback: a browser task, with stack switching allowed, so a
        # callback may still block on a promise with pyodide.ffi.run_sync.
        scheduleCallback(create_once_callable(self._drain, _may_syncify=True), 0)

    def _drain(self) -> None:
        self.browser_tasks += 1
        self._install_running_loop()
        self._install_asyncgen_hooks()
        started = time.perf_counter()
        ready = self._ready
        try:
            while ready:
                handle = ready.popleft()
                if not handle.cancelled():
                    self._run_handle(handle)
                if time.perf_counter() - started >= TIME_SLICE_S:
                    break
        finally:
            # Left over (the slice ran out, or a callback raised SystemExit): the next task.
            if ready:
                self._schedule_drain()
            else:
                self._drain_pending = False

    def _run_handle(self, handle: asyncio.Handle) -> None:
        """Run one callback; ``Handle._run`` reports its exceptions to the loop's handler,
        and SystemExit and KeyboardInterrupt go where WebLoop sends them."""
        try:
            handle._run()
        except SystemExit as exit_:
            if self._system_exit_handler is None:
                raise
            self._system_exit_handler(exit_.code)
        except KeyboardInterrupt:
            if self._keyboard_interrupt_handler is None:
                raise
            self._keyboard_interrupt_handler()


def install() -> BatchedWebLoop:
    """Make a :class:`BatchedWebLoop` the loop that Python and Pyodide's JavaScript bridge
    use from now on.

    Call it between tasks: one already running finishes on the old loop, and each callback it
    runs makes that loop the running one again.
    """
    loop = BatchedWebLoop()
    asyncio.set_event_loop(loop)
    # Also the running loop (WebLoop marks itself so at each callback it runs), which is the
    # one asyncio.get_event_loop() and Pyodide's bridge pick first.
    asyncio._set_running_loop(loop)
    return loop


def browser_tasks() -> int | None:
    """Browser tasks the running loop has used so far, or None when it is not a
    :class:`BatchedWebLoop` (the worker reports the difference over each run)."""
    loop = asyncio.get_event_loop()
    return loop.browser_tasks if isinstance(loop, BatchedWebLoop) else None
