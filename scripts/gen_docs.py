"""Write what the docs list that the code defines, from that definition.

    .venv/bin/python scripts/gen_docs.py          # rewrite every stale generated region
    .venv/bin/python scripts/gen_docs.py --check  # exit 1, naming the files, if one is stale

In README.md and docs/*.md only the regions between `<!-- generated: NAME -->` (or
`<!-- generated: NAME (a note) -->`) and `<!-- end generated -->` are replaced, so the
prose around them stays hand-written; `docs/record.schema.json` is written whole. The
regions (`REGIONS`):

- `fields`, `outcomes`, `notes` and the JSON Schema: from the record definition
  (`mcp_layers_core.record_docs`);
- `options`: the addon's options (`mcp_layers_core.options.SPECS`);
- `example_record`, `example_records`: records the addon's core really writes for a
  scripted session (`example_session`), fed to the sans-IO tracker event by event;
- `outcome_list`: the outcomes by layer (`mcp_layers_core.record.OUTCOMES`);
- `presets`, `presets_table`: the fault presets and actions (`mcp_layers_core.faults`);
- `cli_synopsis`: each command of `mcp-layers` (the click tree in analysis/cli.py), its
  usage line and short help.

tests/unit/test_gen_docs.py runs this in check mode: whoever changes one of those
definitions (adds a command, a preset, a record field) is told to run it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
from mcp_layers_analysis.cli import cli
from mcp_layers_core import faults, options, record_docs
from mcp_layers_core.events import (
    Event,
    OtherRequest,
    PostReceived,
    ResponseBody,
    ResponseStarted,
    StreamChunk,
    StreamEnded,
)
from mcp_layers_core.record import OUTCOMES, Layer
from mcp_layers_core.tracker import Tracker, records_of

ROOT = Path(__file__).resolve().parent.parent
COMMAND = ".venv/bin/python scripts/gen_docs.py"

#: The files with generated regions (relative to the root).
DOCS = ("README.md", "docs/record-format.md", "docs/faults.md", "docs/cli.md")
SCHEMA = "docs/record.schema.json"


# -- example records: a scripted session through the real core -----------------------------

SERVER = "127.0.0.1:8931"
PEER = "127.0.0.1:52814"
CLIENT = {"name": "example-agent", "version": "1.4.2"}
USER_AGENT = "example-agent/1.4.2 (node)"
PROTOCOL = "2025-11-25"
SESSION_ID = "3f0c5a8e-92d4-4b7e-b1a6-5c2e9d7f4a10"  # what the server issues; recorded hashed
START = 1_796_137_371.204  # 2026-12-01T15:02:51.204Z


def _json(msg: object) -> bytes:
    return json.dumps(msg, separators=(",", ":")).encode()


def _sse(msg: object, event_id: str, retry_ms: int | None = None) -> bytes:
    retry = f"retry: {retry_ms}\n" if retry_ms is not None else ""
    return f"id: {event_id}\n{retry}event: message\ndata: {_json(msg).decode()}\n\n".encode()


class _Session:
    """A tracker and a clock: feeds events, collects the records it writes."""

    def __init__(self) -> None:
        self.tracker = Tracker()
        self.now = START
        self.n = 0
        self.records: list[dict[str, Any]] = []

    def at(self, ms: float) -> float:
        self.now += ms / 1000
        return self.now

    def feed(self, event: Event) -> None:
        self.records += records_of(self.tracker.handle(event))

    def headers(self, session: bool = True, sse: bool = True) -> dict[str, str]:
        h = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream" if sse else "application/json",
            "user-agent": USER_AGENT,
        }
        if session:
            h |= {"mcp-session-id": SESSION_ID, "mcp-protocol-version": PROTOCOL}
        return h

    def post(self, msg: object, after_ms: float, session: bool = True) -> str:
        self.n += 1
        flow = f"f{self.n}"
        body = _json(msg)
        self.feed(
            PostReceived(
                flow, self.at(after_ms), SERVER, PEER, self.headers(session), body, len(body)
            )
        )
        return flow

    def answer_json(
        self, flow: str, status: int, msg: object, after_ms: float, **headers: str
    ) -> None:
        raw = _json(msg) if msg is not None else b""
        head = {"content-type": "application/json", **headers} if msg is not None else headers
        self.feed(ResponseStarted(flow, self.at(after_ms), status, head))
        self.feed(ResponseBody(flow, self.at(0.3), raw, len(raw)))

    def answer_sse(self, flow: str, chunks: list[bytes], after_ms: float) -> None:
        head = {"content-type": "text/event-stream", "mcp-session-id": SESSION_ID}
        self.feed(ResponseStarted(flow, self.at(after_ms), 200, head))
        for chunk in chunks:
            self.feed(StreamChunk(flow, self.at(1.1), chunk))
        self.feed(StreamEnded(flow, self.at(0.4)))


def example_session() -> list[dict[str, Any]]:
    """The records of one scripted session, as the addon would write them.

    A client initialises; opens the standby GET stream; lists the tools (`add_note` has
    side effects); calls `add_note`, gets a 503 with `Retry-After: 1`, waits and calls it
    again with a new JSON-RPC id (a reissue of an unsafe tool); and ends the session with
    DELETE, which ends the GET stream too.
    """
    s = _Session()
    init = s.post(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": CLIENT},
        },
        0,
        session=False,
    )
    server_info = {"name": "notes-server", "version": "0.9.0"}
    s.answer_json(
        init,
        200,
        {
            "jsonrpc": "2.0",
            "id": 0,
            "result": {
                "protocolVersion": PROTOCOL,
                "capabilities": {"tools": {}},
                "serverInfo": server_info,
            },
        },
        6.2,
        **{"mcp-session-id": SESSION_ID},
    )
    note = s.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, 3.1)
    s.answer_json(note, 202, None, 2.4)
    s.n += 1
    stream = f"f{s.n}"
    get_headers = {
        "accept": "text/event-stream",
        "user-agent": USER_AGENT,
        "mcp-session-id": SESSION_ID,
        "mcp-protocol-version": PROTOCOL,
    }
    s.feed(OtherRequest(stream, s.at(1.8), "GET", SERVER, PEER, get_headers))
    s.feed(
        ResponseStarted(
            stream,
            s.at(2.0),
            200,
            {"content-type": "text/event-stream", "cache-control": "no-cache"},
        )
    )
    s.feed(StreamChunk(stream, s.at(0.5), b"id: 0\nretry: 3000\ndata: \n\n"))
    tools = s.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, 4.0)
    add_note = {
        "name": "add_note",
        "description": "Append a note.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "annotations": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False},
    }
    s.answer_sse(
        tools,
        [_sse({"jsonrpc": "2.0", "id": 1, "result": {"tools": [add_note]}}, "1", 3000)],
        5.3,
    )
    call = {"name": "add_note", "arguments": {"text": "buy milk"}}
    first = s.post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}, 912.6)
    s.answer_json(
        first,
        503,
        {"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "upstream busy"}},
        3.3,
        **{"retry-after": "1"},
    )
    again = s.post({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}, 1251.3)
    s.answer_sse(
        again,
        [
            _sse(
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "result": {"content": [{"type": "text", "text": "noted"}], "isError": False},
                },
                "2",
                3000,
            )
        ],
        7.9,
    )
    s.n += 1
    delete = f"f{s.n}"
    delete_headers = {k: v for k, v in get_headers.items() if k != "accept"}
    s.feed(OtherRequest(delete, s.at(2210.4), "DELETE", SERVER, PEER, delete_headers))
    s.feed(ResponseStarted(delete, s.at(1.9), 200, {}))
    s.feed(ResponseBody(delete, s.at(0.2), b"", 0))
    s.feed(StreamEnded(stream, s.at(0.6)))
    return s.records


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


def readme_example() -> dict[str, Any]:
    """The README's one record: the retried tool call."""
    (record,) = (r for r in example_session() if r["retryOrigin"] != "none")
    return record


