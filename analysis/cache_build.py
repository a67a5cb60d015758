"""The records cache's builder: `python -m mcp_layers_analysis.cache_build DIR (PATH KEY FD)…`.

Started detached by a command that found no entry for an input (cache.Cache.build_later),
after it has answered from the input itself. For each input it holds the entry's lock
(descriptor FD, inherited already locked) while it builds, and gives it up when the entry
is in place or cannot be. An input that changed since the command keyed it, or whose
entry another builder has put in place meanwhile, is skipped. It says nothing: its stdio
is /dev/null, and a failure only means the next command reads the input and tries again.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

#: Niceness: the user's next command comes before an entry that only makes it faster.
NICENESS = 10


def build_all(where: Path, jobs: Sequence[tuple[str, str, int]]) -> int:
    """Build the entry of each (input path, key, lock descriptor); how many were put in."""
    from . import cache
    from .duck import DuckEngine, duckdb_version
    from .load import Input
    from .table import read_columns

    engine = DuckEngine()
    store = cache.Cache(lambda _: None, where)
    built = 0
    try:
        for path, k, fd in jobs:
            try:
                if (where / f"{k}{cache.SUFFIX}").exists():
                    continue  # another builder's, finished meanwhile
                if cache.key(path, engine=duckdb_version()) != k:
                    continue  # changed since: the next command keys it afresh
                target = where / f".tmp-{uuid.uuid4().hex}{cache.SUFFIX}"
                try:
                    engine.build(Input(0, path, path, _gzip(path)), read_columns(), target)
                    built += store.store(target, k) is not None
                finally:
                    target.unlink(missing_ok=True)
                    Path(f"{target}.wal").unlink(missing_ok=True)
            except Exception:  # nobody to tell: the next command reads the input
                continue
            finally:
                cache.unlock(where, k, fd)
    finally:
        engine.close()
    return built


def _gzip(path: str) -> bool:
    from .inputs import GZIP_MAGIC

    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def main(argv: Sequence[str]) -> int:
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    where = Path(argv[0])
    rest = argv[1:]
    jobs = [(rest[i], rest[i + 1], int(rest[i + 2])) for i in range(0, len(rest) - 2, 3)]
    build_all(where, jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
