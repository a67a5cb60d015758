"""Run one `mcp-layers` command and write down what it asked DuckDB, to ask DuckDB the same
questions directly (`duckdb_replay.py`): the columns the command read and whether into a
table (`load`), then every statement, in order.

    python benchmarks/sql_trace.py LOG verdicts rec.jsonl --no-cache

The log is JSON lines: {"load": {"columns": {name: type}, "shared": bool}}, then
{"sql": "..."} per statement. Run with `--no-cache`: from a cache entry the statements
are the same, the table they read is not.
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
