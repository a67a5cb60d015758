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


def test_a_recorder_far_behind_never_holds_the_bytes_back() -> None:
    """A recorder that reads nothing: copies fill the socket, then the backlog; past it
    the pump moves the bytes without copies (splice where the system has it), and every
    byte still arrives, in order."""
    import os
    import socket
    import threading

    from mcp_layers_stdio import BACKLOG_BYTES, Copier, pump

    data = b"".join(b'{"jsonrpc":"2.0","id":%d}\n' % i for i in range(1_500_000))
    assert len(data) > 2 * BACKLOG_BYTES
    src_r, src_w = os.pipe()
    dst_r, dst_w = os.pipe()
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    copier = Copier(mine, b"s")
    ended: list[bool] = []

    def writer() -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(src_w, view[: 1 << 16]) :]
        os.close(src_w)

    def on_end(broke: bool) -> None:
        ended.append(broke)
        os.close(dst_w)

    feeding = threading.Thread(target=writer)
    pumping = threading.Thread(target=pump, args=(src_r, dst_w, copier, on_end))
    feeding.start()
    pumping.start()
    got = bytearray()
    while chunk := os.read(dst_r, 1 << 20):
        got += chunk
        if len(got) == len(data):
            theirs.close()  # the recorder goes away: the last flush must not wait for it
    feeding.join()
    pumping.join(timeout=30)
    assert bytes(got) == data and ended == [False]
    assert copier.dropped_lines or copier.skipped_bytes
    if hasattr(os, "splice"):
        assert copier.skipped_bytes > 0
    for fd in (src_r, dst_r):
        os.close(fd)
    mine.close()


def test_the_last_flush_gives_up_on_a_recorder_that_stopped_reading() -> None:
    import socket
    import time

    from mcp_layers_stdio import Copier

    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    copier = Copier(mine, b"s")
    line = b'{"jsonrpc":"2.0","method":"x"}\n' * 2000
    for _ in range(200):  # far more than the socket holds: the rest waits in the backlog
        copier.copy(line, 0.0)
    assert copier.backlog
    t0 = time.monotonic()
    copier.drain(timeout=0.3)  # `theirs` is open and never read
    assert time.monotonic() - t0 < 5
    assert not copier.backlog and copier.dropped_lines > 0
    mine.close()
    theirs.close()


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
