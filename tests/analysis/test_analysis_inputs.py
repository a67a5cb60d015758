"""PATH expansion, line-aligned ranges, and block reading."""

from __future__ import annotations

import gzip
import io
import re
from pathlib import Path

import pytest
from analysis_helpers import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_layers_analysis.errors import InputError
from mcp_layers_analysis.inputs import (
    TruncatedStream,
    expand,
    stream_blocks,
)

lines_st = st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=40)


def test_directories_are_searched_recursively_in_name_order(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    for name in ("b/2.jsonl", "1.jsonl.gz", "b/x.txt", "0.jsonl"):
        (tmp_path / name).write_bytes(b"")
    got = [Path(s.name).relative_to(tmp_path).as_posix() for s in expand([str(tmp_path)])]
    assert got == ["0.jsonl", "1.jsonl.gz", "b/2.jsonl"]


def test_globs_files_and_stdin(tmp_path: Path) -> None:
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / name).write_bytes(b"{}\n")
    sources = expand([str(tmp_path / "*.jsonl"), "-", str(tmp_path / "a.jsonl")])
    assert [Path(s.name).name if s.path else s.name for s in sources] == [
        "a.jsonl",
        "b.jsonl",
        "<stdin>",
    ]  # a.jsonl named twice is read once
    assert sources[2].path is None and sources[2].size is None


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("nope.jsonl", "nope.jsonl: no such file or directory"),
        ("nope*.jsonl", "no file matches nope*.jsonl"),
    ],
)
def test_bad_paths_say_what_is_wrong(
    tmp_path: Path, arg: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=re.escape(message)):
        expand([arg])


def test_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=re.escape("no *.jsonl or *.jsonl.gz files under")):
        expand([str(tmp_path)])


def test_gzip_is_recognised_by_content_not_name(tmp_path: Path) -> None:
    (tmp_path / "packed.jsonl").write_bytes(gzip.compress(b"{}\n"))
    (tmp_path / "plain.gz").write_bytes(b"{}\n")
    packed, plain = expand([str(tmp_path / "packed.jsonl"), str(tmp_path / "plain.gz")])
    assert packed.compressed and not packed.splittable
    assert not plain.compressed and plain.splittable


class Trickle(io.RawIOBase):
    """A stream that gives at most `piece` bytes per read, as a pipe may."""

    def __init__(self, data: bytes, piece: int) -> None:
        self.data = data
        self.piece = piece

    def readable(self) -> bool:
        return True

    def read1(self, n: int = -1) -> bytes:
        out, self.data = self.data[: self.piece], self.data[self.piece :]
        return out

    read = read1  # type: ignore[assignment]


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=300).map(lambda b: b.replace(b"x", b"\n")),
    block=st.integers(1, 50),
    piece=st.integers(1, 70),
)
def test_stream_blocks_split_at_line_ends(data: bytes, block: int, piece: int) -> None:
    blocks = list(stream_blocks(Trickle(data, piece), block))  # type: ignore[arg-type]
    assert b"".join(b for _, b, _ in blocks) == data
    assert [f for *_, f in blocks] == [False] * (len(blocks) - 1) + [True]
    offset = 0
    for at, b, final in blocks:
        assert at == offset
        offset += len(b)
        if not final:
            assert b.endswith(b"\n")


def test_a_gzip_cut_short_is_read_as_far_as_it_goes() -> None:
    data = (FIXTURES / "cut.jsonl.gz").read_bytes()
    stream = gzip.GzipFile(fileobj=io.BytesIO(data))
    got = []
    with pytest.raises(TruncatedStream):
        for _, b, _ in stream_blocks(stream, 1024):
            got.append(b)
    assert b"".join(got).count(b"\n") > 5
