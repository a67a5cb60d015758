"""The recorder's line cutter (addon/mcp_layers_stdio.py `Lines`): copies in, lines out,
a cap on what is kept of a long line, and a fresh start after a dropped copy."""

from __future__ import annotations

from mcp_layers_stdio import Lines, parse


def feed_all(lines: Lines, *chunks: bytes) -> list[tuple[bytes, int]]:
    out: list[tuple[bytes, int]] = []
    offset = 0
    for chunk in chunks:
        out += lines.feed(offset, chunk)
        offset += len(chunk)
    return out


def test_lines_across_copies_and_empty_lines() -> None:
    got = feed_all(Lines(100), b'{"a":', b"1}\n\nx", b"y\nz")
    assert got == [(b'{"a":1}', 7), (b"", 0), (b"xy", 2)]


def test_a_line_over_the_cap_keeps_its_start_and_its_size() -> None:
    head = b'{"jsonrpc":"2.0","id":7,'
    big = head + b"x" * 10_000
    got = feed_all(Lines(5_000), big[:3_000], big[3_000:8_000], big[8_000:] + b"\n", b"ok\n")
    (line, size), after = got
    assert size == len(big) and line.startswith(head) and len(line) < size
    assert after == (b"ok", 2)
    # Whole in one copy, too.
    (line, size), _ = feed_all(Lines(5_000), big + b"\nok\n")
    assert size == len(big) and line.startswith(head) and len(line) <= 5_000


def test_after_a_dropped_copy_the_broken_line_is_skipped() -> None:
    lines = Lines(100)
    assert lines.feed(0, b"one\ntw") == [(b"one", 3)]
    # The copy of bytes 6..9 was dropped: "two" can never be whole.
    assert lines.feed(10, b"o-rest\nthree\n") == [(b"three", 5)]


def test_options_and_the_command() -> None:
    o = parse(["--record-dir", "d", "--name=n", "--fault", "drop", "--", "cmd", "--x"])
    assert (o.record_dir, o.name, o.fault_rules, o.command) == ("d", "n", ["drop"], ["cmd", "--x"])
    assert parse(["npx", "-y", "server"]).command == ["npx", "-y", "server"]


def test_the_fault_pumps_splitter() -> None:
    from mcp_layers_stdio import Splitter

    s = Splitter()
    assert s.lines(b'{"a"') == [] and s.lines(b":1}") == []
    assert s.lines(b"\n\nb\nc") == [b'{"a":1}', b"", b"b"]
    assert s.rest() == b"c"
    big = b"x" * 100_000
    for i in range(0, len(big), 1000):
        assert s.lines(big[i : i + 1000]) == []
    assert s.lines(b"\n") == [b"c" + big] and s.rest() == b"" and not s.parts
