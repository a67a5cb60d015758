"""The wrapper's byte path (addon/mcp_layers_stdio.py `relay`, `SplicePump`, `pump`, `Feed`,
`frames`): every byte passed on and copied to the recorder's spool, in order, both in the
kernel (splice and tee) and by read and write; a recorder behind never holds the bytes
back and loses none, a recorder gone never stops them, and an end that cannot be spliced
falls back."""

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


class Spooled:
    """A spool in `directory` with both its ends in this process: the pumps' `feed`, and
    a recorder thread that collects the frames, in order (`slow` s per frame)."""

    def __init__(self, directory: Path, slow: float = 0.0) -> None:
        spool = w.Spool(str(directory))
        self.feed = w.Feed(spool.fd, spool.wake_w)
        self.frames: list[tuple[bytes, int, bytes]] = []
        self.wake_r = spool.wake_r
        reader = w.frames(os.dup(spool.fd), spool.wake_r)

        def run() -> None:
            for kind, offset, _ts, data in reader:
                self.frames.append((kind, offset, data))
                time.sleep(slow)

        self.recorder = threading.Thread(target=run)
        self.recorder.start()

    def close(self) -> list[tuple[bytes, int, bytes]]:
        """The last frame is written: what the recorder read, when it is through."""
        self.feed.close()
        self.recorder.join(60)
        assert not self.recorder.is_alive()
        return self.frames


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


def relay_data(
    start: Start, src_r: int, src_w: int, spool: Path, slow: float = 0.0
) -> tuple[list[bytes], int]:
    """DATA through the relay `start` makes from `src_r` to a pipe, with a recorder that
    takes `slow` s per frame: the bytes must all arrive and the relay end without a
    broken pipe. Returns the recorder's copies, in order, and how many of them it had
    read when the last byte arrived."""
    dst_r, dst_w = os.pipe()
    spooled = Spooled(spool, slow)
    ended: list[bool] = []
    fed = feeder(src_w, DATA)
    relaying = start(src_r, dst_w, w.Copier(spooled.feed, b"s"), ended)
    assert read_all(dst_r) == DATA
    read_by_then = len(spooled.frames)
    fed.join()
    relaying.join(30)
    frames = spooled.close()
    assert ended == [False]
    os.close(src_r)
    offsets = [o for _, o, _ in frames]
    assert offsets == sorted(offsets)
    return [d for _, _, d in frames], read_by_then


def by(path: str) -> Start:
    return lambda src, dst, copier, ended: start_relay(path, src, dst, copier, ended)


@pytest.mark.parametrize("path", PATHS)
def test_a_recorder_behind_never_holds_the_bytes_back_and_loses_none(
    path: str, tmp_path: Path
) -> None:
    src_r, src_w = os.pipe()
    # The recorder takes 20 ms a frame: far slower than the bytes.
    copies, read_by_then = relay_data(by(path), src_r, src_w, tmp_path, slow=0.02)
    assert b"".join(copies) == DATA  # every byte, in order
    # All the bytes were through while the recorder was still reading: it was behind and
    # they did not wait for it (a recorder's pipe would have held them back).
    assert read_by_then < len(copies) // 2, (read_by_then, len(copies))


@pytest.mark.parametrize("path", PATHS)
def test_a_recorder_that_is_gone_never_stops_the_bytes(path: str, tmp_path: Path) -> None:
    src_r, src_w = os.pipe()
    dst_r, dst_w = os.pipe()
    spool = w.Spool(str(tmp_path))
    os.close(spool.wake_r)  # the recorder died
    feed = w.Feed(spool.fd, spool.wake_w)
    ended: list[bool] = []
    fed = feeder(src_w, DATA)
    relaying = start_relay(path, src_r, dst_w, w.Copier(feed, b"c"), ended)
    assert read_all(dst_r) == DATA
    fed.join()
    relaying.join(30)
    assert ended == [False] and not feed.open
    os.close(src_r)


@pytest.mark.parametrize("path", PATHS)
def test_the_recorder_sees_each_line_before_the_reaction_to_it(path: str, tmp_path: Path) -> None:
    """A `tools/list` answer and the `tools/call` the client sends on reading it: the
    copy of a chunk is in the spool before the chunk is written on, and both directions
    share that spool, so the recorder can never get the reaction first."""
    up_src_r, up_src_w = os.pipe()  # the client's writes
    up_dst_r, up_dst_w = os.pipe()  # the server's stdin
    down_src_r, down_src_w = os.pipe()  # the server's stdout
    down_dst_r, down_dst_w = os.pipe()  # what the client reads
    spooled = Spooled(tmp_path)
    feed = spooled.feed
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
    seen = [d for _, _, d in spooled.close()]
    expected = [x for i in range(n) for x in (b"q%d\n" % i, b"a%d\n" % i)]
    assert seen == expected
    for fd in (up_src_r, up_dst_r, down_src_r, down_dst_r):
        os.close(fd)


