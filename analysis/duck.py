"""The default engine: DuckDB, embedded in this process.

Inputs are read with `read_json`, told every column's type (from the record definition,
never sniffed). A command that asks one question queries them where they lie: `records` is
a view over the files, so the query reads only the columns it uses, in one pass, and
nothing is copied. A command that asks several questions of the same records (`shared`)
reads the columns it declares once into a table instead, and its queries run over that.
The table is a temporary one, held in memory, when it is estimated to fit (`spooled`);
otherwise it is in a database file of its own in the engine's temporary directory (the
spool, `SPOOL`): a database file's columns are compressed (4M records: 140 MB) and paged
in under the limit, where a temporary table is held uncompressed and, past the limit,
spilled and read back (`verdicts` of 4M records, the same statements: 132 s over a
temporary table, 97 s over the spool). Compressing costs a little: 0.3-0.8 s a million
records when the table would have fitted.

Every row must say `"v": 1`: the view's filter raises for one that does not (`error()` is
volatile, so DuckDB evaluates it on every row; the view's window keeps a query's own
filters from moving below it), and a line that is not JSON, or whose fields do not
convert, raises in the read.
Only then are the inputs checked line by line (`load.cleaned`), and the query runs again
over their good lines.

Memory is bounded by DuckDB's `memory_limit` (`MCP_LAYERS_MEMORY`, default 1GB): past it
DuckDB spills the table and the aggregations' state to a temporary directory on disk
(removed at exit) rather than growing.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

# DuckDB's engine is its `_duckdb` extension, typed by the stubs DuckDB ships with it. The
# `duckdb` package wraps it in a Python layer (relational and expression API, a version
# lookup through importlib.metadata) that costs 80 ms to import and that SQL alone never
# uses: a third of a small command's run.
try:
    import _duckdb as duckdb
except ImportError:  # a DuckDB older than the split into `_duckdb` and `duckdb`
    import duckdb  # type: ignore[no-redef]

import contextlib

from .cache import SUFFIX, Cache
from .errors import AnalysisError, NewerRecordVersion
from .inputs import Source
from .load import Input, Report, Warn, cleaned, on_disk
from .queries import DAY
from .table import SEQUENCE, SOURCE, TABLE, read_columns

#: DuckDB's memory limit unless MCP_LAYERS_MEMORY says otherwise (DuckDB's syntax: 2GB).
DEFAULT_MEMORY: Final = "1GB"

#: What a line that is not a record raises while it is read: malformed JSON, a value that
#: does not convert, the `v` check, a gzip stream cut short; or, when DuckDB's message
#: quotes a line that is not UTF-8, the UnicodeDecodeError of turning it into a string.
READ_ERRORS: Final = (
    duckdb.InvalidInputException,
    duckdb.ConversionException,
    duckdb.IOException,
    UnicodeDecodeError,
)

#: Anything a failed query raises (see READ_ERRORS for UnicodeDecodeError).
QUERY_FAILED: Final = (duckdb.Error, UnicodeDecodeError)

#: SQL: the row is a record of this version, else the query stops. `v` is read as JSON
#: text, minified: the number 1 reads `1`, the string "1" `"1"`, 1.0 `1.0`. (Comparing
#: JSON text costs a third of casting it to VARCHAR first, about 2 % of a query.)
CHECK: Final = (
    "CASE WHEN v = '1'::JSON THEN TRUE ELSE error('mcp-layers: a line that is not a v1 record') END"
)

#: The longest line DuckDB reads at first (its default): a reader holds buffers of this
#: size, so a larger one costs memory on every read.
OBJECT_BYTES: Final = 16 * 1024 * 1024

#: The longest line read once a read has failed (a record with large `bodies`).
LARGE_OBJECT_BYTES: Final = 128 * 1024 * 1024

T = TypeVar("T")

#: The database, a file in the engine's temporary directory, that holds the records table
#: of a command that asks several questions when it would not fit in memory (`spooled`).
SPOOL: Final = "mcp_layers_spool"

#: How many times the memory limit a records table may be estimated at and still be held
#: in memory (`spooled`). Measured on the benchmark's records (1M and 2M, 2026-12-07):
#: at about twice the limit a temporary table and the spool cost the same, give or take
#: 10 % (`show`, which asks two questions, a little faster in memory; `verdicts`, sixteen,
#: faster spooled); at four times, `verdicts` ran 1.2 to 1.4 times faster spooled (51
#: against 60 s with its statements of today, 97 against 132 s with the earlier ones).
SPOOL_ABOVE: Final = 2

#: How much larger than its file a gzip input is once read (a JSONL recording compresses
#: about this much): its size for `spooled`'s estimate.
GZIP_RATIO: Final = 8

_UNITS: Final = {"bytes": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}


def spooled(inputs: Sequence[Input], read: int, every: int, limit: int) -> bool:
    """Whether a records table of `inputs` goes to the spool: its estimated size (the
    inputs' bytes, each column declared counted as an equal share of `every`) over
    SPOOL_ABOVE times the memory `limit`. An input that cannot be measured counts as
    none (it will fail to read, and say why)."""
    size = 0
    for inp in inputs:
        try:
            size += os.path.getsize(inp.path) * (GZIP_RATIO if inp.gzip else 1)
        except OSError:
            continue
    return size * read > SPOOL_ABOVE * limit * every


def limit_bytes(setting: str) -> int:
    """DuckDB's `memory_limit` as it says it (`953.6 MiB`) in bytes."""
    number, _, unit = setting.strip().partition(" ")
    return int(float(number) * _UNITS.get(unit, 1))


def duckdb_version() -> str:
    """The version of the DuckDB that writes and reads cache entries (part of their key)."""
    return str(getattr(duckdb, "__version__", "?"))


#: Stands for an input's name in the report a cache entry keeps (see DuckEngine.build).
NAME_MARK: Final = "\x00input\x00"


def _columns_struct(columns: dict[str, str]) -> str:
    return "{" + ", ".join(f"'{n}': '{t}'" for n, t in columns.items()) + "}"


def _scan(
    inputs: Sequence[Input], columns: dict[str, str], object_bytes: int = OBJECT_BYTES
) -> str:
    """One SELECT over every input, in order, each row tagged with its input number and
    kept only when it is a record (see CHECK)."""
    struct = _columns_struct(columns)
    names = ", ".join(columns)
    # A cache entry holds records only, checked when it was built: `v` is 1 on every row.
    cached = ", ".join("CAST('1' AS JSON) AS v" if n == "v" else n for n in columns)
    parts = [
        f"SELECT {inp.index} AS {SOURCE}, {cached} FROM {inp.table}"
        if inp.table is not None
        else f"SELECT {inp.index} AS {SOURCE}, {names} FROM read_json("
        f"{_quote(inp.path)}, format='newline_delimited', "
        f"columns={struct}, compression='{'gzip' if inp.gzip else 'none'}', "
        f"maximum_object_size={object_bytes}) WHERE {CHECK}"
        for inp in inputs
    ]
    return "\nUNION ALL\n".join(parts)


def _quote(path: str | Path) -> str:
    """A path as an SQL string literal."""
    return "'" + str(path).replace("'", "''") + "'"


class DuckEngine:
    """Reads the inputs with DuckDB and answers queries (in DuckDB's dialect)."""

    dialect: Final = "duckdb"

    def __init__(self, *, threads: int | None = None, cache: bool = False) -> None:
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
        self.inputs: list[Input] = []
        self.cols: dict[str, str] = {}
        self.report = Report()
        self.warn: Warn = lambda _: None
        # True while the view reads inputs not yet known to be clean.
        self.unchecked = False
        self.shared = False  # `records` a table (load's `shared`), else a view
        self.attached_spool = False  # the records table is in the spool (SPOOL)
        self.object_bytes = OBJECT_BYTES
        # The records cache (analysis/cache.py): used for inputs on disk when `cache`.
        self.use_cache = cache
        self.cache: Cache | None = None
        self.entries: dict[int, Path] = {}  # input index -> the entry it is read from
        self.attached = 0  # databases attached so far (entries read or built): their names
        # Inputs read from disk for want of an entry, as (path, key): built once we are done.
        self.wanted: list[tuple[str, str]] = []

    def close(self) -> None:
        self.con.close()
        self.tmp.cleanup()
        if self.cache is not None and self.wanted:
            # Only now, the answer computed: the builder never competes with it.
            self.cache.build_later(list(dict.fromkeys(self.wanted)))
            self.wanted = []

    def load(
        self,
        sources: Sequence[Source],
        columns: tuple[str, ...] | None,
        warn: Warn,
        *,
        shared: bool = True,
    ) -> Report:
        """The inputs as the `records` table (with `_src` and `_seq`).

        `columns`: the fields the queries read (all when None; `v` and `id` always).
        `shared`: several queries follow, so those columns are read once into a table, bad
        lines located now. Otherwise `records` is a view over the inputs for a single
        query: the report is complete once it has run, and `records` is counted only when
        asked.
        """
        self.report = Report()
        self.warn = warn
        self.inputs = on_disk(sources, self.spool)
        # Only the columns named are declared to the reader: each one declared costs the
        # JSON reader time on every line even when no query reads it (about 1 % of a query).
        self.cols = read_columns(None if columns is None else ("v", "id", *columns))
        if self.use_cache:
            self.inputs = self._from_cache(self.inputs, sources)
        self.shared = shared
        if shared:
            self._attempt(self._materialise, lambda: None, "cannot read the records")
            self.report.records = self._count()
        else:
            self._view()
            self.unchecked = True
            self.report.counter = self._count
            self.report.probe = self._any
        return self.report

    def _materialise(self) -> None:
        table, create = "raw", "TEMP TABLE"
        if self._spooled():
            if not self.attached_spool:
                self.con.execute(f"ATTACH {_quote(self.spool / 'records.duckdb')} AS {SPOOL}")
                self.attached_spool = True
            table, create = f"{SPOOL}.raw", "TABLE"
        self.con.execute(
            f"CREATE OR REPLACE {create} {table} AS "
            f"SELECT * EXCLUDE (v) FROM ({_scan(self.inputs, self.cols, self.object_bytes)})"
        )
        self.con.execute(
            f"CREATE OR REPLACE TEMP VIEW {TABLE} AS "
            f"SELECT *, CAST(1 AS BIGINT) AS v, rowid AS {SEQUENCE} FROM {table}"
        )

    def _spooled(self) -> bool:
        """Whether the records table goes to the spool (`spooled`); once it has, it stays
        there (a table read again after a bad line is the same size)."""
        if self.attached_spool:
            return True
        row = self.con.execute("SELECT current_setting('memory_limit')").fetchone()
        limit = limit_bytes(str(row[0])) if row is not None else 0
        return spooled(self.inputs, len(self.cols), len(read_columns()), limit)

    def head(self, name: str, columns: tuple[str, ...], limit: int | None) -> int:
        """The first `limit` records of the inputs (every one when None), with `columns`, as
        the temporary table `name`, shaped as the `records` table is (the same `_seq` for
        the same line). For a command that needs a few columns of every record and more
        of some: each column declared costs the reader time on every line it reads, and a
        read that stops at `limit` lines reads no more. Only after `load(shared=True)`
        (its inputs known clean). Returns how many records the table holds."""
        cols = read_columns(("v", "id", *columns))

        def create() -> None:
            scan = f"SELECT * EXCLUDE (v) FROM ({_scan(self.inputs, cols, self.object_bytes)})"
            if limit is not None:
                scan += f" LIMIT {int(limit)}"
            self.con.execute(
                f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT *, CAST(1 AS BIGINT) AS v, "
                f"row_number() OVER () - 1 AS {SEQUENCE} FROM ({scan})"
            )

        try:
            create()
        except QUERY_FAILED as exc:
            if not self._drop_damaged():  # a column load() did not read: a damaged block
                raise AnalysisError(f"cannot read the records: {exc}") from None
            create()  # the damaged ones read from their inputs
        row = self.con.execute(f"SELECT count(*) FROM {name}").fetchone()
        return 0 if row is None else int(row[0])

    def _view(self) -> None:
        # `row_number() OVER ()` counts rows in input order (insertion order is kept). The
        # window is also what keeps CHECK on every row: without it DuckDB moves a query's
        # own filters below CHECK, and a bad line they leave out would go unreported
        # (tests/analysis/test_analysis_duck.py). A query that does not read `_seq` does
        # not compute it: the plan keeps the filters' order and drops the window.
        self.con.execute(
            f"CREATE OR REPLACE TEMP VIEW {TABLE} AS "
            f"SELECT * EXCLUDE (v), CAST(v AS BIGINT) AS v, "
            f"row_number() OVER () - 1 AS {SEQUENCE} "
            f"FROM ({_scan(self.inputs, self.cols, self.object_bytes)})"
        )

    def _attempt(self, run: Callable[[], T], rebuild: Callable[[], None], what: str) -> T:
        """`run`; when a line was not a record: the inputs cleaned, `rebuild`, `run` again.
        Inputs that cannot be read (a newer record version) get no entry built."""
        try:
            return self._attempt_once(run, rebuild, what)
        except (NewerRecordVersion, AnalysisError):
            self.wanted.clear()
            raise

    def _attempt_once(self, run: Callable[[], T], rebuild: Callable[[], None], what: str) -> T:
        try:
            return run()
        except READ_ERRORS:
            pass
        except QUERY_FAILED as exc:
            # DuckDB says a block of an entry fails its checksum only when a query reads
            # it (a plain duckdb.Error): the damaged entries are read no more, the run again.
            if not self._drop_damaged():
                raise AnalysisError(f"{what}: {exc}") from None
            rebuild()
            return self._attempt_once(run, rebuild, what)
        self.object_bytes = LARGE_OBJECT_BYTES  # the failure may have been a long line
        self.inputs = self._cleaned(self.inputs)
        rebuild()
        try:
            return run()
        except QUERY_FAILED as exc:
            raise AnalysisError(f"{what}: {exc}") from None

    def _cleaned(self, inputs: Sequence[Input]) -> list[Input]:
        """Each input as it is when it reads clean alone, else its good lines (reported).

        A cache entry that does not read clean is damaged (its records were checked when
        it was built): it is removed, and its input read instead."""
        out = []
        for inp in inputs:
            check = len(inputs) > 1  # else it is the one that failed
            if inp.table is not None:
                out.append(inp if self._clean_alone(inp) else self._forget(inp))
                continue
            clean = check and self._clean_alone(inp)
            out.append(inp if clean else cleaned(inp, self.spool, self.warn, self.report))
        return out

    def _clean_alone(self, inp: Input) -> bool:
        # Every column is read (hashed): a bare count would read `v` only, and pass lines
        # whose other fields do not convert.
        names = ", ".join(n for n in self.cols if n != "v")
        try:
            scan = _scan([inp], self.cols, self.object_bytes)
            self.con.execute(f"SELECT max(hash({names})) FROM ({scan})")
        except QUERY_FAILED:
            return False
        return True

    def _run(self, fetch: Callable[[], T]) -> T:
        """`fetch` (a query over `records` and its result); over inputs not yet known to be
        clean, a line that is not a record has them cleaned and the query run again."""
        if not self.unchecked:
            try:
                return fetch()
            except QUERY_FAILED as exc:
                if not self._drop_damaged():  # a later query that read a damaged block
                    raise AnalysisError(f"query failed: {exc}") from None
            if self.shared:
                self._attempt(self._materialise, lambda: None, "cannot read the records")
                return self._run(fetch)
            self._view()
            self.unchecked = True
        result = self._attempt(fetch, self._view, "query failed")
        self.unchecked = False
        return result

    def _count(self) -> int:
        row = self._run(lambda: self.con.execute(f"SELECT count(*) FROM {TABLE}").fetchone())
        return 0 if row is None else int(row[0])

    def _any(self) -> bool:
        return bool(
            self._run(lambda: self.con.execute(f"SELECT 1 FROM {TABLE} LIMIT 1").fetchall())
        )

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return self._run(lambda: self.con.execute(sql).fetchall())

    def table(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """A user's query: its column names and rows."""

        def fetch() -> tuple[list[str], list[tuple[Any, ...]]]:
            cur = self.con.execute(sql)
            return [d[0] for d in cur.description or ()], cur.fetchall()

        return self._run(fetch)

    def export_parquet(self, directory: str) -> list[Path]:
        """The records table as Parquet files under `directory`, one folder per day
        (`day=2026-11-30/data_0.parquet`, as a partitioned COPY names them): their paths.

        One plain COPY per day rather than one COPY partitioned by day: the partitioned
        writer buffers its partitions in memory, and beside the records table (three
        quarters of the 1 GB limit at 1M records) it spilled, 30 s where these take 5."""
        written: list[Path] = []
        for (day,) in self.rows(f"SELECT DISTINCT {DAY} FROM {TABLE} ORDER BY 1"):
            folder = Path(directory) / f"day={day}"
            folder.mkdir(parents=True, exist_ok=True)
            written.append(folder / "data_0.parquet")
            self.rows(
                f"COPY (SELECT * FROM {TABLE} WHERE {DAY} = {_quote(day)}) "
                f"TO {_quote(written[-1])} (FORMAT parquet)"
            )
        return written

    # ----------------------------------------------------------------- the records cache

    def _from_cache(self, inputs: Sequence[Input], sources: Sequence[Source]) -> list[Input]:
        """Each input on disk read from its cache entry when it has one holding the columns
        read; otherwise read as it is, and its entry built in the background once the
        command is done (close): a first question costs what it costs without a cache.

        What building found (bad lines, a gzip stream cut short) is kept in the entry and
        reported again, as it was the first time, each time the entry is read.
        """
        if self.cache is None:
            self.cache = Cache(self.warn)
        out = []
        needed = frozenset(self.cols) - {"v"}
        for inp, src in zip(inputs, sources, strict=True):
            if src.path is None or self.cache.disabled:
                out.append(inp)  # stdin is never cached: it cannot be read twice to check
                continue
            out.append(self._entry_of(inp, needed))
        return out

    def _entry_of(self, inp: Input, needed: frozenset[str]) -> Input:
        """`inp` read from its entry, if there is a sound one holding `needed`; else as it
        is, its entry wanted."""
        from .cache import key

        assert self.cache is not None
        try:
            k = key(inp.path, engine=duckdb_version())
        except OSError:
            return inp  # the read itself will say what is wrong
        found = self.cache.lookup(k)
        if found is not None:
            opened = self._open_entry(inp, found, needed)
            if opened is not None:
                return opened
            self.cache.discard(found)  # damaged, or of another layout: built again
        self.wanted.append((inp.path, k))
        return inp

    def _attach(self, path: Path, *, read_only: bool) -> str:
        name = f"mcp_layers_entry_{self.attached}"
        self.attached += 1
        mode = " (READ_ONLY)" if read_only else ""
        self.con.execute(f"ATTACH {_quote(path)} AS {name}{mode}")
        return name

    def _open_entry(self, inp: Input, path: Path, needed: frozenset[str]) -> Input | None:
        """`inp` read from the entry at `path`, its report replayed; None when the entry
        does not read (damaged, cut short, written by another DuckDB) or lacks a column of
        `needed`."""
        name = None
        try:
            name = self._attach(path, read_only=True)
            row = self.con.execute(
                f"SELECT records, bad_lines, warnings, messages, columns FROM {name}.meta"
            ).fetchone()
            if row is None:
                raise duckdb.InvalidInputException("an entry without its report")
        except QUERY_FAILED:
            if name is not None:
                self._detach(name)
            return None
        _, bad, warnings, messages, held = row
        if not needed <= frozenset(held):
            self._detach(name)
            return None
        for line in warnings:
            self.warn(line.replace(NAME_MARK, inp.name))
        self.report.bad_lines += int(bad)
        self.report.messages.extend(m.replace(NAME_MARK, inp.name) for m in messages)
        self.entries[inp.index] = path
        return Input(inp.index, inp.name, inp.path, inp.gzip, table=f"{name}.records")

    def _detach(self, name: str) -> None:
        with contextlib.suppress(*QUERY_FAILED):
            self.con.execute(f"DETACH {name}")

    def _forget(self, inp: Input) -> Input:
        """A damaged entry removed (built again once the command is done); the input,
        read instead: as it is when it reads clean, else its good lines. Its report is the
        entry's, given already (the same bytes: the same bad lines), so not said twice."""
        assert inp.table is not None
        self._detach(inp.table.split(".")[0])
        path = self.entries.pop(inp.index, None)
        if path is not None and self.cache is not None:
            self.cache.discard(path)
            self.wanted.append((inp.path, path.name.removesuffix(SUFFIX)))
        plain = Input(inp.index, inp.name, inp.path, inp.gzip)
        if self._clean_alone(plain):
            return plain
        self.object_bytes = LARGE_OBJECT_BYTES  # the failure may have been a long line
        return cleaned(plain, self.spool, lambda _: None, Report())

    def _drop_damaged(self) -> bool:
        """After a query failed: the inputs read from entries that do not read clean (a
        block failing DuckDB's checksum) read from the input instead, their entries
        removed and built again; whether there was one."""
        dropped = False
        out = []
        for inp in self.inputs:
            if inp.table is not None and not self._clean_alone(inp):
                inp = self._forget(inp)
                dropped = True
            out.append(inp)
        self.inputs = out
        return dropped

    def build(self, inp: Input, cols: dict[str, str], target: Path) -> None:
        """A cache entry of `inp` at `target` (cache_build, in the background): its records
        (`cols`, typed) in the table `records`, in input order, and in `meta` what reading
        it found and which columns it holds.

        Its bad lines are located as the engine always does (`cleaned`), but collected,
        with a mark for the input's name (the next command may name the same file
        otherwise: `./rec.jsonl`); a command reading the entry replays them.
        """
        name = self._attach(target, read_only=False)
        marked = Input(inp.index, NAME_MARK, inp.path, inp.gzip)
        warnings: list[str] = []
        found = Report()

        def create(src: Input, object_bytes: int) -> None:
            self.con.execute(
                f"CREATE OR REPLACE TABLE {name}.records AS SELECT * EXCLUDE ({SOURCE}, v) "
                f"FROM ({_scan([src], cols, object_bytes)})"
            )

        try:
            try:
                create(marked, self.object_bytes)
            except READ_ERRORS:
                clean = cleaned(marked, self.spool, warnings.append, found)
                create(clean, LARGE_OBJECT_BYTES)
            row = self.con.execute(f"SELECT count(*) FROM {name}.records").fetchone()
            self.con.execute(
                f"CREATE TABLE {name}.meta AS SELECT ?::BIGINT AS records, "
                f"?::BIGINT AS bad_lines, ?::VARCHAR[] AS warnings, ?::VARCHAR[] AS messages, "
                f"?::VARCHAR[] AS columns",
                [
                    0 if row is None else row[0],
                    found.bad_lines,
                    warnings,
                    found.messages,
                    [c for c in cols if c != "v"],
                ],
            )
            self.con.execute(f"CHECKPOINT {name}")
        except QUERY_FAILED as exc:
            raise AnalysisError(f"cannot read the records: {exc}") from None
        finally:
            self._detach(name)
