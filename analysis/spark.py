"""`--engine spark`: the same queries on Apache Spark (`pip install mcp-layers[spark]`).

The queries are the ones DuckDB runs, translated by sqlglot. The table is read with the
schema the record definition gives (`table.ddl("spark")`), never inferred. Where Spark
runs: `--spark-master` (`local[*]`, `spark://…`, or `sc://…` for Spark Connect), else
`SPARK_REMOTE` (Spark Connect) or `MASTER`, else `local[*]`. Inputs are paths Spark can
read: local files and, on a cluster, whatever file systems it is configured for.

Bad lines: a strict read (`FAILFAST`) either succeeds, and every line was a record, or an
input is checked line by line in Python as with DuckDB (local inputs only).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from .errors import AnalysisError
from .inputs import Source
from .load import Input, Report, Row, Warn, cleaned, on_disk
from .queries import DAY, translate
from .table import COLUMNS, SEQUENCE, SOURCE, TABLE, column_type

#: Rows of one input get `_seq` = input number × this + Spark's increasing row id.
SOURCE_STRIDE: Final = 1 << 43


def schema() -> str:
    """The records' columns as a Spark DDL schema string (no reader's columns)."""
    return ", ".join(f"{n} {column_type(n, 'spark')}" for n in COLUMNS)


class SparkEngine:
    """Reads the inputs into a Spark DataFrame, the `records` view, and answers queries."""

    dialect: Final = "spark"

    def __init__(self, *, master: str | None = None) -> None:
        from pyspark.sql import SparkSession

        builder: Any = SparkSession.builder.appName("mcp-layers")
        remote = master if master and master.startswith("sc://") else None
        remote = remote or (None if master else os.environ.get("SPARK_REMOTE"))
        if remote:
            builder = builder.remote(remote)
        else:
            builder = builder.master(master or os.environ.get("MASTER") or "local[*]")
            builder = (
                builder.config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.shuffle.partitions", "8")
            )
        self.spark = builder.config("spark.sql.session.timeZone", "UTC").getOrCreate()
        if not remote:
            self.spark.sparkContext.setLogLevel("ERROR")
        self.tmp = tempfile.TemporaryDirectory(prefix="mcp-layers-spark-")
        self.spool = Path(self.tmp.name)
        self.schema = schema()

    def close(self) -> None:
        self.spark.catalog.dropTempView(TABLE)
        self.tmp.cleanup()

    def _frame(self, inp: Input) -> Any:
        from pyspark.sql import functions as F

        reader = self.spark.read.schema(self.schema).option("mode", "FAILFAST")
        if inp.gzip and not inp.path.endswith(".gz"):
            reader = reader.option("compression", "gzip")
        df = reader.json(inp.path)
        return df.withColumn(SOURCE, F.lit(inp.index).cast("long")).withColumn(
            SEQUENCE, F.lit(inp.index * SOURCE_STRIDE) + F.monotonically_increasing_id()
        )

    def _clean_alone(self, inp: Input) -> bool:
        from pyspark.sql import functions as F

        try:
            df = self._frame(inp)
            # Every column is read (hashed), so that FAILFAST meets every line whole.
            row = df.select(
                F.count(F.when(F.expr("v IS NULL OR v <> 1"), 1)),
                F.sum(F.hash(*COLUMNS)),
            ).first()
            return row is not None and row[0] == 0
        except Exception:  # Spark raises its own (JVM) errors for a line it cannot read
            return False

    def load(
        self,
        sources: Sequence[Source],
        columns: tuple[str, ...] | None,
        warn: Warn,
        *,
        shared: bool = True,
    ) -> Report:
        """The inputs as the cached `records` view (Spark reads once for every query)."""
        report = Report()
        inputs = on_disk(sources, self.spool)
        ready = [
            inp if self._clean_alone(inp) else cleaned(inp, self.spool, warn, report)
            for inp in inputs
        ]
        frames = [self._frame(inp) for inp in ready]
        df = frames[0]
        for other in frames[1:]:
            df = df.unionByName(other)
        df = df.cache()
        df.createOrReplaceTempView(TABLE)
        report.records = int(df.count())
        return report

    def table(self, sql: str) -> tuple[list[str], list[Row]]:
        """A user's query (DuckDB's dialect): its column names and rows."""
        try:
            df = self.spark.sql(translate(sql, "spark"))
            return list(df.columns), [tuple(r) for r in df.collect()]
        except Exception as exc:  # the JVM's errors, as Python sees them
            raise AnalysisError(f"Spark query failed: {str(exc).splitlines()[0]}") from None

    def export_parquet(self, directory: str) -> list[Path]:
        """The records as Parquet under `directory`, one folder per day. Spark names its
        files itself: none is returned (a Spark command is never kept as an answer)."""
        df = self.spark.sql(translate(f"SELECT *, {DAY} AS day FROM {TABLE}", "spark"))
        df.write.mode("append").partitionBy("day").parquet(directory)
        return []

    def rows(self, sql: str) -> list[Row]:
        text = translate(sql, "spark")
        try:
            return [tuple(r) for r in self.spark.sql(text).collect()]
        except Exception as exc:  # the JVM's errors, as Python sees them
            first = re.split(r"\n", str(exc), maxsplit=1)[0]
            raise AnalysisError(f"Spark query failed: {first}") from None


__all__ = ["COLUMNS", "SparkEngine", "schema"]
