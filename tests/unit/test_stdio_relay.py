"""The wrapper's byte path (addon/mcp_layers_stdio.py `relay`, `SplicePump`, `pump`, `Feed`):
every byte passed on and copied to the recorder's pipe, in order, both in the kernel
(splice and tee) and by read and write; a recorder behind slows the bytes down but loses
none, a recorder gone never stops them, and an end that cannot be spliced falls back."""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import mcp_layers_stdio as w
import pytest

TEE = w.load_tee()
PATHS = [
    "read-write",
    pytest.param("splice", marks=pytest.mark.skipif(TEE is None, reason="no tee(2)")),
]

DATA = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"x"}\n' % i for i in range(200_000))


def feeder(fd: int, data: bytes, piece: int = 1 << 16) -> threading.Thread:
    def run() -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view[:piece]) :]
        os.close(fd)

    t = threading.Thread(target=run)
    t.start()
    return t


def collector(fd: int, into: list[tuple[bytes, int, bytes]], slow: float = 0.0) -> threading.Thread:
    """The recorder's side of the feed: its frames, in order (`slow` s per frame)."""

    def run() -> None:
        for kind, offset, _ts, data in w.frames(fd):
            into.append((kind, offset, data))
            time.sleep(slow)

    t = threading.Thread(target=run)
    t.start()
    return t


def read_all(fd: int) -> bytes:
    got = bytearray()
    while chunk := os.read(fd, 1 << 20):
        got += chunk
    os.close(fd)
    return bytes(got)


def start_relay(
    path: str, src: int, dst: int, copier: w.Copier, ended: list[bool]
) -> threading.Thread:
    def on_end(broke: bool) -> None:
        ended.append(broke)
        os.close(dst)

    tee = TEE if path == "splice" else None
    t = threading.Thread(target=w.relay, args=(src, dst, copier, tee, on_end))
    t.start()
    return t


Start = Callable[[int, int, w.Copier, list[bool]], threading.Thread]


def relay_data(start: Start, src_r: int, src_w: int, slow: float = 0.0) -> list[bytes]:
    """DATA through the relay `start` makes from `src_r` to a pipe, with a recorder that
    takes `slow` s per frame: the bytes must all arrive and the relay end without a
    broken pipe; the recorder's copies, in order, are returned with their offsets."""
    dst_r, dst_w = os.pipe()
    feed_r, feed_w = os.pipe()
    feed = w.Feed(feed_w)
    frames: list[tuple[bytes, int, bytes]] = []
    recorder = collector(feed_r, frames, slow)
    ended: list[bool] = []
    fed = feeder(src_w, DATA)
    relaying = start(src_r, dst_w, w.Copier(feed, b"s"), ended)
    assert read_all(dst_r) == DATA
    fed.join()
    relaying.join(30)
    feed.close()
    recorder.join(30)
    assert ended == [False]
    os.close(src_r)
    offsets = [o for _, o, _ in frames]
    assert offsets == sorted(offsets)
    return [d for _, _, d in frames]


def by(path: str) -> Start:
    return lambda src, dst, copier, ended: start_relay(path, src, dst, copier, ended)


@pytest.mark.parametrize("path", PATHS)
def test_a_recorder_behind_slows_the_bytes_but_loses_none(path: str) -> None:
    src_r, src_w = os.pipe()
    copies = relay_data(by(path), src_r, src_w, slow=0.002)  # far slower than the bytes
    assert b"".join(copies) == DATA  # every byte, in order


@pytest.mark.parametrize("path", PATHS)
def test_a_recorder_that_is_gone_never_stops_the_bytes(path: str) -> None:
    src_r, src_w = os.pipe()
    dst_r, dst_w = os.pipe()
    feed_r, feed_w = os.pipe()
    os.close(feed_r)  # the recorder died
    feed = w.Feed(feed_w)
    ended: list[bool] = []
    fed = feeder(src_w, DATA)
    relaying = start_relay(path, src_r, dst_w, w.Copier(feed, b"c"), ended)
    assert read_all(dst_r) == DATA
    fed.join()
    relaying.join(30)
    assert ended == [False] and not feed.open
    os.close(src_r)


@pytest.mark.parametrize("path", PATHS)
def test_the_recorder_sees_each_line_before_the_reaction_to_it(path: str) -> None:
    """A `tools/list` answer and the `tools/call` the client sends on reading it: the
    copy of a chunk is in the recorder's pipe before the chunk is written on, and both
    directions share that pipe, so the recorder can never get the reaction first."""
    up_src_r, up_src_w = os.pipe()  # the client's writes
    up_dst_r, up_dst_w = os.pipe()  # the server's stdin
    down_src_r, down_src_w = os.pipe()  # the server's stdout
    down_dst_r, down_dst_w = os.pipe()  # what the client reads
    feed_r, feed_w = os.pipe()
    feed = w.Feed(feed_w)
    frames: list[tuple[bytes, int, bytes]] = []
    recorder = collector(feed_r, frames)
    n = 500

    def server() -> None:  # answers each line as soon as it has it
        for i in range(n):
            assert os.read(up_dst_r, 100) == b"q%d\n" % i
            os.write(down_src_w, b"a%d\n" % i)
        os.close(down_src_w)

    def client() -> None:  # sends the next line on each answer
        for i in range(n):
            os.write(up_src_w, b"q%d\n" % i)
            assert os.read(down_dst_r, 100) == b"a%d\n" % i
        os.close(up_src_w)

    ended: list[bool] = []
    threads = [
        start_relay(path, up_src_r, up_dst_w, w.Copier(feed, b"c"), ended),
        start_relay(path, down_src_r, down_dst_w, w.Copier(feed, b"s"), ended),
        threading.Thread(target=server),
        threading.Thread(target=client),
    ]
    for t in threads[2:]:
        t.start()
    for t in threads:
        t.join(30)
    feed.close()
    recorder.join(30)
    seen = [d for _, _, d in frames]
    expected = [x for i in range(n) for x in (b"q%d\n" % i, b"a%d\n" % i)]
    assert seen == expected
    for fd in (up_src_r, up_dst_r, down_src_r, down_dst_r):
        os.close(fd)


