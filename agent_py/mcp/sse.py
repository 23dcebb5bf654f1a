"""An incremental decoder for Server-Sent Events (the WHATWG event-stream format).

Bytes go in as they arrive; complete events come out. Handles the parts of the format
real servers use: ``data`` over several lines, ``event``, ``id`` (remembered across
events, as ``Last-Event-ID`` for resuming), ``retry``, comment lines, a leading BOM, and
CRLF / LF / CR line ends split across chunks.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from agent_py.mcp.errors import MCPProtocolError
from agent_py.mcp.results import describe_size

_LINE_END = re.compile(r"\r\n|\r|\n")
_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class SSEEvent:
    event: str
    """The event type; ``message`` unless the server named another."""
    data: str
    id: str
    """The last event id seen so far in the stream ("" if none)."""


class SSEDecoder:
    """Feed it bytes with :meth:`feed`; call :meth:`finish` at the end of the stream."""

    def __init__(self, *, max_event_bytes: int = 16 * 1024 * 1024) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._max_event_chars = max_event_bytes
        self._started = False
        self._skip_lf = False
        self._partial: list[str] = []
        self._partial_chars = 0
        self._event_type = ""
        self._data: list[str] = []
        self._data_chars = 0
        self.last_event_id = ""
        self.retry_ms: int | None = None
        self.ended_mid_event = False
        """Set by :meth:`finish` when the stream stopped inside an event (it was cut off)."""

    def resumed(self) -> SSEDecoder:
        """A decoder for the stream that resumes this one: it keeps the event id and the
        retry time, nothing else."""
        decoder = SSEDecoder(max_event_bytes=self._max_event_chars)
        decoder.last_event_id, decoder.retry_ms = self.last_event_id, self.retry_ms
        return decoder

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        return self._feed_text(self._decoder.decode(chunk))

    def finish(self) -> list[SSEEvent]:
        """End of stream. An event without its closing blank line is dropped, as the
        format prescribes; ``ended_mid_event`` tells that this happened."""
        events = self._feed_text(self._decoder.decode(b"", final=True))
        self.ended_mid_event = bool(self._partial or self._data or self._event_type)
        return events

    def _feed_text(self, text: str) -> list[SSEEvent]:
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._skip_lf and text:
            text = text.removeprefix("\n")
            self._skip_lf = False
        events: list[SSEEvent] = []
        position = 0
        for match in _LINE_END.finditer(text):
            self._partial.append(text[position : match.start()])
            line = "".join(self._partial)
            self._partial.clear()
            self._partial_chars = 0
            event = self._process_line(line)
            if event is not None:
                events.append(event)
            position = match.end()
        rest = text[position:]
        if rest:
            self._partial.append(rest)
            self._partial_chars += len(rest)
            self._check_size(self._partial_chars)
        if text:
            # A CR that ended this chunk may be the first half of a CRLF.
            self._skip_lf = text.endswith("\r")
        return events

    def _process_line(self, line: str) -> SSEEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment (servers send them as keep-alives)
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._data_chars += len(value) + 1
            self._check_size(self._data_chars)
        elif name == "event":
            self._event_type = value
        elif name == "id":
            if "\0" not in value:
                self.last_event_id = value
        elif name == "retry" and _DIGITS.fullmatch(value):
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> SSEEvent | None:
        data, event_type = self._data, self._event_type
        self._data, self._data_chars, self._event_type = [], 0, ""
        if not data:
            return None
        return SSEEvent(event=event_type or "message", data="\n".join(data), id=self.last_event_id)

    def _check_size(self, chars: int) -> None:
        if chars > self._max_event_chars:
            raise MCPProtocolError(
                f"The server sent an event larger than {describe_size(self._max_event_chars)}; "
                "the answer was rejected."
            )