@pytest.mark.skipif(TEE is None, reason="no tee(2)")
def test_a_socket_source_is_spliced_too(tmp_path: Path) -> None:
    """Node starts servers with socket pairs for their stdio, not pipes."""
    a, b = socket.socketpair()
    dst_r, dst_w = os.pipe()
    spooled = Spooled(tmp_path)
    ended: list[bool] = []
    relaying = start_relay("splice", a.fileno(), dst_w, w.Copier(spooled.feed, b"c"), ended)

    def send() -> None:
        b.sendall(DATA)
        b.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send)
    sender.start()
    assert read_all(dst_r) == DATA
    sender.join()
    relaying.join(30)
    assert b"".join(d for _, _, d in spooled.close()) == DATA
    a.close()
    b.close()


@pytest.mark.skipif(TEE is None, reason="no tee(2)")
def test_a_destination_that_cannot_be_spliced_is_written_to(tmp_path: Path) -> None:
    """splice(2) refuses a file opened for appending (EINVAL): what was taken is passed on
    by write, and so is the rest."""
    out = tmp_path / "out"
    dst = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    src_r, src_w = os.pipe()
    spooled = Spooled(tmp_path)
    ended: list[bool] = []
    fed = feeder(src_w, DATA)
    start_relay("splice", src_r, dst, w.Copier(spooled.feed, b"s"), ended).join(30)
    fed.join()
    assert out.read_bytes() == DATA and ended == [False]
    assert b"".join(d for _, _, d in spooled.close()) == DATA
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
    src_refuses_splice: Callable[[int], None], tmp_path: Path
) -> None:
    src_r, src_w = os.pipe()
    src_refuses_splice(src_r)
    assert b"".join(relay_data(by("splice"), src_r, src_w, tmp_path)[0]) == DATA


@pytest.mark.parametrize("path", PATHS)
def test_a_reader_gone_is_a_broken_pipe(path: str, tmp_path: Path) -> None:
    src_r, src_w = os.pipe()
    dst_r, dst_w = os.pipe()
    os.close(dst_r)
    spool = w.Spool(str(tmp_path))
    feed = w.Feed(spool.fd, spool.wake_w)
    ended: list[bool] = []
    os.write(src_w, b"line\n")
    start_relay(path, src_r, dst_w, w.Copier(feed, b"s"), ended).join(30)
    assert ended == [True]
    for fd in (src_r, src_w, spool.wake_r):
        os.close(fd)
    feed.close()


@pytest.mark.skipif(TEE is None, reason="no tee(2)")
@pytest.mark.parametrize("fails", ["returns 0", "raises"])
def test_a_tee_that_fails_falls_back_to_reading(fails: str, tmp_path: Path) -> None:
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
    assert b"".join(relay_data(start, src_r, src_w, tmp_path)[0]) == DATA


@pytest.mark.parametrize("path", PATHS)
def test_non_blocking_ends_are_waited_for_not_taken_for_an_end(path: str, tmp_path: Path) -> None:
    src_r, src_w = os.pipe()
    dst_r, dst_w = os.pipe()
    os.set_blocking(src_r, False)
    os.set_blocking(dst_w, False)
    spooled = Spooled(tmp_path)
    ended: list[bool] = []
    relaying = start_relay(path, src_r, dst_w, w.Copier(spooled.feed, b"s"), ended)
    time.sleep(0.2)  # nothing to read yet: EAGAIN, which is no end
    fed = feeder(src_w, DATA)
    time.sleep(0.2)  # the reader is slow: the non-blocking writes fill its pipe
    assert read_all(dst_r) == DATA
    fed.join()
    relaying.join(30)
    assert ended == [False] and b"".join(d for _, _, d in spooled.close()) == DATA
    os.close(src_r)


def test_the_spool_gives_back_what_the_recorder_has_read(tmp_path: Path) -> None:
    """The disk holds about what the recorder is behind, not the whole run."""
    spool = w.Spool(str(tmp_path))
    feed = w.Feed(spool.fd, spool.wake_w)
    probe = os.dup(spool.fd)
    chunk = b"x" * (1 << 20)
    n = 3 * w.SPOOL_TRIM_BYTES // len(chunk)
    for i in range(n):
        feed.send(b"s", i * len(chunk), 0.0, chunk)
    feed.close()
    written = os.fstat(probe).st_size
    frames = w.frames(os.dup(probe), spool.wake_r)
    assert sum(len(data) for _, _, _, data in frames) == n * len(chunk)
    held = os.fstat(probe).st_blocks * 512
    os.close(probe)
    if held >= written:
        pytest.skip("this file system cannot punch holes (the spool grows until the run ends)")
    assert held <= w.SPOOL_TRIM_BYTES + (1 << 20)


