"""`--engine spark` gives the figures the default engine (DuckDB) gives, on the test recordings.

Spark runs in local mode, one session for the whole module, on the small fixtures. Skipped
where pyspark or Java is missing (`pip install mcp-layers[spark]`; Java 17+ on PATH).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from analysis_helpers import FIXTURES, LEGACY, SYNTHETIC, invoke
from mcp_layers_analysis import compare, inputs, retries, sessions, summary
from mcp_layers_analysis.duck import DuckEngine
from mcp_layers_analysis.filters import Filters

pytest.importorskip("pyspark")
if not shutil.which("java") and not __import__("os").environ.get("JAVA_HOME"):
    pytest.skip("no Java for Spark (scripts/os-deps installs it as root)", allow_module_level=True)

from mcp_layers_analysis.spark import SparkEngine

# Small on purpose: every figure is a Spark job. (BASELINE and real_demo.jsonl were checked
# equal too; the synthetic recording has every outcome, link and chain the others have.)
INPUTS = [SYNTHETIC, LEGACY, FIXTURES / "truncated.jsonl"]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkEngine]:
    engine = SparkEngine(master="local[2]")
    yield engine
    engine.close()
    engine.spark.stop()


def figures(engine: Any, path: Path) -> dict[str, Any]:
    engine.load(inputs.expand([str(path)]), None, lambda _: None)
    by = ("client",)
    f = Filters()
    out = {
        "summary": summary.rows(engine, by, f, top=5),
        "retries": list(retries.rows(retries.all_figures(engine, by, f))),
        "compare": compare.table(engine, ("client", "scenario"), f, top=5),
        "sessions": sessions.session_rows(engine, f),
    }
    first = out["sessions"][0][0] if out["sessions"] else "none"
    out["show"] = sessions.show_rows(engine, str(first), f, lambda _: None)
    filtered = Filters(methods=frozenset({"tools/call"}), since="2026-11-30T15:00:01.000Z")
    out["filtered"] = list(retries.rows(retries.all_figures(engine, by, filtered)))
    return out


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_spark_equals_duckdb(spark: SparkEngine, path: Path) -> None:
    duck = DuckEngine()
    try:
        expected = figures(duck, path)
    finally:
        duck.close()
    assert figures(spark, path) == expected


def test_the_cli_option(spark: SparkEngine) -> None:
    # The session above is reused (getOrCreate), so this costs no second JVM.
    got = invoke("summary", SYNTHETIC, "--engine", "spark", "--format", "json")
    assert got.exit_code == 0, got.stderr
    assert got.stdout == invoke("summary", SYNTHETIC, "--format", "json").stdout


MODEL_HANG = Path(__file__).parents[1] / "fixtures" / "lab_ws" / "codex-ws_model_hang.jsonl"


def test_hangs_on_spark(spark: SparkEngine) -> None:
    # hangs measures time with DuckDB's epoch_ms of a timestamp, which the translation to
    # Spark must read as milliseconds (unix_millis), not as a number to make a timestamp of.
    args = ("hangs", MODEL_HANG, "--format", "json")
    got = invoke(*args, "--engine", "spark")
    assert got.exit_code == 0, got.stderr
    assert got.stdout == invoke(*args).stdout
    assert '"waited_on":"model"' in got.stdout


def test_report_on_spark(spark: SparkEngine, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    got = invoke("report", MODEL_HANG, SYNTHETIC, "--engine", "spark", "-o", out)
    assert got.exit_code == 0, got.stderr
    page = out.read_text()
    assert "codex" in page and "tools/call" in page


#: A recording of another day than SYNTHETIC's.
OTHER_DAY = FIXTURES / "real_lab_copilot_none.jsonl"


def test_export_files_the_same_days_as_duckdb(spark: SparkEngine, tmp_path: Path) -> None:
    import duckdb

    def exported(*engine: str) -> list[tuple[Any, ...]]:
        out = tmp_path / ("pq-" + "-".join(engine or ("duckdb",)))
        got = invoke("export", "--parquet", out, SYNTHETIC, OTHER_DAY, "--no-cache", *engine)
        assert got.exit_code == 0, got.stderr
        return duckdb.sql(
            f"SELECT day, _src, count(*), max(ts) FROM read_parquet('{out}/**/*.parquet', "
            "hive_partitioning = true) GROUP BY ALL ORDER BY ALL"
        ).fetchall()

    duck = exported()
    assert len({row[0] for row in duck}) > 1
    assert exported("--engine", "spark") == duck
