"""Run one `mcp-layers` command and write down what it asked DuckDB, to ask DuckDB the same
questions directly (`duckdb_replay.py`): the columns the command read and whether into a
table (`load`), then every statement, in order.

    python benchmarks/sql_trace.py LOG verdicts rec.jsonl --no-cache

The log is JSON lines: {"spool": the engine's temporary directory}, {"load": {"columns":
{name: type}, "shared": bool}}, then
{"sql": "..."} per query; and {"raw": "..."} for every statement the command sent its
connection, its reading of the inputs included (`duckdb_replay.py --verbatim` runs
those, for `report`, which builds tables of its own). Run with `--no-cache`: from a cache
entry the statements are the same, the table they read is not.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from mcp_layers_analysis import duck
from mcp_layers_analysis.cli import cli
from mcp_layers_analysis.inputs import Source


def main(log_path: str, argv: list[str]) -> None:
    log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 (closed after the command)

    def note(entry: dict[str, Any]) -> None:
        log.write(json.dumps(entry) + "\n")
        log.flush()

    load, rows, table = duck.DuckEngine.load, duck.DuckEngine.rows, duck.DuckEngine.table
    init = duck.DuckEngine.__init__

    class Connection:
        """The engine's connection, every statement written down on its way."""

        def __init__(self, con: Any) -> None:
            self.con = con

        def execute(self, sql: str, *args: Any) -> Any:
            note({"raw": sql})
            return self.con.execute(sql, *args)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.con, name)

    def traced_init(self: duck.DuckEngine, **kwargs: Any) -> None:
        init(self, **kwargs)
        # Where the engine keeps its files (its spool database among them): gone once the
        # command has run, so a replay puts them in a directory of its own.
        note({"spool": str(self.spool)})
        self.con = Connection(self.con)  # type: ignore[assignment]

    def traced_load(
        self: duck.DuckEngine,
        sources: Sequence[Source],
        columns: tuple[str, ...] | None,
        warn: Any,
        *,
        shared: bool = True,
    ) -> Any:
        report = load(self, sources, columns, warn, shared=shared)
        note({"load": {"columns": self.cols, "shared": shared}})
        return report

    def traced_rows(self: duck.DuckEngine, sql: str) -> Any:
        note({"sql": sql})
        return rows(self, sql)

    def traced_table(self: duck.DuckEngine, sql: str) -> Any:
        note({"sql": sql})
        return table(self, sql)

    duck.DuckEngine.__init__ = traced_init  # type: ignore[method-assign]
    duck.DuckEngine.load = traced_load  # type: ignore[method-assign]
    duck.DuckEngine.rows = traced_rows  # type: ignore[method-assign]
    duck.DuckEngine.table = traced_table  # type: ignore[method-assign]
    try:
        cli(args=argv, prog_name="mcp-layers", standalone_mode=False)
    except SystemExit:
        pass  # an exit status that is an answer (verdicts' 3, hangs' 1)
    finally:
        log.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
