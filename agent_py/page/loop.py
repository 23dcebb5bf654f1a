"""An asyncio event loop for Pyodide that runs ready callbacks together, with few browser tasks.

Pyodide's ``WebLoop`` hands every ready callback (a task's next step, a future's done
callback) to the browser as a task of its own: a JavaScript proxy, a trip through the
browser's task queue, and an entry into Python armed for stack switching. An agent step takes
several such turns (``scripts/bench_page.py`` measures them).

:class:`BatchedWebLoop` keeps a ready queue as CPython's loop does and runs it in one go
(a *drain*), callbacks queued meanwhile included, until the queue is empty or
:data:`TIME_SLICE_S` has passed:

- Work that arrives from JavaScript (a promise settled, the page called in) is drained in a
  microtask, right after the JavaScript that made it, through one proxy made once and entered
  without stack switching.
- Once Python has had :data:`TIME_SLICE_S` of such drains, or a drain ran out of its slice,
  the next drain waits for a browser task of its own, so the page's messages (Stop above all),
  timers and other tasks still get their turn while Python is busy.

Timers with a delay stay the browser's (``setTimeout``), as in ``WebLoop``. Not supported:
``pyodide.ffi.run_sync`` inside a callback (it needs a stack-switching entry; agent_py never
blocks on a promise).

Only importable inside Pyodide. The worker installs it once, before the agent runs::

    agent_py.page.loop.install()
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import time
from collections.abc import Callable
from typing import Any

from js import queueMicrotask  # type: ignore[import-not-found]
from pyodide.ffi import create_proxy  # type: ignore[import-not-found]
from pyodide.webloop import WebLoop  # type: ignore[import-not-found]
from pyodide_js._api import scheduleCallback  # type: ignore[import-not-found]

TIME_SLICE_S = 0.005
"""Longest stretch of Python callbacks without a browser task in between (the page's
messages wait that long at most while Python is busy)."""


class BatchedWebLoop(WebLoop):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self._ready: collections.deque[asyncio.Handle] = collections.deque()
        self._drain_pending = False
        self._since_task_s = 0.0  # Python's time in microtask drains since a drain in a task
        # Made once and kept for the loop's life: a proxy per drain costs more than the drain.
        self._drain_in_microtask = create_proxy(self._drain)
        self._drain_in_task = create_proxy(self._drain_after_task)
        self.drains = 0
        """Runs of the ready queue so far (the worker reports them per run)."""
        self.browser_tasks = 0
        """Those that waited for a browser task of their own (the tests read it)."""

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
        if self._since_task_s < TIME_SLICE_S:
            queueMicrotask(self._drain_in_microtask)
        else:
            scheduleCallback(self._drain_in_task, 0)

    def _drain_after_task(self) -> None:
        self.browser_tasks += 1
        self._since_task_s = 0.0
        self._drain()

    def _drain(self) -> None:
        self.drains += 1
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
            self._since_task_s += time.perf_counter() - started
            # Left over (the slice ran out, or a callback raised SystemExit): the next drain,
            # in a browser task of its own when the slice ran out.
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


def drains() -> int | None:
    """Runs of the ready queue so far, or None when the running loop is not a
    :class:`BatchedWebLoop` (the worker reports the difference over each run)."""
    loop = asyncio.get_event_loop()
    return loop.drains if isinstance(loop, BatchedWebLoop) else None
