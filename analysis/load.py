"""Inputs to a `records` table: the fast path, and the bad-line report when it is needed.

An engine first reads every input typed, as it is. Its read tells whether every line was
a record (it raised nothing and every row said `"v": 1`); almost always they do, and that
is the whole reading. Otherwise each input that is not clean is checked line by
line here (`records.check_line`): bad lines are reported as `path:lineno: reason` (the
first `MAX_REPORTED_BAD_LINES` of each input, then a count), a record of a newer format
version stops everything, and the good lines are copied to a spool file that the engine
reads instead. Stdin is spooled to a file first, since engines read files.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from .errors import AnalysisError, NewerRecordVersion
from .inputs import GZIP_MAGIC, Source, TruncatedStream, open_stream, stream_blocks
from .limits import MAX_REPORTED_BAD_LINES

Warn = Callable[[str], None]

#: A result row, as an engine gives it.
Row = tuple[Any, ...]

#: A UTF-8 byte-order mark.
BOM: Final = b"\xef\xbb\xbf"


@dataclass(slots=True)
class Report:
    """What reading found besides records: the loader fills it, the CLI prints it.

    An engine that queries its inputs in place counts the records only when asked
    (`counter`): the count is a pass over the inputs that a command rarely needs.
    """

    bad_lines: int = 0
    messages: list[str] = field(default_factory=list)
    counter: Callable[[], int] | None = None
    counted: int | None = None
    #: Whether there is any record, asked without counting them (an engine with `counter`).
    probe: Callable[[], bool] | None = None
    found_any: bool | None = None

    @property
    def records(self) -> int:
        if self.counted is None:
            self.counted = 0 if self.counter is None else self.counter()
        return self.counted

    @records.setter
    def records(self, n: int) -> None:
        self.counted = n

    @property
    def empty(self) -> bool:
        """No record read: known from the count when there is one, else asked of the first
        record alone (a count would read the inputs once more)."""
        if self.counted is not None:
            return self.counted == 0
        if self.found_any is None:
            self.found_any = self.probe() if self.probe is not None else self.records > 0
        return not self.found_any

    def settle(self) -> None:
        """Know now, while the engine is open, whether there was any record (a command that
        found nothing says whether there was anything to find)."""
        _ = self.empty


@dataclass(frozen=True, slots=True)
class Input:
    """A source as an engine reads it: a file on disk, and whether it is gzip; `table`,
    when its records are read from a cache entry instead (DuckDB: the attached table)."""

    index: int
    name: str
    path: str
    gzip: bool
    table: str | None = None


def on_disk(sources: Sequence[Source], spool: Path) -> list[Input]:
    """Every source as a file; stdin is copied into `spool` first."""
    out = []
    for i, s in enumerate(sources):
        if s.path is not None:
            out.append(Input(i, s.name, s.path, s.compressed))
            continue
        stdin = sys.stdin.buffer
        target = spool / f"stdin-{i}.jsonl"
        with open(target, "wb") as f:
            shutil.copyfileobj(stdin, f, 1024 * 1024)
        with open(target, "rb") as f:
            gz = f.read(2) == GZIP_MAGIC
        if gz:  # engines that go by the name (Spark) then know it too
            target = target.rename(target.with_name(target.name + ".gz"))
        out.append(Input(i, s.name, str(target), gz))
    return out


def cleaned(inp: Input, spool: Path, warn: Warn, report: Report) -> Input:
    """The input's records, checked line by line, in a spool file; bad lines reported.

    Raises NewerRecordVersion (with `path:lineno`) for a record of a newer version.
    """
    from .records import CHECKER, check_line  # only here: a clean input never needs it

    source = Source(inp.name, inp.path, inp.gzip, os.path.getsize(inp.path))
    target = spool / f"clean-{inp.index}.jsonl"
    bad = shown = 0
    lineno = 0
    try:
        raw, stream = open_stream(source)
    except OSError as exc:
        raise AnalysisError(f"{inp.name}: {exc}") from None
    with raw, stream, open(target, "wb") as out:
        try:
            for _, data, final in stream_blocks(stream):
                lines = data.split(b"\n")
                torn = -1
                if lines and not lines[-1]:
                    lines.pop()
                elif final:
                    torn = len(lines) - 1
                for i, line in enumerate(lines):
                    lineno += 1
                    if not line.strip() or (
                        line[:1] == b"\xef" and not line.replace(BOM, b"").strip()
                    ):
                        continue  # blank, or byte-order marks only: DuckDB skips it as blank
                    try:
                        result = check_line(line, CHECKER, torn=i == torn)
                    except NewerRecordVersion as exc:
                        raise NewerRecordVersion(
                            exc.version, where=f"{inp.name}:{lineno}"
                        ) from None
                    if isinstance(result, str):
                        bad += 1
                        if shown < MAX_REPORTED_BAD_LINES:
                            warn(f"{inp.name}:{lineno}: {result}")
                            shown += 1
                        continue
                    out.write(line)
                    out.write(b"\n")
        except TruncatedStream:
            report.messages.append(
                f"{inp.name}: compressed stream ends early (a copy cut short?); read what was there"
            )
    report.bad_lines += bad
    if bad > shown:
        report.messages.append(f"{inp.name}: {bad - shown} more bad lines not shown")
    return Input(inp.index, inp.name, str(target), False)


class Engine(Protocol):
    """What the commands ask of an engine (DuckDB, Spark)."""

    @property
    def dialect(self) -> str:
        """The SQL dialect its queries are translated to (sqlglot's name)."""
        ...

    def load(
        self,
        sources: Sequence[Source],
        columns: tuple[str, ...] | None,
        warn: Warn,
        *,
        shared: bool = True,
    ) -> Report:
        """The inputs as the `records` table; what reading found. `columns`: what the
        queries read (None: everything). `shared`: several queries follow (else one, and
        the report is complete once it has run)."""
        ...

    def rows(self, sql: str) -> list[Row]:
        """The rows of a query written in DuckDB's dialect."""
        ...

    def table(self, sql: str) -> tuple[list[str], list[Row]]:
        """A user's query: its column names and rows."""
        ...

    def export_parquet(self, directory: str) -> list[Path]: ...

    def close(self) -> None: ...
