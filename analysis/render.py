"""One renderer for every command: rows in, text out, in the format asked for.

Commands build `(headers, rows)` and call `render(headers, rows, fmt, out)`, or push rows
one at a time through `open_writer(...)` when they produce them while reading. Every format
streams: JSON is written one object per line inside the array; a table works out its column
widths from the first `TABLE_SAMPLE_ROWS` rows and keeps them (a longer cell later just
pushes its line wider).

Cells are str, int, float, bool or None. Two float subclasses say how humans read them:
`Ratio` (a share, 0..1; a percentage in tables), `Millis` (milliseconds) and `Seconds`.
JSON and CSV get the plain number either way.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Final, TextIO, assert_never

import orjson

Cell = str | int | float | bool | None

#: Rows a table looks at to size its columns before it starts printing.
TABLE_SAMPLE_ROWS: Final = 1000


class Ratio(float):
    """A share from 0 to 1; tables show it as a percentage."""

    __slots__ = ()


class Millis(float):
    """A duration in milliseconds; tables show one decimal."""

    __slots__ = ()


class Seconds(float):
    """A time offset in seconds; tables show milliseconds' precision."""

    __slots__ = ()


class OutputFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    JSONL = "jsonl"
    CSV = "csv"
    MARKDOWN = "markdown"


def use_color(stream: TextIO) -> bool:
    """Color only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class RowWriter(ABC):
    """Writes rows of one table; `close()` finishes the output (even with no rows)."""

    def __init__(self, headers: Sequence[str], out: TextIO) -> None:
        self.headers = tuple(headers)
        self.out = out
        self.rows = 0

    def write(self, row: Sequence[Cell]) -> None:
        if len(row) != len(self.headers):
            raise ValueError(f"row has {len(row)} cells for {len(self.headers)} headers")
        self.rows += 1
        self._write(row)

    @abstractmethod
    def _write(self, row: Sequence[Cell]) -> None: ...

    @abstractmethod
    def close(self) -> None: ...


def open_writer(
    headers: Sequence[str], fmt: OutputFormat, out: TextIO, *, color: bool = False
) -> RowWriter:
    """A writer for `fmt`; `color` only affects tables."""
    match fmt:
        case OutputFormat.TABLE:
            return _Table(headers, out, color=color)
        case OutputFormat.JSON:
            return _Json(headers, out)
        case OutputFormat.JSONL:
            return _JsonLines(headers, out)
        case OutputFormat.CSV:
            return _Csv(headers, out)
        case OutputFormat.MARKDOWN:
            return _Markdown(headers, out)
        case _:
            assert_never(fmt)


def render(
    headers: Sequence[str],
    rows: Iterable[Sequence[Cell]],
    fmt: OutputFormat,
    out: TextIO,
    *,
    color: bool = False,
) -> int:
    """Write all rows; returns how many there were."""
    writer = open_writer(headers, fmt, out, color=color)
    for row in rows:
        writer.write(row)
    writer.close()
    return writer.rows


# --------------------------------------------------------------------- machine formats


def plain(value: Cell) -> Cell:
    """The value JSON and CSV carry: Ratio and Millis as plain floats."""
    if isinstance(value, float):
        return float(value)
    return value


class _Json(RowWriter):
    """A JSON array of objects, one per line: `[]` when there are no rows."""

    def _write(self, row: Sequence[Cell]) -> None:
        lead = "[\n" if self.rows == 1 else ",\n"
        obj = dict(zip(self.headers, map(plain, row), strict=True))
        self.out.write(lead + orjson.dumps(obj).decode())

    def close(self) -> None:
        self.out.write("[]\n" if self.rows == 0 else "\n]\n")
        self.out.flush()


class _JsonLines(RowWriter):
    def _write(self, row: Sequence[Cell]) -> None:
        obj = dict(zip(self.headers, map(plain, row), strict=True))
        self.out.write(orjson.dumps(obj).decode() + "\n")

    def close(self) -> None:
        self.out.flush()


class _Csv(RowWriter):
    """A header row, then rows; empty cells for null, `true`/`false` for booleans."""

    def __init__(self, headers: Sequence[str], out: TextIO) -> None:
        super().__init__(headers, out)
        import csv  # only here: most runs print other formats

        self.csv = csv.writer(out, lineterminator="\n")
        self.csv.writerow(self.headers)

    def _write(self, row: Sequence[Cell]) -> None:
        self.csv.writerow([_csv_cell(v) for v in row])

    def close(self) -> None:
        self.out.flush()


def _csv_cell(value: Cell) -> str | int | float:
    value = plain(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


# --------------------------------------------------------------------- human formats


def human(value: Cell) -> str:
    """How a cell reads in a table or markdown."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Ratio):
        return f"{value * 100:.1f}%"
    if isinstance(value, Millis):
        return f"{value:.1f}"
    if isinstance(value, Seconds):
        return f"{value:.3f}"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _numeric(value: Cell) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Sampled(RowWriter):
    """Holds the first rows to size columns and decide which are numbers."""

    def __init__(self, headers: Sequence[str], out: TextIO) -> None:
        super().__init__(headers, out)
        self.sample: list[Sequence[Cell]] | None = []
        self.widths = [len(h) for h in self.headers]
        self.right = [False] * len(self.headers)

    def _write(self, row: Sequence[Cell]) -> None:
        if self.sample is None:
            self._line(row)
            return
        self.sample.append(row)
        if len(self.sample) >= TABLE_SAMPLE_ROWS:
            self._flush_sample()

    def _flush_sample(self) -> None:
        assert self.sample is not None
        sample, self.sample = self.sample, None
        for i in range(len(self.headers)):
            values = [r[i] for r in sample if r[i] is not None]
            self.right[i] = bool(values) and all(_numeric(v) for v in values)
            self.widths[i] = max([self.widths[i], *(len(human(v)) for v in values)])
        self._head()
        for row in sample:
            self._line(row)

    def close(self) -> None:
        if self.sample is not None and (self.sample or self._head_when_empty):
            self._flush_sample()
        self.out.flush()

    _head_when_empty = False

    @abstractmethod
    def _head(self) -> None: ...

    @abstractmethod
    def _line(self, row: Sequence[Cell]) -> None: ...


