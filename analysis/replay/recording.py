"""Reading a recording for replay: every line must be a record, or the replay would serve
a conversation with holes in it. A bad line stops it, named by file and line."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mcp_layers_analysis.inputs import TruncatedStream, expand, open_stream

from .script import ScriptError


def read(paths: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """Every record of `paths` (files, directories, globs), with its `path:line`."""
    records: list[tuple[str, dict[str, Any]]] = []
    for source in expand(paths):
        outer, stream = open_stream(source)
        with outer, stream:
            try:
                data = stream.read()
            except TruncatedStream:
                raise ScriptError(f"{source.name}: the gzip stream is cut short") from None
            except (EOFError, OSError) as exc:
                raise ScriptError(f"{source.name}: cannot read it: {exc}") from None
        lines = data.split(b"\n")
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"{source.name}:{number}"
            try:
                record = json.loads(line)
            except ValueError:
                last = number == len(lines)  # no newline after it: the writer was cut off
                what = "a line cut short (the recording was truncated)" if last else "not JSON"
                raise ScriptError(f"{where}: {what}") from None
            if not isinstance(record, dict) or record.get("v") != 1:
                raise ScriptError(f"{where}: not a v1 mcp-layers record")
            records.append((where, record))
    return records