class Ringing(w.Feed):
    """A `Feed` that counts the wake-ups it sends."""

    rings = 0

    def _ring(self) -> None:
        self.rings += 1
        super()._ring()


def shared_spool(directory: Path) -> tuple[w.Spool, Ringing]:
    """A spool as the wrapper and its recorder share it (the position and sleep page), and
    the pumps' side of it."""
    spool = w.Spool(str(directory))
    return spool, Ringing(spool.fd, spool.wake_w, spool.read, spool.done_w)


def test_a_recorder_that_is_awake_is_not_woken(tmp_path: Path) -> None:
    """Only a sleeping recorder costs the pumps a wake-up: an awake one reads the spool
    again before it sleeps. Past `SPOOL_TRIM_BYTES` without one, it is rung anyway (a
    recorder that died awake is found so)."""
    spool, feed = shared_spool(tmp_path)
    assert feed.read is not None
    feed.send(b"c", 0, 0.0, b"{}\n")
    assert feed.rings == 0
    feed.read[w.ASLEEP] = 1
    feed.send(b"c", 3, 0.0, b"{}\n")
    assert feed.rings == 1
    feed.read[w.ASLEEP] = 0
    big = b"x" * (1 << 20)
    for i in range(w.SPOOL_TRIM_BYTES // len(big) - 1):
        feed.send(b"s", i * len(big), 0.0, big)
    assert feed.rings == 1
    feed.send(b"s", 0, 0.0, big)
    assert feed.rings == 2
    feed.close()
    for fd in (spool.wake_r, spool.done_r):
        os.close(fd)


def test_a_recorder_that_died_awake_stops_the_copies(tmp_path: Path) -> None:
    """The recorder's end of the wake-ups closed while it was awake: the next ring finds
    the pipe broken, and no more copies are made (the bytes flow on)."""
    spool, feed = shared_spool(tmp_path)
    os.close(spool.wake_r)
    os.close(spool.done_r)
    big = b"x" * (1 << 20)
    for i in range(w.SPOOL_TRIM_BYTES // len(big) + 1):
        feed.send(b"s", i * len(big), 0.0, big)
    assert not feed.open
    assert os.fstat(spool.fd).st_size <= w.SPOOL_TRIM_BYTES + 2 * len(big)
    feed.close()


def test_frames_in_a_flow_are_read_in_batches_and_none_waits_long(tmp_path: Path) -> None:
    """Messages 1 ms apart for half a second: the recorder dozes between batches, so the
    pumps wake it far less than once a message; and a message sent after a silence, to a
    recorder asleep, is woken for and read at once."""
    spool, feed = shared_spool(tmp_path)
    frames = w.frames(os.dup(spool.fd), spool.wake_r, spool.read, spool.done_r)
    seen: list[tuple[int, float]] = []

    def run() -> None:
        for _kind, offset, ts, _data in frames:
            seen.append((offset, time.time() - ts))

    recorder = threading.Thread(target=run)
    recorder.start()

    def until(ok: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 10
        while not ok() and time.monotonic() < deadline:
            time.sleep(w.DOZE_S)
        assert ok()

    n = 500
    for i in range(n):
        feed.send(b"c", i, time.time(), b"{}\n")
        time.sleep(0.001)
    # A wake-up needs the recorder asleep, after a doze that found nothing: a gap of
    # more than `DOZE_S` between messages (a loaded machine makes a few).
    assert feed.rings < n // 4, feed.rings
    assert feed.read is not None
    until(lambda: len(seen) == n and bool(feed.read and feed.read[w.ASLEEP]))
    time.sleep(0.05)  # its last look, then the wait for a wake-up
    before = feed.rings
    feed.send(b"c", n, time.time(), b"{}\n")
    until(lambda: len(seen) == n + 1)  # before the close, which would end the wait too
    assert feed.rings == before + 1
    assert seen[-1][1] < w.SLEEP_S / 2  # read on the wake-up, not at the next look
    feed.close()
    recorder.join(10)
    assert not recorder.is_alive()
    assert [offset for offset, _ in seen] == list(range(n + 1))
    assert max(lag for _, lag in seen) < 0.5  # a batch follows its messages closely


def test_a_recorder_behind_waits_only_while_copies_keep_coming(tmp_path: Path) -> None:
    """`Pause`: behind the traffic, the recorder reads nothing while the spool grows, and
    goes on as soon as it stops growing for `QUIET_S`; with nothing new since its last
    read or its last look, it does not wait at all; `SPOOL_DEFER_BYTES` behind it no
    longer waits; and it stops waiting when the last frame is written."""
    fd = os.open(tmp_path / "spool", os.O_RDWR | os.O_CREAT, 0o600)
    done_r, done_w = os.pipe()
    pause = w.Pause(fd, done_r)
    os.pwrite(fd, b"x" * 100, 0)

    def quick(position: int, read: int) -> None:
        t = time.monotonic()
        waited = pause.wait(position, read)
        assert time.monotonic() - t < w.QUIET_S / 2
        assert waited == pause.ended  # went on at once: it says it did not wait

    quick(0, 100)  # everything in the spool is read: no traffic to yield to

    def grow() -> None:
        for i in range(1, 10):
            time.sleep(w.QUIET_S / 4)
            os.pwrite(fd, b"y" * 10, 100 + 10 * i)

    os.pwrite(fd, b"y" * 10, 100)  # a copy came after the last read
    growing = threading.Thread(target=grow)
    growing.start()
    t = time.monotonic()
    assert pause.wait(0, 100)
    waited = time.monotonic() - t
    growing.join()
    assert waited >= 0.9 * w.QUIET_S  # at least one quiet spell looked for
    assert waited < 20 * w.QUIET_S  # and it went on once the copies stopped
    assert not pause.ended

    quick(0, 100)  # the next old frame: nothing came since the last look
    os.ftruncate(fd, w.SPOOL_DEFER_BYTES + 200)
    quick(0, 100)  # far behind: read now

    os.pwrite(fd, b"z", w.SPOOL_DEFER_BYTES + 200)
    os.close(done_w)  # the wrapper wrote its last frame
    assert pause.wait(w.SPOOL_DEFER_BYTES, 100)
    assert pause.ended
    os.close(done_r)
    os.close(fd)


def test_the_recorder_is_heavy_only_past_its_share_of_a_window() -> None:
    """`Busy`: a window shorter than `BUSY_WINDOW_S` is never heavy; a longer one is heavy
    when the recorder used more than `BUSY_SHARE` of it, and each look past the window's
    length begins a new one."""
    now = {"wall": 100.0, "cpu": 5.0}
    busy = w.Busy(wall=lambda: now["wall"], cpu=lambda: now["cpu"])
    window = w.BUSY_WINDOW_S
    now["wall"] += window / 2
    now["cpu"] += window / 2  # a whole core, but not a whole window yet
    assert not busy.heavy()
    now["wall"] += window / 2
    assert busy.heavy()  # a core over the window
    now["wall"] += window
    now["cpu"] += window * w.BUSY_SHARE / 2
    assert not busy.heavy()  # a new window: half its share
    now["wall"] += 2 * window
    now["cpu"] += 2 * window * w.BUSY_SHARE * 1.5
    assert busy.heavy()
    now["cpu"] += window  # used, and then forgotten: the traffic paused it
    busy.reset()
    now["wall"] += window
    assert not busy.heavy()


def test_a_heavy_recorder_yields_to_the_traffic_until_it_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recorder that keeps up but is busy (every window heavy, here) reads nothing more
    while copies keep coming, and reads them all, in order, once they stop for `QUIET_S`."""
    monkeypatch.setattr(w, "BUSY_WINDOW_S", 0.0)
    monkeypatch.setattr(w, "BUSY_SHARE", -1.0)
    spool, feed = shared_spool(tmp_path)
    frames = w.frames(os.dup(spool.fd), spool.wake_r, spool.read, spool.done_r)
    seen: list[tuple[int, float]] = []

    def run() -> None:
        for _kind, offset, _ts, _data in frames:
            seen.append((offset, time.monotonic()))

    recorder = threading.Thread(target=run)
    recorder.start()
    n = 300
    for i in range(n):  # each frame well inside `QUIET_S` of the one before
        feed.send(b"c", i, time.time(), b"{}\n")
        time.sleep(0.002)
    stopped = time.monotonic()
    deadline = stopped + 10
    while len(seen) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    feed.close()
    recorder.join(10)
    assert not recorder.is_alive()
    assert [offset for offset, _ in seen] == list(range(n))
    during = sum(1 for _, t in seen if t < stopped)
    assert during < n // 10, during  # a light recorder reads nearly all of them meanwhile
    assert seen[-1][1] - stopped < 20 * w.QUIET_S  # and then all of them, soon
