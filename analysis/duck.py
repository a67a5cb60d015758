"""The default engine: DuckDB, embedded in this process.

Inputs are read with `read_json`, told every column's type (from the record definition,
never sniffed), into a temporary table; the figures are queries over it. Memory is bounded
by DuckDB's `memory_limit` (`MCP_LAYERS_MEMORY`, default 1GB): past it DuckDB spills the
table and the aggregations' state to a temporary directory on disk rather than growing.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import duckdb

from .errors import AnalysisError
from .inputs import Source
from .load import Input, Report, Warn, cleaned, on_disk
from .table import SEQUENCE, SOURCE, TABLE, read_columns

#: DuckDB's memory limit unless MCP_LAYERS_MEMORY says otherwise (DuckDB's syntax: 2GB).
DEFAULT_MEMORY: Final = "1GB"


def _columns_struct(columns: dict[str, str]) -> str:
    return "{" + ", ".join(f"'{n}': '{t}'" for n, t in columns.items()) + "}"


def _scan(inputs: Sequence[Input], columns: dict[str, str]) -> str:
    """One SELECT over every input, in order, each row tagged with its input number."""
    struct = _columns_struct(columns)
    names = ", ".join(columns)
    parts = [
        f"SELECT {inp.index} AS {SOURCE}, {names} FROM read_json("
        f"'{inp.path.replace(chr(39), chr(39) * 2)}', format='newline_delimited', "
        f"columns={struct}, compression='{'gzip' if inp.gzip else 'none'}', "
        "maximum_object_size=134217728)"
        for inp in inputs
    ]
    return "\nUNION ALL\n".join(parts)


class DuckEngine:
    """Reads the inputs into DuckDB and answers queries (in DuckDB's dialect)."""

    dialect: Final = "duckdb"

    def __init__(self, *, threads: int | None = None) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="mcp-layers-")
        self.spool = Path(self.tmp.name)
        config: dict[str, Any] = {
            "memory_limit": os.environ.get("MCP_LAYERS_MEMORY", DEFAULT_MEMORY),
            "temp_directory": str(self.spool / "spill"),
            "preserve_insertion_order": True,  # `_seq` is the order lines were read in
        }
        if threads is not None:
            config["threads"] = threads
        self.con = duckdb.connect(config=config)
        self.con.execute("SET enable_progress_bar = false")  # it would print into the output

    def close(self) -> None:
        self.con.close()
        self.tmp.cleanup()

    def load(
        self, sources: Sequence[Source], columns: tuple[str, ...] | None, warn: Warn
    ) -> Report:
        """The inputs into the `records` table (with `_src` and `_seq`)."""
        report = Report()
        inputs = on_disk(sources, self.spool)
        cols = read_columns(None if columns is None else ("v", "id", *columns))
        if not self._fast(inputs, cols):
            inputs = [self._clean(inp, cols, warn, report) for inp in inputs]
            try:
                self._read(inputs, cols)
            except duckdb.Error as exc:
                raise AnalysisError(f"cannot read the records: {exc}") from None
        self.con.execute(
            f"CREATE OR REPLACE TEMP VIEW {TABLE} AS "
            f"SELECT * EXCLUDE (v), CAST(v AS BIGINT) AS v, rowid AS {SEQUENCE} FROM raw"
        )
        report.records = self.count()
        return report

    def _read(self, inputs: Sequence[Input], cols: dict[str, str]) -> None:
        self.con.execute("DROP TABLE IF EXISTS raw")
        self.con.execute(f"CREATE TEMP TABLE raw AS {_scan(inputs, cols)}")

    def _fast(self, inputs: Sequence[Input], cols: dict[str, str]) -> bool:
        """Read everything typed; False when some line was not a record."""
        try:
            self._read(inputs, cols)
        except duckdb.Error:
            return False
        return not self._bad_rows()

    def _bad_rows(self) -> int:
        row = self.con.execute(
            "SELECT count(*) FILTER (WHERE v IS NULL OR CAST(v AS VARCHAR) <> '1') FROM raw"
        ).fetchone()
        return 0 if row is None else int(row[0])

    def _clean(self, inp: Input, cols: dict[str, str], warn: Warn, report: Report) -> Input:
        """The input itself when it reads clean alone, else its good lines (reported)."""
        try:
            # Materialised, so that every column is converted (a bare count would read `v`
            # only, and pass lines whose other fields do not convert).
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE probe AS {_scan([inp], cols)}")
            row = self.con.execute(
                "SELECT count(*) FILTER (WHERE v IS NULL OR CAST(v AS VARCHAR) <> '1') FROM probe"
            ).fetchone()
            if row is not None and not row[0]:
                return inp
        except duckdb.Error:
            pass
        finally:
            self.con.execute("DROP TABLE IF EXISTS probe")
        return cleaned(inp, self.spool, warn, report)

    def count(self) -> int:
        row = self.con.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
        return 0 if row is None else int(row[0])

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        try:
            return self.con.execute(sql).fetchall()
        except duckdb.Error as exc:
            raise AnalysisError(f"query failed: {exc}") from None

    def table(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """A user's query: its column names and rows."""
        try:
            cur = self.con.execute(sql)
            names = [d[0] for d in cur.description or ()]
            return names, cur.fetchall()
        except duckdb.Error as exc:
            raise AnalysisError(f"query failed: {exc}") from None

    def export_parquet(self, directory: str) -> None:
        """The records table as Parquet files under `directory`, one folder per day."""
        target = directory.replace("'", "''")
        self.con.execute(
            f"COPY (SELECT *, coalesce(substr(ts, 1, 10), 'unknown') AS day FROM {TABLE}) "
            f"TO '{target}' (FORMAT parquet, PARTITION_BY (day), OVERWRITE_OR_IGNORE true)"
        )