class _Table(_Sampled):
    """Aligned columns under a dashed rule; bold headers when `color`.

    A header made of parts (`client / scenario`, from `compare --by … --by …`) is set on
    several lines, one part a line, so that columns stay as narrow as their longest part.
    """

    def __init__(self, headers: Sequence[str], out: TextIO, *, color: bool) -> None:
        super().__init__(headers, out)
        self.color = color
        self.head_parts = [h.split(" / ") for h in self.headers]
        self.widths = [max(len(p) for p in parts) for parts in self.head_parts]

    def _cells(self, texts: Sequence[str]) -> str:
        parts = [
            t.rjust(w) if r else t.ljust(w)
            for t, w, r in zip(texts, self.widths, self.right, strict=True)
        ]
        return "  ".join(parts).rstrip()

    def _head(self) -> None:
        depth = max(len(parts) for parts in self.head_parts)
        # Bottom-aligned: a one-part header sits on the last line, next to the rule.
        head = "\n".join(
            self._cells(
                [
                    parts[k - depth + len(parts)] if k >= depth - len(parts) else ""
                    for parts in self.head_parts
                ]
            )
            for k in range(depth)
        )
        rule = "  ".join("-" * w for w in self.widths)
        if self.color:
            head = f"\x1b[1m{head}\x1b[0m"
            rule = f"\x1b[2m{rule}\x1b[0m"
        self.out.write(head + "\n" + rule + "\n")

    def _line(self, row: Sequence[Cell]) -> None:
        self.out.write(self._cells([human(v) for v in row]) + "\n")


class _Markdown(_Sampled):
    """A GitHub-flavoured table; number columns are right-aligned."""

    _head_when_empty = True

    def _head(self) -> None:
        self.out.write(self._cells(self.headers) + "\n")
        rule = [
            "-" * max(w - 1, 2) + ":" if r else "-" * max(w, 3)
            for w, r in zip(self.widths, self.right, strict=True)
        ]
        self.out.write("| " + " | ".join(rule) + " |\n")

    def _cells(self, texts: Sequence[str]) -> str:
        parts = [
            t.rjust(w) if r else t.ljust(w)
            for t, w, r in zip(texts, self.widths, self.right, strict=True)
        ]
        return "| " + " | ".join(parts) + " |"

    def _line(self, row: Sequence[Cell]) -> None:
        self.out.write(self._cells([human(v).replace("|", "\\|") for v in row]) + "\n")
