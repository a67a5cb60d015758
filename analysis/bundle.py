"""`mcp-layers bundle`: what a person attaches to an issue in a client's tracker, as one zip.

The command (`cli.bundle`) runs the engines and the existing figures (the report, the
verdicts, the hang forensics, `queries.facts` and `queries.failing`); this module only
picks the records' lines and assembles what they gave into the zip's members:

- `records.jsonl` (or `records-01.jsonl`, … one per input that holds some): the chosen
  records, byte for byte as recorded (records are redacted at capture);
- `report.html`: `mcp-layers report` over those records;
- `verdicts.json`, `verdicts.txt`: the verdicts, as `--format json` and the table;
- `hangs.json`: the hang forensics, what the client did after each failure or cut stream;
- `SUMMARY.md`: the few lines to paste into the issue.

Nothing comes from the environment but the versions of mcp-layers and mitmproxy: no host
name, user, path or variable. The zip is deterministic (members sorted, fixed times and
modes), so the same records give the same bytes.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from .forensics import STALL_MS, Aftermath, phrase
from .inputs import Source, TruncatedStream, open_stream, stream_blocks
from .records import CHECKER, check_line
from .render import Cell, OutputFormat, render
from .verdicts import RULE, Level, Verdict

#: Every member's time in the zip: the earliest a zip can say (1980-01-01), so that the
#: bytes do not depend on when the bundle was made.
ZIP_TIME: Final = (1980, 1, 1, 0, 0, 0)

#: Failed exchanges SUMMARY.md lists (the rest are in the records and the report).
MAX_FAILING: Final = 20

#: Sessions (or clients) an unknown `--session` (or `--client`) lists.
MAX_LISTED: Final = 20

#: The verdicts SUMMARY.md cites: those where a client missed what the spec asks.
CITED: Final = (Verdict.FAIL, Verdict.WARNING)


@dataclass(frozen=True, slots=True)
class Subject:
    """What the bundle is about: `--session ID` or `--client NAME[@VERSION]`."""

    option: str  # "session" or "client"
    value: str

    def describe(self) -> str:
        return f"{self.option} {self.value}"


@dataclass(frozen=True, slots=True)
class Versions:
    mcp_layers: str
    mitmproxy: str  # "not installed" when it is not


@dataclass(frozen=True, slots=True)
class Facts:
    """`queries.facts` over the bundled records."""

    clients: list[str]
    servers: list[str]
    protocols: list[str]
    sessions: list[str]
    records: int
    first: str | None
    last: str | None


@dataclass(frozen=True, slots=True)
class Failing:
    """One failed request, as `queries.failing` gives it."""

    ts: str | None
    id: int
    method: str | None
    tool: str | None
    statuses: list[int]
    outcome: str | None
    layer: str | None
    error_code: int | None


# --------------------------------------------------------------------- the records


def wanted(subject: Subject, test: Callable[[Any], bool] | None) -> Callable[[Any], bool]:
    """A test of one record (as `records.check_line` builds it): of the session, or one
    `test` (the `--client` filter's own predicate, `Filters.predicate`) lets through."""
    if subject.option == "session":
        session = subject.value
        return lambda r: r.session == session
    assert test is not None
    return test


def needle(subject: Subject) -> bytes | None:
    """Bytes every line of the subject holds, to skip the others unparsed: the value as
    JSON writes it, when it needs no escaping (else None: every line is parsed)."""
    text = subject.value if subject.option == "session" else subject.value.split("@")[0]
    if not text or any(c in text for c in '"\\') or any(ord(c) < 0x20 for c in text):
        return None
    return text.encode()


def chosen_lines(
    sources: Sequence[Source], keep: Callable[[Any], bool], hint: bytes | None
) -> list[bytes]:
    """Per input, its lines that are records `keep` accepts, as recorded (each ending in a
    newline; b"" for an input that has none). Lines that are not records are left out
    (the engine has already reported them)."""
    out: list[bytes] = []
    for source in sources:
        assert source.path is not None, "stdin is spooled to a file first"
        kept: list[bytes] = []
        raw, stream = open_stream(source)
        with raw, stream:
            try:
                for _, data, _final in stream_blocks(stream):
                    for line in data.split(b"\n"):
                        if not line.strip() or (hint is not None and hint not in line):
                            continue
                        record = check_line(line, CHECKER, torn=False)
                        if not isinstance(record, str) and keep(record):
                            kept.append(line + b"\n")
            except TruncatedStream:
                pass  # read up to the cut, as the engine did (it said so)
        out.append(b"".join(kept))
    return out


def record_members(per_input: Sequence[bytes]) -> dict[str, bytes]:
    """The records' members: `records.jsonl`, or one per input that holds some, in input
    order, when there are several (record ids restart in each run)."""
    nonempty = [data for data in per_input if data]
    if len(nonempty) <= 1:
        return {"records.jsonl": b"".join(nonempty)}
    return {f"records-{i:02d}.jsonl": data for i, data in enumerate(nonempty, 1)}


# --------------------------------------------------------------------- the parts


def table_text(headers: Sequence[str], rows: Sequence[Sequence[Cell]], fmt: OutputFormat) -> str:
    out = io.StringIO()
    render(headers, rows, fmt, out, color=False)
    return out.getvalue()


def hangs_json(found: Sequence[Aftermath]) -> bytes:
    """The hang forensics: per incident (a failed request, a cut stream), what the client
    did next and after how long; `stalled` when it stayed silent `STALL_MS` or more."""
    items = [
        {
            "id": a.id,
            "kind": a.kind,
            "incident": a.incident(),
            "then": phrase(a),
            "silenceMs": a.silence_ms,
            "stalled": a.stalled,
            "nextId": a.next_id,
            "inFlight": a.in_flight or [],
        }
        for a in found
    ]
    return orjson.dumps(items, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def _listed(values: Sequence[str], none: str = "not recorded") -> str:
    return ", ".join(f"`{v}`" for v in values) if values else none


def _failing_line(f: Failing) -> str:
    call = " ".join(x for x in (f.method, f.tool) if x) or "?"
    statuses = " ".join(str(s) for s in f.statuses) or "no response"
    code = "" if f.error_code is None else f", JSON-RPC error {f.error_code}"
    layer = f" at {f.layer}" if f.layer else ""
    return f"- `{f.ts or '?'}` #{f.id} `{call}`: HTTP {statuses}, {f.outcome or '?'}{layer}{code}"


def _cited(rows: Sequence[Sequence[str | None]]) -> Iterator[str]:
    for client, check, verdict, level, spec, evidence in rows:
        if verdict not in CITED or check is None:
            continue
        rule = RULE[check]
        word = "broke a MUST" if verdict == Verdict.FAIL else "missed a SHOULD"
        if verdict == Verdict.WARNING and rule.level == Level.MUST:
            word = "missed the softer part of a MUST"
        yield f"- **{verdict}** `{check}` ({client}, {word}): {rule.requirement}"
        yield f"  - evidence: {evidence or '(none)'}"
        yield f"  - spec ({level}, {spec}), {rule.url}:"
        yield f"    > {rule.quote}"


def summary_md(
    subject: Subject,
    facts: Facts,
    versions: Versions,
    failing: Sequence[Failing],
    failing_total: int,
    verdict_rows: Sequence[Sequence[str | None]],
    hangs: Sequence[Aftermath],
    members: Sequence[str],
) -> str:
    """SUMMARY.md: ready to paste into an issue."""
    lines = [
        f"# mcp-layers bundle: {subject.describe()}",
        "",
        f"- client: {_listed(facts.clients)}",
        f"- server: {_listed(facts.servers)} (as the proxy saw it: upstream host:port)",
        f"- protocol version: {_listed(facts.protocols)}",
        f"- sessions: {len(facts.sessions)}; records: {facts.records}, "
        f"from `{facts.first or '?'}` to `{facts.last or '?'}`",
        # The versions installed where the bundle was made (the recording's own are not
        # on the records).
        f"- versions: mcp-layers {versions.mcp_layers}, mitmproxy {versions.mitmproxy}",
        "",
        "## Failed exchanges",
        "",
    ]
    if failing:
        lines += [_failing_line(f) for f in failing]
        if failing_total > len(failing):
            lines.append(f"- … {failing_total - len(failing)} more (in the records and the report)")
    else:
        lines.append("None: every request succeeded (or was a negotiation probe).")
    lines += ["", "## What the spec asks that the client did not", ""]
    cited = list(_cited(verdict_rows))
    lines += cited or ["Nothing: no verdict is a FAIL or a WARNING (verdicts.txt has them all)."]
    stalls = [a for a in hangs if a.stalled]
    if hangs:
        lines += ["", "## After each failure (hang forensics)", ""]
        lines += [f"- #{a.id} {a.incident()}: {phrase(a)}" for a in hangs[:MAX_FAILING]]
        if len(hangs) > MAX_FAILING:
            lines.append(f"- … {len(hangs) - MAX_FAILING} more in hangs.json")
        if stalls:
            lines.append(
                f"- {len(stalls)} of them stalled ({STALL_MS / 1000:g} s or more of silence)"
            )
    lines += [
        "",
        "## In this bundle",
        "",
        *(f"- `{name}`" for name in members),
        "",
        "The records were redacted when they were recorded (no bodies, no headers beyond an "
        "allow-list, hashed session ids, error messages scrubbed of token shapes); this "
        "bundle adds nothing to them but the versions above.",
        "",
    ]
    if subject.option == "session":
        lines[-1:-1] = [
            "Verdicts and hang forensics were judged on the whole recording the session "
            "came from (a client's next move may be in its next session), and hold the "
            "instances about this session's records.",
        ]
    return "\n".join(lines)


def zip_bytes(members: Mapping[str, bytes]) -> bytes:
    """A deterministic zip of `members`: sorted by name, each deflated at level 9 with a
    fixed time and mode, so the same members give the same bytes."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for name in sorted(members):
            info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # Unix, whatever the platform
            info.external_attr = 0o644 << 16
            zf.writestr(info, members[name], compresslevel=9)
    return out.getvalue()
