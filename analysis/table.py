"""The `records` table: its columns and their SQL types, derived from the record definition.

The record is defined once, in the core (`mcp_layers_core.record.FIELDS`); this module only
spells each declared type in SQL (DuckDB's dialect; sqlglot translates it for the others).
Nested objects are STRUCTs, lists are arrays, ids as sent and redacted bodies are JSON.

Two columns are the reader's, not the record's: `_src`, the input a row came from (0, 1, …
in the order the inputs were given), and `_seq`, the row's place in the whole input (lines
in input order). Figures that follow links between records (retries, sessions) read the
input in that order.
"""

from __future__ import annotations

from typing import Final

from mcp_layers_core import record
from mcp_layers_core.record import AnyJson, Bool, Enum, FieldType, Int, ListOf, Num, Obj, RpcId, Str

#: The table every figure is a query over.
TABLE: Final = "records"

#: The reader's own columns: input number and order in the input.
SOURCE: Final = "_src"
SEQUENCE: Final = "_seq"

#: Dialects `mcp-layers sql` prints (sqlglot's names).
DIALECTS: Final = ("duckdb", "spark", "clickhouse", "bigquery", "trino")


def sql_type(t: FieldType) -> str:
    """A declared field type as a DuckDB type."""
    if isinstance(t, Int):
        return "BIGINT"
    if isinstance(t, Num):
        return "DOUBLE"
    if isinstance(t, Str | Enum):
        return "VARCHAR"
    if isinstance(t, Bool):
        return "BOOLEAN"
    if isinstance(t, ListOf):
        return f"{sql_type(t.item)}[]"
    if isinstance(t, RpcId | AnyJson):
        return "JSON"
    if isinstance(t, Obj):
        members = ", ".join(f'"{m.name}" {sql_type(m.type)}' for m in t.members)
        return f"STRUCT({members})"
    raise AssertionError(t)


#: Every record field and its DuckDB type, in record order.
COLUMNS: Final[dict[str, str]] = {f.name: sql_type(f.type) for f in record.FIELDS}

#: Fields that older v1 recordings lack: a missing key reads as null either way.
LATER: Final = frozenset(f.name for f in record.FIELDS if not f.always)


def read_columns(names: tuple[str, ...] | None = None) -> dict[str, str]:
    """The `columns=` a JSON reader is given: the named fields (all by default), typed.

    `v` is read as JSON, so that `"v": "1"` (a string) is told apart from the number 1.
    """
    chosen = COLUMNS if names is None else {n: COLUMNS[n] for n in COLUMNS if n in names}
    return {n: ("JSON" if n == "v" else t) for n, t in chosen.items()}


def column_type(name: str, dialect: str) -> str:
    """A column's type in `dialect` (Spark has no JSON type: JSON text is a string)."""
    import sqlglot  # only here: reading with DuckDB never needs it

    t = COLUMNS[name]
    if dialect == "spark":
        t = t.replace("JSON", "VARCHAR")
    return sqlglot.exp.DataType.build(t, dialect="duckdb").sql(dialect)


def ddl(dialect: str = "duckdb") -> str:
    """CREATE TABLE for the records table (with `_src` and `_seq`) in `dialect`."""
    import sqlglot

    big = sqlglot.exp.DataType.build("BIGINT").sql(dialect)
    cols = [
        *(f"{n} {column_type(n, dialect)}" for n in COLUMNS),
        f"{SOURCE} {big}",
        f"{SEQUENCE} {big}",
    ]
    return f"CREATE TABLE {TABLE} (\n  " + ",\n  ".join(cols) + "\n)"
