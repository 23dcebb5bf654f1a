"""The incremental SSE decoder."""

from __future__ import annotations

import pytest

from agent_py.mcp import MCPProtocolError
from agent_py.mcp.sse import SSEDecoder, SSEEvent

STREAM = (
    "\ufeff: keep-alive comment\r\n"
    "\r\n"
    "id: 1\r\n"
    "data: first line\r\n"
    "data:second line\r\n"
    "data:  two spaces keep one\r\n"
    "\r\n"
    "event: custom\n"
    "data: caf\u00e9 \U0001f600\n"
    "\n"
    "retry: 2500\r"
    "id: 2\r"
    "field-without-colon\r"
    "data\r"
    "\r"
    "id: only an id, no data\n"
    "\n"
).encode()

EXPECTED = [
    SSEEvent(event="message", data="first line\nsecond line\n two spaces keep one", id="1"),
    SSEEvent(event="custom", data="caf\u00e9 \U0001f600", id="1"),
    SSEEvent(event="message", data="", id="2"),
]


def decode(chunks: list[bytes]) -> tuple[list[SSEEvent], SSEDecoder]:
    decoder = SSEDecoder()
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return events + decoder.finish(), decoder


def test_a_stream_decodes_to_the_same_events_however_it_is_split() -> None:
    whole, decoder = decode([STREAM])
    assert whole == EXPECTED
    assert decoder.last_event_id == "only an id, no data"
    assert decoder.retry_ms == 2500
    assert not decoder.ended_mid_event
    for cut in range(1, len(STREAM)):
        assert decode([STREAM[:cut], STREAM[cut:]])[0] == EXPECTED, cut
    assert decode([STREAM[i : i + 1] for i in range(len(STREAM))])[0] == EXPECTED


def test_an_id_with_nul_and_a_retry_that_is_not_a_number_are_ignored() -> None:
    events, decoder = decode([b"id: 7\n\nid: a\0b\nretry: soon\ndata: x\n\n"])
    assert events == [SSEEvent(event="message", data="x", id="7")]
    assert decoder.retry_ms is None


def test_a_stream_that_stops_inside_an_event_drops_it_and_says_so() -> None:
    events, decoder = decode([b"data: complete\n\ndata: cut of"])
    assert [event.data for event in events] == ["complete"]
    assert decoder.ended_mid_event
    events, decoder = decode([b"data: complete\n\ndata: cut off\n"])
    assert [event.data for event in events] == ["complete"]
    assert decoder.ended_mid_event


def test_an_event_larger_than_the_limit_is_refused() -> None:
    decoder = SSEDecoder(max_event_bytes=1024)
    with pytest.raises(MCPProtocolError, match="larger than 1 KB"):
        for _ in range(20):
            decoder.feed(b"data: " + b"x" * 100 + b"\n")
    decoder = SSEDecoder(max_event_bytes=1024)
    with pytest.raises(MCPProtocolError, match="larger than 1 KB"):
        decoder.feed(b"data: " + b"x" * 2000)


def test_a_resumed_decoder_keeps_the_event_id_and_retry_only() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"id: 9\nretry: 10\ndata: half")
    resumed = decoder.resumed()
    assert (resumed.last_event_id, resumed.retry_ms) == ("9", 10)
    assert resumed.feed(b"data: fresh\n\n") == [SSEEvent(event="message", data="fresh", id="9")]
