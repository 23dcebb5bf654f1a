# Run by pyodide_boot_worker.js once agent_py.page.loop.install() made the batched loop the
# running one, as the page's worker does. The last expression is the JSON report:
# {name: {ok, detail, ms}}. Each check is a coroutine run on that loop.
import asyncio
import json
import time

import js
from pyodide.ffi import create_once_callable

HANG_GUARD_S = 60  # only against a hang; the checks wait for what they assert

checks = {}


async def run_check(name, check):
    started = time.perf_counter()
    try:
        checks[name] = {"ok": True, "detail": str(await asyncio.wait_for(check(), HANG_GUARD_S))}
    except Exception as error:
        checks[name] = {"ok": False, "detail": f"{type(error).__name__}: {error!r}"}
    checks[name]["ms"] = round((time.perf_counter() - started) * 1000)


async def installed():
    loop = asyncio.get_running_loop()
    if type(loop).__name__ != "BatchedWebLoop":
        raise AssertionError(f"the running loop is {type(loop).__name__}")
    return type(loop).__name__


async def fifo_order():
    # Callbacks run in the order they were queued, those queued while the queue runs included.
    loop = asyncio.get_running_loop()
    order = []
    done = loop.create_future()
    loop.call_soon(lambda: (order.append("a"), loop.call_soon(order.append, "c")))
    loop.call_soon(order.append, "b")
    loop.call_soon(lambda: loop.call_soon(done.set_result, None))
    await done
    if order != ["a", "b", "c"]:
        raise AssertionError(f"ran in the order {order}")
    return order


async def turns_share_drains():
    loop = asyncio.get_running_loop()
    turns = 2000
    before = loop.drains
    for _ in range(turns):
        await asyncio.sleep(0)
    used = loop.drains - before
    # One browser task per turn is what WebLoop does; a time slice holds many turns.
    if used > turns // 10:
        raise AssertionError(f"{turns} turns took {used} drains")
    return f"{turns} turns in {used} drains"


async def promises_settle_without_browser_tasks():
    # A settled JavaScript promise wakes Python in a microtask, not a browser task of its own.
    loop = asyncio.get_running_loop()
    awaits = 200
    before = loop.browser_tasks
    for n in range(awaits):
        if await js.Promise.resolve(n) != n:
            raise AssertionError(f"await {n} gave the wrong value")
    used = loop.browser_tasks - before
    if used > awaits // 10:
        raise AssertionError(f"{awaits} awaited promises took {used} browser tasks")
    return f"{awaits} awaited promises in {used} browser tasks"


async def keep_busy_until_a_timer_fires(wait):
    # Python that never waits for a browser task (its own turns, promises that settle at
    # once) still lets the browser run its tasks (a message from the page, a timer) between
    # time slices.
    fired = []
    js.setTimeout(create_once_callable(lambda: fired.append(True)), 0)
    turns, started = 0, time.perf_counter()
    while not fired:
        await wait()
        turns += 1
        if time.perf_counter() - started > HANG_GUARD_S:  # the guard's timer could not fire
            raise AssertionError(f"no browser task ran during {turns} busy turns")
    return f"a browser timer ran after {turns} busy turns"


async def yields_to_the_browser():
    return await keep_busy_until_a_timer_fires(lambda: asyncio.sleep(0))


async def promise_chain_yields_to_the_browser():
    return await keep_busy_until_a_timer_fires(lambda: js.Promise.resolve(0))


async def failing_callback_is_reported():
    loop = asyncio.get_running_loop()
    reported = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context["exception"]))
    try:
        after = loop.create_future()

        def fail():
            raise ValueError("from a callback")

        loop.call_soon(fail)
        loop.call_soon(after.set_result, "the next callback ran")
        result = await after
    finally:
        loop.set_exception_handler(previous)
    if [str(e) for e in reported] != ["from a callback"]:
        raise AssertionError(f"the loop's handler got {reported!r}")
    return result


async def cancelled_callback_is_skipped():
    loop = asyncio.get_running_loop()
    ran = []
    loop.call_soon(ran.append, "cancelled").cancel()
    done = loop.create_future()
    loop.call_soon(done.set_result, None)
    await done
    if ran:
        raise AssertionError("a cancelled callback ran")
    return "skipped"


async def timers_and_promises():
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.sleep(0.02)  # a browser timer
    slept = loop.time() - started
    value = await js.Promise.resolve(42)  # a JavaScript promise
    if slept < 0.015 or value != 42:
        raise AssertionError(f"slept {slept:.3f} s, the promise gave {value!r}")
    return f"slept {slept * 1000:.0f} ms; a promise gave {value}"


for name, check in [
    ("loop installed", installed),
    ("loop: FIFO order", fifo_order),
    ("loop: turns share drains", turns_share_drains),
    ("loop: promises settle without browser tasks", promises_settle_without_browser_tasks),
    ("loop: yields to the browser", yields_to_the_browser),
    ("loop: promise chain yields to the browser", promise_chain_yields_to_the_browser),
    ("loop: failing callback reported", failing_callback_is_reported),
    ("loop: cancelled callback skipped", cancelled_callback_is_skipped),
    ("loop: timers and promises", timers_and_promises),
]:
    await run_check(name, check)  # runPythonAsync allows a top-level await

json.dumps(checks)
