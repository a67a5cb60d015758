"""Retention: the recording directory stays within its limits, oldest of this addon's
own files first, never the file being written, never anything else."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mcp_layers_core.jsonl import OTHER_RUN_QUIET_S, RecordWriter, run_file_name

pytestmark = pytest.mark.opaque_records  # the records here are payloads, not records

KIB = 1024
DAY = 86400.0
T0 = 1_700_000_000.0


def record(n: int, pad: int = 900) -> dict:
    return {"v": 1, "id": n, "pad": "x" * pad}


def sizes(directory: Path) -> dict[str, int]:
    return {p.name: p.lstat().st_size for p in sorted(directory.iterdir())}


def test_the_directory_stays_under_its_size_while_writing(tmp_path: Path) -> None:
    now = [T0]
    w = RecordWriter(
        tmp_path, started=T0, max_bytes=20 * KIB, retain_bytes=100 * KIB, clock=lambda: now[0]
    )
    for n in range(1000):  # ~900 KiB through a 100 KiB budget
        w.write([record(n)])
        now[0] += 1.0
        assert sum(sizes(tmp_path).values()) <= 100 * KIB
    files = sizes(tmp_path)
    assert sum(files.values()) <= 100 * KIB
    assert w.path is not None and w.path.name in files  # never the file being written
    assert w.deleted >= 30 and len(files) <= 6
    # The newest parts are kept: the last record is there, the first is long gone.
    text = "".join(p.read_text() for p in tmp_path.iterdir())
    assert '"id":999,' in text and '"id":0,' not in text


def test_only_own_files_are_ever_deleted(tmp_path: Path) -> None:
    foreign = ["notes.txt", "mcp-20230101T000000Z.jsonl.1", "mcp-old.jsonl", "other.jsonl"]
    for name in foreign:
        (tmp_path / name).write_bytes(b"y" * 50 * KIB)
    old_run = tmp_path / run_file_name(T0 - 10 * DAY)
    old_run.write_bytes(b"z" * 50 * KIB)
    os.utime(old_run, (T0 - 10 * DAY, T0 - 10 * DAY))
    recent_other = tmp_path / run_file_name(T0 - 60)  # another proxy, perhaps still writing
    recent_other.write_bytes(b"z" * 50 * KIB)
    os.utime(recent_other, (T0 - 30, T0 - 30))
    (tmp_path / "link.jsonl").symlink_to(old_run)
    w = RecordWriter(tmp_path, started=T0, retain_bytes=40 * KIB, clock=lambda: T0)
    w.write([record(1)])
    names = set(sizes(tmp_path))
    assert set(foreign) <= names and "link.jsonl" in names
    assert old_run.name not in names  # the oldest of our own went first
    assert recent_other.name in names  # younger than OTHER_RUN_QUIET_S: left alone
    assert OTHER_RUN_QUIET_S >= 60


def test_retention_by_age(tmp_path: Path) -> None:
    for age_days in (9, 5, 1):
        path = tmp_path / run_file_name(T0 - age_days * DAY)
        path.write_bytes(b"z" * KIB)
        os.utime(path, (T0 - age_days * DAY, T0 - age_days * DAY))
    w = RecordWriter(tmp_path, started=T0, retain_days=3, clock=lambda: T0)
    w.write([record(1)])
    kept = sorted(sizes(tmp_path))
    assert kept == sorted([run_file_name(T0 - 1 * DAY), run_file_name(T0)])
    assert w.max_bytes == 100 * 1024 * 1024  # parts rotate so old ones can go


def test_off_by_default(tmp_path: Path) -> None:
    old = tmp_path / run_file_name(T0 - 100 * DAY)
    old.write_bytes(b"z" * KIB)
    os.utime(old, (T0 - 100 * DAY, T0 - 100 * DAY))
    w = RecordWriter(tmp_path, started=T0, clock=lambda: T0)
    w.write([record(1)])
    w.maintain()
    assert old.exists() and w.max_bytes is None and w.deleted == 0