def example_record() -> str:
    return f"```json\n{_line(readme_example())}\n```"


def example_records() -> str:
    lines = "\n".join(_line(r) for r in example_session())
    return f"```jsonl\n{lines}\n```"


# -- outcomes -------------------------------------------------------------------------------


def outcome_list() -> str:
    """The README's sentence: every outcome by layer (outer to inner), in the classifier's order."""
    groups = "; ".join(
        f"{_words([o.value for o, i in OUTCOMES.items() if i.layer == layer])} ({layer.value})"
        for layer in Layer
        if any(i.layer == layer for i in OUTCOMES.values())
    )
    return textwrap.fill(
        f"Outcomes: {groups}.", width=90, break_long_words=False, break_on_hyphens=False
    )


# -- fault presets ----------------------------------------------------------------------------


def _words(names: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def presets() -> str:
    """The README's sentence: every preset and every action, by name."""
    return "\n".join(
        textwrap.fill(line, width=90, break_long_words=False, break_on_hyphens=False)
        for line in (
            f"Presets: {_words(faults.preset_names())}.",
            f"Actions: {_words(list(faults.ACTIONS))}.",
        )
    )


def presets_table() -> str:
    rows = ["| preset | rules |", "|---|---|"]
    for name, texts in faults.PRESETS.items():
        cell = "<br>".join(f"`{t}`" for t in texts) if texts else "(no rules)"
        rows.append(f"| `{name}` | {record_docs._cell(cell)} |")
    return "\n".join(rows)


# -- the CLI ----------------------------------------------------------------------------------


def _commands() -> Iterator[tuple[str, click.Command]]:
    group = cli
    assert isinstance(group, click.Group)
    ctx = click.Context(group, info_name="mcp-layers")
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is not None and not command.hidden:
            yield name, command


def cli_synopsis() -> str:
    """Each command's usage line (from click), its short help indented under it."""
    parent = click.Context(cli, info_name="mcp-layers")
    rows: list[tuple[str, str]] = []
    for name, command in _commands():
        ctx = click.Context(command, info_name=name, parent=parent)
        usage = " ".join(command.collect_usage_pieces(ctx))
        rows.append((f"mcp-layers {name} {usage}".rstrip(), command.get_short_help_str(200)))
    lines = [f"{usage}\n    {short}" for usage, short in rows]
    return "```\n" + "\n".join(lines) + "\n```"


# -- regions ----------------------------------------------------------------------------------

REGIONS: dict[str, Callable[[], str]] = {
    **record_docs.REGIONS,
    "options": options.markdown_table,
    "example_record": example_record,
    "example_records": example_records,
    "outcome_list": outcome_list,
    "presets": presets,
    "presets_table": presets_table,
    "cli_synopsis": cli_synopsis,
}

_REGION = re.compile(
    r"(<!-- generated: (\w+)(?: \([^)\n]*\))? -->\n)(.*?)(<!-- end generated -->)", re.DOTALL
)


def region_names(doc: str) -> list[str]:
    return [m.group(2) for m in _REGION.finditer(doc)]


def render(doc: str) -> str:
    """`doc` with every generated region replaced by what the code says now."""

    def fill(m: re.Match[str]) -> str:
        make = REGIONS.get(m.group(2))
        if make is None:
            raise ValueError(
                f"unknown generated region {m.group(2)!r}; known: {', '.join(REGIONS)}"
            )
        return f"{m.group(1)}{make()}\n{m.group(4)}"

    return _REGION.sub(fill, doc)


def targets(root: Path = ROOT) -> dict[Path, str]:
    """Every generated file, with the text it should have."""
    out = {root / SCHEMA: record_docs.schema_text()}
    for name in DOCS:
        path = root / name
        out[path] = render(path.read_text(encoding="utf-8"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout")
    args = parser.parse_args(argv)
    wanted = targets(args.root)
    stale = [p for p, text in wanted.items() if not p.exists() or p.read_text("utf-8") != text]
    if args.check:
        for p in stale:
            print(f"{p.relative_to(args.root)}: stale; run {COMMAND}", file=sys.stderr)
        return 1 if stale else 0
    for p in stale:
        p.write_text(wanted[p], encoding="utf-8")
        print(f"wrote {p.relative_to(args.root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
