"""The JSONL event history, its sinks, and the hooks users attach to a run.

Every event goes to the listener (the UI or terminal), to each sink (a file, IndexedDB in the
page) and to the matching hook. None of them can stop a run: a failing sink or hook is
logged and the run goes on.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agent_py.core.events import Event, EventType

log = logging.getLogger("agent_py")

EventListener = Callable[[Event], None]
Hook = Callable[[Event], Awaitable[None] | None]


class HistorySink(Protocol):
    def write(self, event: Event) -> None: ...


class FileSink:
    """Appends one JSON line per event; each line is flushed so a crash loses nothing."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, event: Event) -> None:
        with self.path.open("a", encoding="utf-8") as file:
            file.write(event.to_json() + "\n")


class MemorySink:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def write(self, event: Event) -> None:
        self.events.append(event)


def read_history(lines: Iterable[str]) -> list[Event]:
    """Parse JSONL history lines (blank lines are skipped)."""
    return [Event.from_json(line) for line in lines if line.strip()]


def read_history_file(path: str | Path) -> list[Event]:
    with Path(path).open(encoding="utf-8") as file:
        return read_history(file)


@dataclass
class Hooks:
    """Called with the event of the same name; exceptions are logged, never fatal.

    An async hook is awaited where its event happens (``on_action`` before the tool runs),
    for at most ``timeout_s``; one that takes longer is cancelled, logged and left behind."""

    on_turn_start: Hook | None = None
    on_action: Hook | None = None
    on_observation: Hook | None = None
    on_final: Hook | None = None
    timeout_s: float = 10.0

    def for_event(self, event_type: EventType) -> Hook | None:
        field_name = _HOOK_FIELDS.get(event_type)
        return getattr(self, field_name) if field_name else None


# Hooks by the event that calls them (every event asks, so no dict is built per event).
_HOOK_FIELDS = {
    EventType.TURN_START: "on_turn_start",
    EventType.ACTION: "on_action",
    EventType.OBSERVATION: "on_observation",
    EventType.FINAL: "on_final",
}


def new_session_id() -> str:
    return uuid.uuid4().hex[:12]


class EventRecorder:
    """Stamps events with the session, turn and time, and hands them out."""

    def __init__(
        self,
        *,
        listener: EventListener | None = None,
        sinks: Iterable[HistorySink] = (),
        hooks: Hooks | None = None,
        session: str | None = None,
    ) -> None:
        self.session = session or new_session_id()
        self.turn = 0
        self.listener = listener
        self.sinks = list(sinks)
        self.hooks = hooks or Hooks()
        self._broken_sinks: set[int] = set()
        self._pending_hooks: list[asyncio.Future[None]] = []

    def emit(
        self, type: EventType, content: str = "", *, step: str | None = None, **meta: Any
    ) -> Event:
        event = Event(
            session=self.session, turn=self.turn, step=step, type=type, content=content, meta=meta
        )
        for index, sink in enumerate(self.sinks):
            try:
                sink.write(event)
            except Exception:
                if index not in self._broken_sinks:  # say it once, keep trying
                    log.exception("history sink %r failed; the run goes on", sink)
                    self._broken_sinks.add(index)
        if self.listener is not None:
            try:
                self.listener(event)
            except Exception:
                log.exception("event listener failed on %s; the run goes on", type)
        hook = self.hooks.for_event(type)
        if hook is not None:
            try:
                result = hook(event)
                if inspect.isawaitable(result):
                    self._pending_hooks.append(asyncio.ensure_future(result))
            except Exception:
                log.exception("hook for %s failed; the run goes on", type)
        return event

    async def emit_and_wait(
        self, type: EventType, content: str = "", *, step: str | None = None, **meta: Any
    ) -> Event:
        """:meth:`emit`, then wait for the async hook it started (see :class:`Hooks`)."""
        event = self.emit(type, content, step=step, **meta)
        await self.flush_hooks()
        return event

    async def flush_hooks(self) -> None:
        """Await the async hooks started so far, each for at most ``hooks.timeout_s``,
        logging failures; one that does not finish in time is cancelled and left behind."""
        pending, self._pending_hooks = self._pending_hooks, []
        for hook in pending:
            done, _ = await asyncio.wait({hook}, timeout=self.hooks.timeout_s)
            if not done:
                hook.cancel()
                hook.add_done_callback(lambda h: h.cancelled() or h.exception())
                log.error("an async hook ran past %g s; the run goes on", self.hooks.timeout_s)
            elif not hook.cancelled() and hook.exception() is not None:
                log.error("async hook failed; the run goes on", exc_info=hook.exception())
