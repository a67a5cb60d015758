"""DuckDB asked directly what an `mcp-layers` command asked it (`sql_trace.py`'s log): the
JSONL read with the columns the command read, as a table when it read them into one (or a
view), with the reader's `_src` and `_seq`; then every statement, its rows fetched.

    python benchmarks/duckdb_replay.py rec.jsonl LOG
    python benchmarks/duckdb_replay.py --verbatim LOG

`--verbatim`: every statement the command sent its connection, as it sent them (its own
reading of the inputs, the tables `report` builds): DuckDB without our Python around it.

Plain `duckdb` and the standard library only: what a user asking DuckDB the same questions
would run. Prints how many rows the statements returned.
"""

import json
import os
import sys
import tempfile

import duckdb

path, log = sys.argv[1].replace("'", "''"), sys.argv[2]
with open(log, encoding="utf-8") as f:
    entries = [json.loads(line) for line in f]
if sys.argv[1] == "--verbatim":
    con = duckdb.connect()
    # The files the command kept in its temporary directory (its spool database), in one
    # of this run's own.
    spools = [e["spool"] for e in entries if "spool" in e]
    with tempfile.TemporaryDirectory(prefix="duckdb-replay-") as here:
        for n in range(len(spools)):
            os.mkdir(f"{here}/{n}")
        for e in entries:
            if "raw" in e:
                sql = e["raw"]
                for n, spool in enumerate(spools):
                    sql = sql.replace(spool, f"{here}/{n}")
                cur = con.execute(sql)
                if cur.description:
                    cur.fetchall()
        con.close()
    sys.exit(0)
load = next(e["load"] for e in entries if "load" in e)
columns = "{" + ", ".join(f"'{n}': '{t}'" for n, t in load["columns"].items()) + "}"
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
what = "TEMP TABLE" if load["shared"] else "TEMP VIEW"
con.execute(
    f"CREATE {what} records AS SELECT 0 AS _src, *, row_number() OVER () - 1 AS _seq "
    f"FROM read_json('{path}', format='newline_delimited', columns={columns})"
)
print(sum(len(con.execute(e["sql"]).fetchall()) for e in entries if "sql" in e))
