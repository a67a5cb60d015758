"""`mcp-layers export --otlp-json`: recordings -> OTLP/JSON lines for OpenTelemetry.

Each output line is one `ExportTraceServiceRequest` in OTLP/JSON, what the Collector's
`otlpjsonfile` receiver ingests; replayed into a tracing backend, an old recording looks
as it would have looked live (`--set mcp_otlp_endpoint=…`): the same mapping
(`mcp_layers_core.otel_map`), the same ids (from the run's file name and each record's
id), the same encoder. Needs the `otel` extra.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO

from mcp_layers_core.otel_map import SpanData, SpanMapper, run_of
from mcp_layers_core.record import FORMAT_VERSION

from .errors import InputError, NewerRecordVersion
from .inputs import Source, expand

#: Spans per output line (the live exporter's batch size, and well under a collector's
#: default request size limit).
SPANS_PER_LINE = 512


@dataclass(slots=True)
class ExportReport:
    records: int = 0
    spans: int = 0
    lines: int = 0
    bad_lines: int = 0


def export_otlp_json(
    paths: list[str], out: IO[str], *, warn: Callable[[str], None]
) -> ExportReport:
    """Write the spans of the recordings `paths` name to `out`; raises InputError."""
    from mcp_layers_core import otel_sdk  # the optional SDK, only when exporting

    report = ExportReport()
    mappers: dict[str, SpanMapper] = {}
    pending: dict[str, list[SpanData]] = {}

    def flush(run: str) -> None:
        spans = pending.pop(run, [])
        if spans:
            request = otel_sdk.encode(otel_sdk.readable_spans(spans, run))
            out.write(otel_sdk.otlp_json(request) + "\n")
            report.lines += 1

    for source in expand(paths):
        run = run_of(os.path.basename(source.path)) if source.path else "stdin"
        mapper = mappers.setdefault(run, SpanMapper(run))
        for record in _records(source, report, warn):
            report.records += 1
            spans = mapper.map(record).spans
            report.spans += len(spans)
            batch = pending.setdefault(run, [])
            batch.extend(spans)
            if len(batch) >= SPANS_PER_LINE:
                flush(run)
    for run in list(pending):
        flush(run)
    return report


def _records(
    source: Source, report: ExportReport, warn: Callable[[str], None]
) -> Iterator[dict[str, object]]:
    for number, line in enumerate(_lines(source), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict) or not isinstance(record.get("id"), int):
            report.bad_lines += 1
            if report.bad_lines == 1:
                warn(f"mcp-layers: {source.name}:{number}: not a record; skipped")
            continue
        version = record.get("v")
        if isinstance(version, int) and version > FORMAT_VERSION:
            raise NewerRecordVersion(version, where=f"{source.name}:{number}")
        if not isinstance(record.get("ts"), str):
            report.bad_lines += 1
            continue
        yield record


def _lines(source: Source) -> Iterator[bytes]:
    if source.path is None:
        yield from sys.stdin.buffer
        return
    try:
        with gzip.open(source.path, "rb") if source.compressed else open(source.path, "rb") as f:
            yield from f
    except OSError as exc:
        raise InputError(f"{source.name}: {exc.strerror or exc}") from None
