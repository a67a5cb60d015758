"""The incremental SSE parser: WHATWG semantics, split invariance, the size cap, real streams.

Every input is checked three ways: against hand-written expectations, against a
whole-input reference model written independently below, and against itself cut into
chunks at every possible point (the result must not depend on where chunks end).
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_layers_core import limits
from mcp_layers_core.sse import SseAnomaly, SseBlockEnd, SseEvent, SseParser

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sse"
BOM = b"\xef\xbb\xbf"
Out = list[SseEvent | SseAnomaly]


def ev(
    data: str = "",
    event: str = "message",
    id: str | None = None,
    retry: int | None = None,
    has_data: bool = True,
) -> SseEvent:
    return SseEvent(event=event, data=data, id=id, retry=retry, has_data=has_data)


def over(n: int) -> SseAnomaly:
    return SseAnomaly("event_over_cap", n)


def unterminated(n: int) -> SseAnomaly:
    return SseAnomaly("unterminated_event", n)


def parse(chunks: list[bytes], cap: int = limits.MAX_EVENT_BYTES) -> Out:
    """Feed the chunks, then end the stream; everything returned, in order."""
    p = SseParser(cap)
    out: Out = []
    for c in chunks:
        out += p.feed(c)
    out += p.end()
    return out


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def assert_split_invariant(data: bytes, cap: int = limits.MAX_EVENT_BYTES) -> Out:
    """Whole, byte by byte and at every single split point: the same result."""
    whole = parse([data], cap)
    assert parse([data[i : i + 1] for i in range(len(data))], cap) == whole
    for i in range(len(data) + 1):
        assert parse([data[:i], data[i:]], cap) == whole, f"split at {i}"
    return whole


# -- an independent whole-input reference model -----------------------------------------

_REF_LINE = re.compile(rb"([^\r\n]*)(\r\n|\r|\n)")


def reference(stream: bytes, cap: int = limits.MAX_EVENT_BYTES) -> Out:
    """The same rules, written the obvious way: whole input, a regex over lines."""
    if stream.startswith(BOM):
        stream = stream[3:]
    out: Out = []
    last_id: str | None = None
    data: list[bytes] = []
    event = b""
    retry: int | None = None
    dispatch = seen = dropping = False
    size = 0  # the block's bytes

    def held() -> int:
        return sum(len(d) + 1 for d in data) + len(event)

    pos = 0
    for m in _REF_LINE.finditer(stream):
        line, eol = m.group(1), m.group(2)
        pos = m.end()
        if line == b"":
            if dropping:
                out.append(over(size))
            elif dispatch:
                out.append(
                    ev(
                        b"\n".join(data).decode("utf-8", "replace"),
                        event.decode("utf-8", "replace") or "message",
                        last_id,
                        retry,
                        bool(data),
                    )
                )
            data, event, retry, size = [], b"", None, 0
            dispatch = seen = dropping = False
            continue
        size += len(line) + len(eol)
        if dropping:
            continue
        if held() + len(line) > cap:
            dropping = True
            data, event, retry, dispatch = [], b"", None, False
            continue
        if line.startswith(b":"):
            continue
        seen = True
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            data.append(value)
            dispatch = True
        elif name == b"event":
            event = value
            dispatch = True
        elif name == b"id" and b"\0" not in value:
            last_id = value.decode("utf-8", "replace")
            dispatch = True
        elif name == b"retry" and re.fullmatch(rb"[0-9]+", value):
            significant = value.lstrip(b"0")
            if len(significant) <= 18:  # longer (absurd) values are ignored
                retry = int(significant or b"0")
                dispatch = True
    rest = stream[pos:]
    if dropping or (rest and held() + len(rest) > cap):
        out.append(over(size + len(rest)))
    elif seen or rest:
        out.append(unterminated(size + len(rest)))
    return out


# -- hand-written cases ---------------------------------------------------------------------

X20 = b"x" * 20
CASES: dict[str, tuple[bytes, Out]] = {
    # line ends
    "lf": (b"data: a\n\n", [ev("a")]),
    "crlf": (b"data: a\r\n\r\n", [ev("a")]),
    "cr": (b"data: a\r\r", [ev("a")]),
    "mixed": (b"data: a\rdata: b\r\ndata: c\n\r\n", [ev("a\nb\nc")]),
    "crlf_then_cr": (b"data: a\r\n\r\ndata: b\r\r", [ev("a"), ev("b")]),
    "lf_cr_is_two_line_ends": (b"data: a\n\rdata: b\n\n", [ev("a"), ev("b")]),
    "cr_cr_lf": (b"data: a\r\r\ndata: b\r\n\r\n", [ev("a"), ev("b")]),
    "three_events_one_chunk": (
        b"data: 1\n\ndata: 2\n\ndata: 3\n\n",
        [ev("1"), ev("2"), ev("3")],
    ),
    "extra_blank_lines_dispatch_nothing": (b"\n\ndata: a\n\n\n\r\n\r", [ev("a")]),
    "unicode_line_separators_are_data": (
        "data: a\u2028b\x85c\x0bd\x0ce\x1cf\n\n".encode(),
        [ev("a\u2028b\x85c\x0bd\x0ce\x1cf")],
    ),
    # comments
    "comment_lines": (b": hello\ndata: a\n: mid\n\n", [ev("a")]),
    "comment_only_block": (b": keepalive\n\n:\n\n", []),
    "complete_comment_at_end_is_not_an_event": (b"data: a\n\n: ping\n", [ev("a")]),
    # data
    "multi_line_data": (b"data: a\ndata: b\ndata:\ndata: c\n\n", [ev("a\nb\n\nc")]),
    "trailing_empty_data_line": (b"data: a\ndata\n\n", [ev("a\n")]),
    "data_no_colon": (b"data\n\n", [ev("")]),
    "data_colon": (b"data:\n\n", [ev("")]),
    "data_colon_space": (b"data: \n\n", [ev("")]),
    "data_no_space": (b"data:x\n\n", [ev("x")]),
    "only_one_space_removed": (b"data:  x \n\n", [ev(" x ")]),
    "tab_is_not_removed": (b"data:\tx\n\n", [ev("\tx")]),
    "colons_in_value": (b"data: a:b: c\n\n", [ev("a:b: c")]),
    "nul_in_data": (b"data: a\x00b\n\n", [ev("a\x00b")]),
    # event
    "event_field": (b"event: ping\ndata: 1\n\n", [ev("1", event="ping")]),
    "event_last_wins": (b"event: a\nevent: b\ndata\n\n", [ev("", event="b")]),
    "empty_event_is_message": (b"event: a\nevent\ndata: 1\n\n", [ev("1")]),
    "event_resets_per_block": (
        b"event: a\ndata: 1\n\ndata: 2\n\n",
        [ev("1", event="a"), ev("2")],
    ),
    "event_only_block": (b"event: x\n\n", [ev("", event="x", has_data=False)]),
    # id
    "id_persists": (b"id: 7\ndata: x\n\ndata: y\n\n", [ev("x", id="7"), ev("y", id="7")]),
    "empty_id_resets_to_empty": (
        b"id: 7\ndata: x\n\nid\ndata: y\n\n",
        [ev("x", id="7"), ev("y", id="")],
    ),
    "id_with_nul_ignored": (
        b"id: 1\n\nid: a\x00b\ndata: x\n\n",
        [ev(id="1", has_data=False), ev("x", id="1")],
    ),
    "block_with_only_invalid_id_dispatches_nothing": (b"id: \x00\n\n", []),
    "id_only_block": (b"id: 42\n\n", [ev(id="42", has_data=False)]),
    "priming_event": (b"id: 7\ndata: \n\n", [ev("", id="7")]),
    "id_not_set_is_none": (b"data: x\n\n", [ev("x", id=None)]),
    # retry
    "retry_valid": (
        b"retry: 500\ndata: x\n\ndata: y\n\n",
        [ev("x", retry=500), ev("y")],
    ),
    "retry_only_block": (b"retry: 1000\n\n", [ev(retry=1000, has_data=False)]),
    "retry_leading_zeros": (
        b"retry: 0050\n\nretry: 0\n\n",
        [ev(retry=50, has_data=False), ev(retry=0, has_data=False)],
    ),
    "retry_invalid": (
        b"retry: 1.5\ndata: x\n\nretry: -1\ndata: y\n\nretry:\ndata: z\n\n"
        b"retry: 12a\n\nretry:  5\n\nretry: +5\n\n",
        [ev("x"), ev("y"), ev("z")],
    ),
    "retry_non_ascii_digits": ("retry: ٣\n\nretry: ３\n\n".encode(), []),
    "retry_invalid_keeps_earlier_valid": (b"retry: 5\nretry: x\n\n", [ev(retry=5, has_data=False)]),
    "retry_absurdly_long_is_ignored": (b"retry: " + b"9" * 5000 + b"\n\n", []),
    "retry_long_zeros": (b"retry: " + b"0" * 5000 + b"7\n\n", [ev(retry=7, has_data=False)]),
    # fields
    "unknown_field_ignored": (b"foo: bar\ndata: x\n\nfoo\n\n", [ev("x")]),
    "field_names_are_case_sensitive": (b"Data: x\nID: 1\n\n", []),
    "space_before_colon_is_part_of_name": (b"data : x\n\n", []),
    # BOM
    "bom": (BOM + b"data: x\n\n", [ev("x")]),
    "only_one_bom_stripped": (BOM + BOM + b"data: x\n\ndata: y\n\n", [ev("y")]),
    "bom_later_is_data": (b"data: " + BOM + b"x\n\n", [ev("\ufeffx")]),
    "bom_prefix_is_not_a_bom": (b"\xef\xbbdata: x\n\ndata: y\n\n", [ev("y")]),
    "bom_alone": (BOM, []),
    "partial_bom_at_end": (b"\xef\xbb", [unterminated(2)]),
    # UTF-8
    "invalid_utf8_replaced": (b"data: \xff\xfe ok \xe2\x82\n\n", [ev("\ufffd\ufffd ok \ufffd")]),
    "invalid_utf8_in_event_and_id": (
        b"event: \xc3\nid: \xff\ndata\n\n",
        [ev("", event="\ufffd", id="\ufffd")],
    ),
    "multibyte": ("event: é\nid: ü\ndata: ñ🎉—\n\n".encode(), [ev("ñ🎉—", event="é", id="ü")]),
    # end of stream
    "empty_stream": (b"", []),
    "blank_lines_only": (b"\n\n\r\n\r", []),
    "unterminated_field_line": (b"data: x\n", [unterminated(8)]),
    "unterminated_partial_line": (b"data: x", [unterminated(7)]),
    "unterminated_after_event": (b"data: a\n\ndata: b\n", [ev("a"), unterminated(8)]),
    "unterminated_counts_comments_in_block": (b": c\ndata: x\n", [unterminated(12)]),
    "unterminated_crlf": (b"data: x\r\n", [unterminated(9)]),
    "unterminated_cr": (b"data: x\r", [unterminated(8)]),
    "unterminated_partial_comment": (b": pi", [unterminated(4)]),
    "unterminated_unknown_field": (b"foo\n", [unterminated(4)]),
    "unterminated_id_only": (b"id: 1\n", [unterminated(6)]),
    "unterminated_after_comment_block": (b": a\n\nid", [unterminated(2)]),
}

# (input, cap, expected): the size cap, with a small cap.
CAP_CASES: dict[str, tuple[bytes, int, Out]] = {
    "at_cap_is_kept": (b"data: " + b"x" * 10 + b"\n\n", 16, [ev("x" * 10)]),
    "one_over_cap_is_dropped": (
        b"data: " + b"x" * 11 + b"\n\ndata: ok\n\n",
        16,
        [over(18), ev("ok")],
    ),
    "many_lines_cross_the_cap": (
        b"data: aaaa\ndata: bbbb\ndata: cccc\ndata: dddd\n\ndata: ok\n\n",
        16,
        [over(44), ev("ok")],
    ),
    "event_name_counts": (b"event: abcdefgh\ndata: 12345678\n\n", 16, [over(31)]),
    "crlf_counted_as_two": (
        b"data: " + X20 + b"\r\n: c\r\n\r\ndata: ok\r\n\r\n",
        16,
        [over(33), ev("ok")],
    ),
    "cr_only": (b"data: " + X20 + b"\r\rdata: ok\r\r", 16, [over(27), ev("ok")]),
    "id_before_the_cap_takes_effect": (
        b"id: 1\ndata: " + X20 + b"\n\ndata: ok\n\n",
        16,
        [over(33), ev("ok", id="1")],
    ),
    "id_after_the_cap_is_skipped": (
        b"data: " + X20 + b"\nid: 2\n\ndata: ok\n\n",
        16,
        [over(33), ev("ok")],
    ),
    "over_cap_then_end": (b"data: " + X20, 16, [over(26)]),
    "over_cap_line_then_end": (b"data: ok\n\ndata: " + X20 + b"\n", 16, [ev("ok"), over(27)]),
    # the cap counts the line being read, whatever it is: its whole block goes
    "huge_comment_drops_its_block": (b": " + X20 + b"\ndata: ok\n\n", 16, [over(32)]),
    "previous_events_unaffected": (
        b"data: a\n\ndata: " + X20 + b"\n\ndata: b\n\n",
        16,
        [ev("a"), over(27), ev("b")],
    ),
}


@pytest.mark.parametrize(("data", "expected"), CASES.values(), ids=CASES.keys())
def test_case(data: bytes, expected: Out) -> None:
    assert parse([data]) == expected


@pytest.mark.parametrize(("data", "expected"), CASES.values(), ids=CASES.keys())
def test_case_split_invariance_and_reference(data: bytes, expected: Out) -> None:
    assert assert_split_invariant(data) == expected
    assert reference(data) == expected


@pytest.mark.parametrize(("data", "cap", "expected"), CAP_CASES.values(), ids=CAP_CASES.keys())
def test_cap_case(data: bytes, cap: int, expected: Out) -> None:
    assert parse([data], cap) == expected
    assert assert_split_invariant(data, cap) == expected
    assert reference(data, cap) == expected


# -- behaviour around the calls ----------------------------------------------------------


def test_events_come_out_of_the_chunk_that_completes_them() -> None:
    p = SseParser()
    assert p.feed(b"event: message\ndata: {") == []
    assert p.feed(b'"a": 1}\n') == []
    assert p.feed(b"\ndata: 2\n\ndata: 3") == [ev('{"a": 1}'), ev("2")]
    assert p.feed(b"\n\n") == [ev("3")]
    assert p.end() == []


def test_empty_chunks_are_no_ops() -> None:
    data = b"id: 1\r\ndata: a\r\n\r\n"
    chunks: list[bytes] = []
    for i in range(len(data)):
        chunks += [b"", data[i : i + 1], b""]
    assert parse(chunks) == parse([data]) == [ev("a", id="1")]
    # an empty chunk between a CR and its LF does not break the CRLF
    assert parse([b"data: a\r", b"", b"\n", b"", b"\r", b"", b"\n"]) == [ev("a")]


def test_split_bom() -> None:
    assert parse([b"\xef", b"\xbb", b"\xbf", b"data: x\n\n"]) == [ev("x")]
    assert parse([b"\xef", b"", b"\xbb\xbfdata: x\n\n"]) == [ev("x")]
    assert parse([b"\xef\xbb", b"data: x\n\ndata: y\n\n"]) == [ev("y")]


def test_end_is_not_feed_of_nothing() -> None:
    p = SseParser()
    assert p.feed(b"data: x\n") == []
    assert p.feed(b"") == []  # not the end: the event is still pending
    assert p.feed(b"\n") == [ev("x")]


def test_feed_after_end_returns_nothing() -> None:
    p = SseParser()
    assert p.feed(b"data: a\n\ndata: b") == [ev("a")]
    assert p.end() == [unterminated(7)]
    assert p.closed
    assert p.buffered_bytes == 0
    assert p.feed(b"\n\ndata: c\n\n") == []
    assert p.end() == []


def test_bytes_like_chunks() -> None:
    p = SseParser()
    assert p.feed(bytearray(b"data: a\n")) == []
    assert p.feed(memoryview(b"\ndata: b\n\n")) == [ev("a"), ev("b")]


def test_buffered_bytes_tracks_what_is_held() -> None:
    p = SseParser()
    assert p.buffered_bytes == 0
    p.feed(b"data: abc")
    assert p.buffered_bytes == 9  # the partial line
    p.feed(b"\n")
    assert p.buffered_bytes == 4  # "abc" and its LF
    p.feed(b"event: e\n")
    assert p.buffered_bytes == 5
    p.feed(b"\n")
    assert p.buffered_bytes == 0
    p.feed(b"\xef\xbb")
    assert p.buffered_bytes == 2  # a possible BOM


def test_id_persists_across_a_dropped_event_and_comment_blocks() -> None:
    out = parse([b"id: 1\n\n: c\n\ndata: " + b"x" * 100 + b"\n\nid: 2\n\ndata: z\n\n"], cap=32)
    assert out == [
        ev(id="1", has_data=False),
        over(107),
        ev(id="2", has_data=False),
        ev("z", id="2"),
    ]


def test_cap_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SseParser(0)


def test_default_cap_is_the_named_limit() -> None:
    big = b"data: " + b"x" * (limits.MAX_EVENT_BYTES - 6) + b"\n\n"
    assert parse([big]) == [ev("x" * (limits.MAX_EVENT_BYTES - 6))]
    assert parse([b"data: x" + big]) == [over(len(big) + 6)]


# -- the cap on a long stream --------------------------------------------------------------


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_cap_bounds_memory_inside_one_huge_event(eol: bytes) -> None:
    cap = 4096
    p = SseParser(cap)
    assert p.feed(b"data: before" + eol + eol) == [ev("before")]
    # 10x the cap inside one event: a long line, then many data lines.
    event = (
        b"id: 9" + eol + b"data: " + b"y" * (5 * cap) + eol + (b"data: " + b"z" * 94 + eol) * 512
    )
    out: Out = []
    peak = 0
    for i in range(0, len(event), 100):
        out += p.feed(event[i : i + 100])
        peak = max(peak, p.buffered_bytes)
    assert out == []
    assert peak <= cap
    assert p.buffered_bytes == 0  # nothing is held while skipping
    out = p.feed(eol + b"data: after" + eol + eol)
    assert out == [over(len(event)), ev("after", id="9")]
    assert p.end() == []


def test_cap_by_many_small_lines_and_by_one_byte_chunks() -> None:
    cap = 1000
    p = SseParser(cap)
    event = b"data\n" * 10 * cap  # each line holds 1 byte (its LF): memory grows slowly
    peak = 0
    out: Out = []
    for i in range(0, len(event), 7):
        out += p.feed(event[i : i + 7])
        peak = max(peak, p.buffered_bytes)
    assert out == [] and peak <= cap
    assert p.feed(b"\ndata: ok\n\n") == [over(len(event)), ev("ok")]

    p = SseParser(cap)
    peak = 0
    for b in b"data: " + b"q" * 10 * cap:
        assert p.feed(bytes([b])) == []
        peak = max(peak, p.buffered_bytes)
    assert peak <= cap
    assert p.end() == [over(6 + 10 * cap)]


# -- property tests ------------------------------------------------------------------------

TOKENS = [
    b"data",
    b"data:",
    b"data: ",
    b"event: ",
    b"id: ",
    b"id",
    b"retry: ",
    b"retry:",
    b"foo",
    b":",
    b" ",
    b"x",
    b"\xc3\xa9",
    b"\xf0\x9f\x8e\x89",
    b"\xff",
    b"\xe2\x82",
    b"\x00",
    b"12",
    b"0",
    b"\n",
    b"\n",
    b"\n\n",
    b"\r",
    b"\r\n",
    b"\r\n\r\n",
    BOM,
    b"\xef",
]
sse_like = st.lists(st.sampled_from(TOKENS), max_size=60).map(b"".join)
streams = st.one_of(sse_like, st.binary(max_size=200))


@st.composite
def stream_and_cuts(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    data = draw(streams)
    cuts = draw(st.lists(st.integers(0, len(data)), max_size=12))
    return data, cuts


@settings(derandomize=True, max_examples=600, deadline=None)
@given(stream_and_cuts(), st.sampled_from([limits.MAX_EVENT_BYTES, 8, 24, 64]))
def test_random_splits_match_whole_and_reference(sc: tuple[bytes, list[int]], cap: int) -> None:
    data, cuts = sc
    whole = parse([data], cap)
    assert parse(split_at(data, cuts), cap) == whole
    assert whole == reference(data, cap)


@settings(derandomize=True, max_examples=600, deadline=None)
@given(stream_and_cuts(), st.integers(1, 48))
def test_any_bytes_never_raise_and_memory_stays_bounded(
    sc: tuple[bytes, list[int]], cap: int
) -> None:
    data, cuts = sc
    p = SseParser(cap)
    for chunk in split_at(data, cuts):
        for item in p.feed(chunk):
            assert isinstance(item, SseEvent | SseAnomaly)
        assert p.buffered_bytes <= cap + 2
    for item in p.end():
        assert isinstance(item, SseAnomaly)
    assert p.buffered_bytes == 0


# -- real captures -------------------------------------------------------------------------
#
# Raw SSE bodies of real MCP servers, reconstructed from the project's reference peer
# captures (see tests/fixtures/sse/README.md). Each flow there was streamed
# chunk by chunk; every chunk held whole events ending in "\n\n".


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def jsonrpc(e: SseEvent) -> dict:
    msg = orjson.loads(e.data)
    assert msg["jsonrpc"] == "2.0"
    return msg


def test_capture_python_sdk_progress_stream() -> None:
    """mcp 2.3.0 server, tools/call with logging and progress notifications before the result."""
    events = assert_split_invariant(fixture("py-sdk2-server_tools-call-progress.sse"))
    assert all(isinstance(e, SseEvent) for e in events)
    assert [(e.event, e.id, e.retry, e.has_data) for e in events] == [
        ("message", None, None, True)
    ] * 7
    msgs = [jsonrpc(e) for e in events]
    assert [m.get("method") for m in msgs] == [
        "notifications/message",
        "notifications/progress",
    ] * 3 + [None]
    assert [m.get("id") for m in msgs] == [None] * 6 + [5]
    assert [m["params"]["progress"] for m in msgs[1:6:2]] == [1, 2, 3]
    assert msgs[-1]["result"]["isError"] is False


def test_capture_server_everything_initialize() -> None:
    """server-everything: a priming event (id, empty data), then the initialize result."""
    events = assert_split_invariant(fixture("server-everything_initialize.sse"))
    priming, result = events
    assert priming == ev("", id="05feb0cf-57d1-48a2-a1a9-51aee1ae5725")
    assert isinstance(result, SseEvent)
    assert (result.event, result.id, result.retry) == (
        "message",
        "2b59d28c-f5b3-4828-a4ff-09b4057c3aac",
        None,
    )
    msg = jsonrpc(result)
    assert msg["id"] == 0
    assert msg["result"]["serverInfo"]["name"] == "mcp-servers/everything"
    # multi-byte characters survive every split point
    assert "Everything Server \u2013 Server Instructions" in msg["result"]["instructions"]
    assert "\U0001f389 Server instructions are working!" in msg["result"]["instructions"]


def test_capture_server_everything_long_running() -> None:
    """server-everything: priming event, four progress notifications, the result."""
    events = assert_split_invariant(fixture("server-everything_long-running.sse"))
    assert all(isinstance(e, SseEvent) and e.has_data and e.retry is None for e in events)
    assert [e.id for e in events] == [
        "40e9a8ea-d108-40f8-88ed-0c55f690fe35",
        "5051a35b-bd05-44fe-a489-b3b43bc36093",
        "d3e93df3-767b-4df0-99ab-398f1cc7fe66",
        "8188a69b-da8c-4b10-82c0-0b83fd62d7c3",
        "b511fb8c-917a-437b-b9e5-52a6072363fb",
        "39b91a25-2a95-44fb-8b8e-9d3b11e22b39",
    ]
    assert events[0] == ev("", id=events[0].id)
    msgs = [jsonrpc(e) for e in events[1:]]
    assert [m.get("method") for m in msgs] == ["notifications/progress"] * 4 + [None]
    assert [m["params"]["progress"] for m in msgs[:4]] == [1, 2, 3, 4]
    assert msgs[-1]["id"] == 4
    assert "Long running operation completed" in msgs[-1]["result"]["content"][0]["text"]


def test_capture_conformance_sse_retry() -> None:
    """conformance sse-retry: the POST stream carries only a priming event with `retry`,
    then closes; the resumed GET stream repeats it and carries the result."""
    assert assert_split_invariant(fixture("conformance-sse-retry_post-closed.sse")) == [
        ev("", id="event-2", retry=500)
    ]
    priming, result = assert_split_invariant(fixture("conformance-sse-retry_get-resumed.sse"))
    assert priming == ev("", id="event-3", retry=500)
    assert isinstance(result, SseEvent)
    assert (result.event, result.id, result.retry) == ("message", "event-4", None)
    msg = jsonrpc(result)
    assert msg["id"] == 3
    assert msg["result"]["content"][0]["text"] == "Reconnection test completed successfully"


def test_captures_concatenated_keep_the_last_event_id() -> None:
    """Two real streams back to back parse as the sum of their parts, ids persisting."""
    a = fixture("conformance-sse-retry_get-resumed.sse")
    b = fixture("py-sdk2-server_tools-call-progress.sse")
    events = parse([a + b])
    assert len(events) == 2 + 7
    assert all(isinstance(e, SseEvent) and e.id == "event-4" for e in events[2:])


# -- block ends (track_ends) ---------------------------------------------------------------


def block_ends(chunks: list[bytes], cap: int = limits.MAX_EVENT_BYTES) -> list[SseBlockEnd]:
    """Feed the chunks, then end the stream; every block end reported, in order."""
    p = SseParser(cap, track_ends=True)
    ends: list[SseBlockEnd] = []
    for c in chunks:
        p.feed(c)
        ends += p.take_ends()
    p.end()
    ends += p.take_ends()
    return ends


def reference_ends(stream: bytes) -> list[int]:
    """Offsets just past each blank line, found the obvious way (whole input, a regex)."""
    skip = 3 if stream.startswith(BOM) else 0
    return [skip + m.end() for m in _REF_LINE.finditer(stream[skip:]) if m.group(1) == b""]


def test_block_ends_point_past_each_blank_line_with_what_it_dispatched() -> None:
    data = BOM + b"data: a\r\n\r\n: ping\n\nid: 7\r\rdata: " + b"x" * 40 + b"\n\n\ndata: tail"
    ends = block_ends([data], cap=16)
    assert [e.offset for e in ends] == [14, 22, 29, 77, 78] == reference_ends(data)
    assert [e.item for e in ends] == [ev("a"), None, ev("", id="7", has_data=False), over(47), None]
    assert data[:14] == BOM + b"data: a\r\n\r\n"


def test_block_ends_wait_for_the_byte_after_a_closing_cr() -> None:
    p = SseParser(track_ends=True)
    assert p.feed(b"data: a\r\r") == [ev("a")]  # the event is dispatched at once ...
    assert p.take_ends() == []  # ... but its end may still grow by the LF of a CRLF
    p.feed(b"\n")
    assert p.take_ends() == [SseBlockEnd(10, ev("a"))]
    p.feed(b"data: b\r\r")
    p.feed(b"data: c\n\n")  # not an LF: the end stays right after the CR
    assert [e.offset for e in p.take_ends()] == [19, 28]
    p.feed(b"data: d\n\r")
    assert p.take_ends() == []
    p.end()  # the stream ended: that CR was the whole line end
    assert p.take_ends() == [SseBlockEnd(37, ev("d"))]


def test_block_ends_are_off_by_default_and_cost_nothing_to_ask() -> None:
    p = SseParser()
    assert p.feed(b"data: a\n\n") == [ev("a")]
    assert p.take_ends() == []


@pytest.mark.parametrize(
    "data",
    [
        b"data: a\n\n: c\n\ndata: b\n\n",
        b"data: a\r\n\r\n: c\r\n\r\ndata: b\r\n\r\n",
        b"data: a\r\r: c\r\rdata: b\r\r",
        BOM + b"\ndata: a\r\n\r\r\n\ndata: b\n\r\n",
    ],
)
def test_block_ends_split_invariance_at_every_point(data: bytes) -> None:
    whole = block_ends([data])
    assert [e.offset for e in whole] == reference_ends(data)
    assert block_ends([data[i : i + 1] for i in range(len(data))]) == whole
    for i in range(len(data) + 1):
        assert block_ends([data[:i], data[i:]]) == whole, f"split at {i}"


@settings(derandomize=True, max_examples=600, deadline=None)
@given(stream_and_cuts(), st.sampled_from([limits.MAX_EVENT_BYTES, 8, 24, 64]))
def test_block_ends_random_splits_match_whole_and_reference(
    sc: tuple[bytes, list[int]], cap: int
) -> None:
    data, cuts = sc
    whole = block_ends([data], cap)
    assert block_ends(split_at(data, cuts), cap) == whole
    assert [e.offset for e in whole] == reference_ends(data)
    # The items are the ones `feed` returned, each at the blank line that dispatched it.
    fed = SseParser(cap).feed(data)
    assert [e.item for e in whole if e.item is not None] == fed