@pytest.mark.skipif(TEE is None, reason="no tee(2)")
def test_a_socket_source_is_spliced_too(tmp_path: Path) -> None:
    """Node starts servers with socket pairs for their stdio, not pipes."""
    a, b = socket.socketpair()
    dst_r, dst_w = os.pipe()
    feed_r, feed_w = os.pipe()
    feed = w.Feed(feed_w)
    frames: list[tuple[bytes, int, bytes]] = []
    recorder = collector(feed_r, frames)
    ended: list[bool] = []
    relaying = start_relay("splice", a.fileno(), dst_w, w.Copier(feed, b"c"), ended)

    def send() -> None:
        b.sendall(DATA)
        b.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send)
    sender.start()
    assert read_all(dst_r) == DATA
    sender.join()
    relaying.join(30)
    feed.close()
    recorder.join(30)
    assert b"".join(d for _, _, d in frames) == DATA
    a.close()
    b.close()


@pytest.mark.skipif(TEE is None, reason="no tee(2)")
def test_a_destination_that_cannot_be_spliced_is_written_to(tmp_path: Path) -> None:
    """splice(2) refuses a file opened for appending (EINVAL): what was taken is passed on
    by write, and so is the rest."""
    out = tmp_path / "out"
    dst = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    src_r, src_w = os.pipe()
    feed_r, feed_w = os.pipe()
    feed = w.Feed(feed_w)
    frames: list[tuple[bytes, int, bytes]] = []
    recorder = collector(feed_r, frames)
    ended: list[bool] = []
    fed = feeder(src_w, DATA)
    start_relay("splice", src_r, dst, w.Copier(feed, b"s"), ended).join(30)
    fed.join()
    feed.close()
    recorder.join(30)
    assert out.read_bytes() == DATA and ended == [False]
    assert b"".join(d for _, _, d in frames) == DATA
    os.close(src_r)


@pytest.fixture
def src_refuses_splice(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], None]]:
    """os.splice as on a source it cannot read (EINVAL), for the fds named."""
    refused: set[int] = set()
    real = os.splice

    def splice(src: int, dst: int, n: int, *args: object) -> int:
        if src in refused:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        return real(src, dst, n, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "splice", splice)
    yield refused.add


@pytest.mark.skipif(TEE is None, reason="no tee(2)")
def test_a_source_that_cannot_be_spliced_is_read(
    src_refuses_splice: Callable[[int], None],
) -> None:
    src_r, src_w = os.pipe()
    src_refuses_splice(src_r)
    assert b"".join(relay_data(by("splice"), src_r, src_w)) == DATA


@pytest.mark.parametrize("path", PATHS)
def test_a_reader_gone_is_a_broken_pipe(path: str) -> None:
    src_r, src_w = os.pipe()
    dst_r, dst_w = os.pipe()
    os.close(dst_r)
    feed = w.Feed(os.open(os.devnull, os.O_WRONLY))
    ended: list[bool] = []
    os.write(src_w, b"line\n")
    start_relay(path, src_r, dst_w, w.Copier(feed, b"s"), ended).join(30)
    assert ended == [True]
    for fd in (src_r, src_w):
        os.close(fd)
    feed.close()


@pytest.mark.skipif(TEE is None, reason="no tee(2)")
@pytest.mark.parametrize("fails", ["returns 0", "raises"])
def test_a_tee_that_fails_falls_back_to_reading(fails: str) -> None:
    def tee(_src: int, _dst: int, _n: int) -> int:
        if fails == "raises":
            raise OSError(errno.EINVAL, "no")
        return 0

    def start(src: int, dst: int, copier: w.Copier, ended: list[bool]) -> threading.Thread:
        def on_end(broke: bool) -> None:
            ended.append(broke)
            os.close(dst)

        t = threading.Thread(target=w.SplicePump(src, dst, copier, tee).run, args=(on_end,))
        t.start()
        return t

    src_r, src_w = os.pipe()
    assert b"".join(relay_data(start, src_r, src_w)) == DATA


@pytest.mark.parametrize("path", PATHS)
def test_non_blocking_ends_are_waited_for_not_taken_for_an_end(path: str) -> None:
    src_r, src_w = os.pipe()
    dst_r, dst_w = os.pipe()
    os.set_blocking(src_r, False)
    os.set_blocking(dst_w, False)
    feed_r, feed_w = os.pipe()
    feed = w.Feed(feed_w)
    frames: list[tuple[bytes, int, bytes]] = []
    recorder = collector(feed_r, frames)
    ended: list[bool] = []
    relaying = start_relay(path, src_r, dst_w, w.Copier(feed, b"s"), ended)
    time.sleep(0.2)  # nothing to read yet: EAGAIN, which is no end
    fed = feeder(src_w, DATA)
    time.sleep(0.2)  # the reader is slow: the non-blocking writes fill its pipe
    assert read_all(dst_r) == DATA
    fed.join()
    relaying.join(30)
    feed.close()
    recorder.join(30)
    assert ended == [False] and b"".join(d for _, _, d in frames) == DATA
    os.close(src_r)
