"""`mcp-layers report`: the figures of every command as one self-contained HTML page.

`data` gathers them from the engine (the commands' queries and a few of the report's
own), `page` lays them out around hand-made SVG charts (`svg`, `timeline`), with the page's
stylesheet and script inlined: one file that opens offline from `file://`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from mcp_layers_analysis.filters import Filters
from mcp_layers_analysis.load import Engine

from . import queries
from .data import DEFAULT_LIMITS, Limits, compare_only, gather, halved
from .page import SECTIONS, render

__all__ = ["COLUMNS", "SECTIONS", "Limits", "columns_to_read", "matching", "write", "write_from"]

COLUMNS = queries.COLUMNS


def columns_to_read(engine: str) -> tuple[str, ...]:
    """The columns a command writing the report has `engine` read: with DuckDB the
    overview's only, and the report reads the rest itself, of as many records as it shows
    them for (`data.gather`); another engine, all it reads."""
    return queries.OVERVIEW_COLUMNS if engine == "duckdb" else queries.COLUMNS


def matching(engine: Engine, filters: Filters) -> int:
    """How many records the filters let through."""
    return int(engine.rows(queries.matching(filters))[0][0])


def write(
    engine: Engine,
    filters: Filters,
    target: Path,
    *,
    records: int,  # that match the filters
    inputs: Sequence[str],
    title: str = "mcp-layers report",
    sections: Sequence[str] = SECTIONS,
    limits: Limits = DEFAULT_LIMITS,
    made: datetime | None = None,
) -> int:
    """Write the page for the records in `engine` to `target`; returns its size in bytes.
    `made`: the time the page says it was made (default: now)."""
    if tuple(sections) == ("compare",):
        data = compare_only(engine, filters, records)
    else:
        data = gather(engine, filters, records, limits)
    page = render(data, title=title, inputs=inputs, only=sections, made=made).encode("utf-8")
    # The limits bound what is drawn in records; this bounds the page in bytes (a session
    # list of long names, timelines of many sessions): half as many timelines and rows
    # until it fits, and the page says what it left out.
    while len(page) > limits.page_bytes:
        smaller = halved(data)
        if smaller is None:
            break
        data = smaller
        page = render(data, title=title, inputs=inputs, only=sections, made=made).encode("utf-8")
    target.write_bytes(page)
    return len(page)


def write_from(
    paths: Sequence[str], target: Path, *, title: str, sections: Sequence[str] = SECTIONS
) -> int:
    """The page for the recordings under `paths` (read by DuckDB, every record), for
    callers outside the CLI (the lab's matrix). Raises AnalysisError or InputError."""
    from mcp_layers_analysis.duck import DuckEngine
    from mcp_layers_analysis.inputs import expand

    engine = DuckEngine()
    try:
        report = engine.load(expand(paths), queries.COLUMNS, lambda _: None)
        return write(
            engine, Filters(), target, records=report.records, inputs=paths, title=title,
            sections=sections,
        )  # fmt: skip
    finally:
        engine.close()
