"""The answer cache (analysis/answers.py) and the records cache's background builds
(analysis/cache.py, cache_build.py), through the real console script in its own process.

A kept answer is told apart from a computed one by forging it: an answer file rewritten
with other bytes (and its checksum made right) is what a hit prints, and what a miss
never does. Each test has its own empty cache directory (conftest.py's `records_cache`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from analysis_helpers import FIXTURES, SYNTHETIC
from mcp_layers_analysis import answers, cache
from mcp_layers_analysis.duck import duckdb_version

TRUNCATED = FIXTURES / "truncated.jsonl"

#: A bound on any one command or build here: far above what they take.
TIMEOUT = 120


def run(*args: str | Path, cwd: Path | None = None) -> tuple[int, bytes, bytes]:
    """The console script, as a user runs it: (status, stdout, stderr)."""
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_layers_analysis.launch", *map(str, args)],
        capture_output=True,
        timeout=TIMEOUT,
        cwd=cwd,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


def settle(where: Path) -> None:
    assert cache.wait_for_builds(TIMEOUT, where), "a build took too long"


def answer_files(where: Path) -> list[Path]:
    return sorted(p for p in where.glob(f"*{answers.SUFFIX}") if not p.name.startswith("."))


def entry_files(where: Path) -> list[Path]:
    return sorted(p for p in where.glob(f"*{cache.SUFFIX}") if not p.name.startswith("."))


def forge(path: Path, stdout: bytes, meta_change: dict[str, object] | None = None) -> None:
    """The answer file rewritten to print `stdout` (meta changed as asked), whole."""
    data = path.read_bytes()
    parsed = answers._parse(data)
    assert parsed is not None
    meta, _, err, files = parsed
    meta.update(meta_change or {})
    meta["stdout"] = len(stdout)
    body = answers.FORMAT + json.dumps(meta, separators=(",", ":")).encode() + b"\n" + stdout + err
    body += b"".join(data for _, data in files)
    path.write_bytes(body + hashlib.blake2b(body, digest_size=32).hexdigest().encode() + b"\n")


FORGED = b"forged answer\n"


@pytest.fixture
def rec(tmp_path: Path) -> Path:
    path = tmp_path / "rec.jsonl"
    shutil.copyfile(SYNTHETIC, path)
    return path


def test_a_repeat_is_answered_from_its_answer_the_same_bytes(
    rec: Path, records_cache: Path
) -> None:
    args = ("summary", rec, "--format", "json")
    want = run(*args, "--no-cache")
    assert answer_files(records_cache) == []  # --no-cache keeps nothing
    cold = run(*args)
    (kept,) = answer_files(records_cache)
    warm = run(*args)
    assert cold == want and warm == want
    forge(kept, FORGED)
    assert run(*args)[1] == FORGED  # it was the kept answer that was printed


def test_a_repeated_report_writes_the_page_it_wrote_first(
    rec: Path, records_cache: Path, tmp_path: Path
) -> None:
    """`report`'s answer is its page too: written again, whole, where the command line says
    (relative to its directory), with what it printed."""
    page = tmp_path / "out" / "r.html"
    page.parent.mkdir()
    args = ("report", rec, "-o", "r.html")
    first = run(*args, cwd=page.parent)
    assert first[0] == 0, first
    made = page.read_bytes()
    (kept,) = answer_files(records_cache)
    page.unlink()
    assert run(*args, cwd=page.parent) == first
    assert page.read_bytes() == made
    # It was the kept page that was written: a forged one is what comes out.
    data = kept.read_bytes()
    parsed = answers._parse(data)
    assert parsed is not None
    meta, out, err, files = parsed
    assert [name for name, _ in files] == [str(page)]
    meta["files"] = [[str(page), len(b"forged page")]]
    body = answers.FORMAT + json.dumps(meta).encode() + b"\n" + out + err + b"forged page"
    kept.write_bytes(body + hashlib.blake2b(body, digest_size=32).hexdigest().encode() + b"\n")
    assert run(*args, cwd=page.parent) == first
    assert page.read_bytes() == b"forged page"
    # Elsewhere, the same command line writes its own page: the directory is in the key.
    (tmp_path / "elsewhere").mkdir()
    assert run(*args, cwd=tmp_path / "elsewhere")[0] == 0
    assert (tmp_path / "elsewhere" / "r.html").read_bytes().startswith(b"<!")


def test_a_repeated_export_is_answered_while_its_files_are_as_it_left_them(
    rec: Path, records_cache: Path, tmp_path: Path
) -> None:
    """`export --parquet`'s files are not kept (they may be large): the same command line
    is answered only while each file it wrote is still there as it was left, when writing
    them again would change nothing. A file changed or gone: the export runs again."""
    out = tmp_path / "pq"
    args = ("export", "--parquet", out, rec)
    first = run(*args)
    assert first[0] == 0, first
    (written,) = out.glob("day=*/*.parquet")
    (kept,) = answer_files(records_cache)
    left = (written.stat().st_mtime_ns, written.read_bytes())
    assert run(*args) == first
    assert (written.stat().st_mtime_ns, written.read_bytes()) == left  # not written again
    assert answer_files(records_cache) == [kept]
    written.write_bytes(b"not parquet any more")
    assert run(*args) == first
    assert written.read_bytes() == left[1]  # written again
    shutil.rmtree(out)
    assert run(*args) == first
    assert written.read_bytes() == left[1]


def test_status_and_stderr_are_kept_with_the_answer(records_cache: Path, tmp_path: Path) -> None:
    """Exit 1 (nothing matched) and the bad-line report on stderr, as the first time."""
    bad = tmp_path / "t.jsonl"
    shutil.copyfile(TRUNCATED, bad)
    for args in (
        ("summary", bad, "--lenient"),
        ("summary", SYNTHETIC, "--client", "nobody"),
        ("verdicts", SYNTHETIC, "--format", "json"),
    ):
        first = run(*args)
        assert first[0] in (0, 1, 3), first
        assert run(*args) == first
    assert len(answer_files(records_cache)) == 3


@pytest.mark.parametrize("change", ["append", "touch", "rewrite"])
def test_a_changed_input_is_never_answered_from_before(
    change: str, rec: Path, records_cache: Path
) -> None:
    count = ("query", "SELECT count(*) AS n FROM records", rec, "--format", "csv")
    before = run(*count)
    (kept,) = answer_files(records_cache)
    forge(kept, FORGED)
    if change == "append":
        last = SYNTHETIC.read_bytes().splitlines()[-1]
        with open(rec, "ab") as f:
            f.write(last.replace(b'"id":', b'"id":9', 1) + b"\n")
    elif change == "touch":
        st = rec.stat()
        os.utime(rec, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    else:  # the same size and time, another byte near the end
        st = rec.stat()
        data = bytearray(rec.read_bytes())
        i = data.rindex(b'"client":"') + len(b'"client":"')
        data[i] = ord("Z")
        rec.write_bytes(bytes(data))
        os.utime(rec, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = run(*count)
    assert after[1] != FORGED
    n0, n1 = int(before[1].split()[1]), int(after[1].split()[1])
    assert n1 == n0 + (1 if change == "append" else 0)
    assert run(*count) == after  # kept again, for the input as it is now


def test_a_file_added_to_a_directory_is_counted(records_cache: Path, tmp_path: Path) -> None:
    folder = tmp_path / "recs"
    folder.mkdir()
    shutil.copyfile(SYNTHETIC, folder / "a.jsonl")
    count = ("query", "SELECT count(*) AS n FROM records", folder, "--format", "csv")
    one = run(*count)
    assert run(*count) == one
    shutil.copyfile(SYNTHETIC, folder / "b.jsonl")
    two = run(*count)
    assert int(two[1].split()[1]) == 2 * int(one[1].split()[1])


def test_changed_code_is_never_answered_from_before(rec: Path, records_cache: Path) -> None:
    """An answer names the module files it came from: one that differs (here, as if it
    had been edited) makes the command run."""
    args = ("summary", rec, "--format", "csv")
    want = run(*args)
    (kept,) = answer_files(records_cache)
    parsed = answers._parse(kept.read_bytes())
    assert parsed is not None
    modules = parsed[0]["modules"]
    assert any(name.endswith("summary.py") for name, _, _ in modules)
    edited = [[n, m + 1 if n.endswith("summary.py") else m, s] for n, m, s in modules]
    forge(kept, FORGED, {"modules": edited})
    assert run(*args) == want


@pytest.mark.parametrize("damage", ["cut", "flipped"])
def test_a_damaged_answer_is_removed_and_the_command_runs(
    damage: str, rec: Path, records_cache: Path
) -> None:
    args = ("sessions", rec, "--format", "csv")
    want = run(*args)
    (kept,) = answer_files(records_cache)
    data = kept.read_bytes()
    if damage == "cut":
        kept.write_bytes(data[: len(data) // 2])
    else:
        i = len(data) // 2
        kept.write_bytes(data[:i] + bytes([data[i] ^ 0x20]) + data[i + 1 :])
    assert run(*args) == want
    (again,) = answer_files(records_cache)
    kept_anew = answers._parse(again.read_bytes())  # whole again
    assert kept_anew is not None and kept_anew[1:3] == (want[1], want[2])


def test_an_unwritable_cache_means_one_warning_and_the_same_answer(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    env_dir = str(blocker / "cache")
    os.environ["MCP_LAYERS_CACHE_DIR"] = env_dir  # the fixture's monkeypatch restores it
    args = ("summary", SYNTHETIC, "--format", "json")
    want = run(*args, "--no-cache")
    for _ in range(2):
        got = run(*args)
        assert (got[0], got[1]) == (want[0], want[1])
        warnings = [line for line in got[2].decode().splitlines() if "cache" in line]
        assert len(warnings) == 1, got[2]
        assert str(blocker) in warnings[0]


def test_the_entry_is_built_after_the_answer_in_the_background(
    rec: Path, records_cache: Path
) -> None:
    """The first command reads the input and leaves; the entry appears once its builder is
    done, whole, with no lock nor temporary file left; a different question then reads it
    (the same answer as without the cache)."""
    want = run("summary", rec, "--no-cache")
    assert run("summary", rec) == want
    settle(records_cache)
    assert len(entry_files(records_cache)) == 1
    assert sorted(p.name for p in records_cache.iterdir() if p.name.startswith(".")) == []
    other = ("sessions", rec, "--format", "csv")
    assert run(*other) == run(*other, "--no-cache")
    assert cache.building(records_cache) == 0  # read from the entry: nothing to build


def test_a_build_under_way_is_never_started_twice(rec: Path, records_cache: Path) -> None:
    """While an entry's lock is held (a builder at work), commands read the input and start
    no other builder; once it is given up, the next command builds the entry."""
    records_cache.mkdir(exist_ok=True)
    k = cache.key(str(rec), engine=duckdb_version())
    fd = cache.try_lock(records_cache, k)
    assert fd is not None
    try:
        assert cache.try_lock(records_cache, k) is None  # held: not twice
        want = run("sessions", rec, "--no-cache")
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "mcp_layers_analysis.launch", "sessions", str(rec)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(3)
        ]
        for p in procs:
            out, err = p.communicate(timeout=TIMEOUT)
            assert (p.returncode, out, err) == want
        assert cache.building(records_cache) == 1  # ours, and no other
        assert entry_files(records_cache) == []
    finally:
        cache.unlock(records_cache, k, fd)
    assert cache.building(records_cache) == 0
    run("summary", rec)
    settle(records_cache)
    assert len(entry_files(records_cache)) == 1


def test_concurrent_first_commands_build_one_entry(rec: Path, records_cache: Path) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "mcp_layers_analysis.launch", "summary", str(rec)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(4)
    ]
    for p in procs:
        assert p.wait(timeout=TIMEOUT) == 0
    settle(records_cache)
    assert len(entry_files(records_cache)) == 1
    assert [p for p in records_cache.iterdir() if p.name.startswith(".tmp-")] == []


def test_a_half_written_entry_is_never_read(rec: Path, records_cache: Path) -> None:
    """A builder killed mid-way leaves `.tmp-…`: never read, removed by `cache clear`."""
    records_cache.mkdir(exist_ok=True)
    half = records_cache / f".tmp-0123{cache.SUFFIX}"
    half.write_bytes(b"\0" * 4096)
    args = ("summary", rec, "--format", "csv")
    assert run(*args) == run(*args, "--no-cache")
    settle(records_cache)
    assert run("cache", "clear")[0] == 0
    assert list(records_cache.iterdir()) == []
