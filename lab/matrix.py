"""The retry matrix: per client × fault, what the client did and what reached the model.

Every cell comes from a run's files, never from what the lab expected:

- retried / how / after / attempts / re-init: the run's recording (the addon's
  ``retryOrigin``, ``attempt``, ``retryOf``, ``retryDelayMs``, ``retryAfterHonored``;
  a resumption is a GET stream carrying ``Last-Event-ID``);
- model-driven: a ``tools/call`` retry is the model's when the fake model answered a
  tool call (having received a result) between the previous attempt and this one;
- reached the model: the fake model's log of the tool results it received;
- client printed: the ``LAB-DONE results=…`` line in the client's stdout, which must agree
  with the model's log (the matrix says so when it does not);
- waited on: the stalls in the run's recording, each with who was waited on, by
  ``mcp-layers hangs``' own query (``mcp_layers_analysis.hangs``): every run sends the
  agent's model API through the proxy too, so the recording holds both halves of its turn.
  A hang fault (``HANG_FAULTS``) must be named for the party it stalls.

Delays are shown in coarse buckets, so that a rerun gives the same matrix; the exact
figures are in ``runs.md`` beside it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from mcp_layers_analysis import hangs
from mcp_layers_analysis.errors import AnalysisError, InputError
from mcp_layers_analysis.filters import Filters
from mcp_layers_analysis.hangs import Silence, WaitedOn
from mcp_layers_analysis.inputs import expand
from mcp_layers_core.record import RETRY_ORIGINS, SUCCESSFUL, Kind, NoteCode, RetryOrigin

from . import clients as clients_mod
from . import presets
from .fake_model import DONE_PREFIX, read_log
from .run import MODEL_LOG, RunResult, addon_warnings

OK_OUTCOMES: Final = SUCCESSFUL
#: (upper bound in ms, label): bounds sit in the gaps between the clusters of delays the
#: lab sees, so that a rerun lands in the same bucket. Two quiet passes (2026-12-03/04,
#: docs/lab.md "The delay buckets"): a client's own re-send 0–92 ms (178 under load); SDK
#: back-offs and fast-agent's reconnect 195–290 ms; resumptions of a cut stream 502–722 ms
#: (894 under load); a 2 s Retry-After; SDK request timeouts of 60 s.
BUCKETS: Final = (
    (150.0, "<0.15 s"),
    (400.0, "0.15–0.4 s"),
    (1000.0, "0.4–1 s"),
    (10000.0, "1–10 s"),
    (float("inf"), "≥10 s"),
)


#: A re-call the model asked for waits on the agent's loop and the lab's fake model, and a
#: re-initialisation on a whole new handshake, not on a back-off of the client's: they
#: spread over the fine buckets' edges from pass to pass (Kilo Code's model re-calls
#: 288–1829 ms, opencode's 47–1637 ms, Qwen Code's re-inits 80–226 ms), so one coarse
#: bucket holds them all, and only a wait of 10 s or more stands out.
MODEL_BUCKETS: Final = (
    (10000.0, "<10 s"),
    (float("inf"), "≥10 s"),
)


def coarse(retry: Retry) -> bool:
    """Whether a retry's delay waits on the agent's loop or a handshake (`MODEL_BUCKETS`).
    A reopened 2026-07-28 subscription stream too: a client reopens it when its loop next
    needs it, not after a back-off (fast-agent's goes out with the model's re-call, 105 to
    296 ms after a dropped connection across five passes)."""
    return retry.model or retry.origin == RetryOrigin.REINIT or retry.subscription


#: A stall: a silence `mcp-layers hangs` reports by default, and the forensics too.
STALL_MS: Final = hangs.STALL_MS
#: Shorter silences are looked for too, down to this: a hang fault's cell then says how
#: long the client waited on the hung party before it gave up, short of a stall.
SILENCE_FLOOR_MS: Final = 1000
#: A stall's length, in buckets whose bounds sit between the lab's figures (so that a rerun
#: lands in the same one): the fake model's holds of 8 s (idle_cut, graceful_close) and
#: 25 s (model_hang), Claude Code's 60 s MCP request timeout, the lab's kill at 120 s (a
#: stall ends with the run: 110–120 s). The 10 s bound is `STALL_MS`.
STALL_BUCKETS: Final = (
    (5000.0, "1–5 s"),
    (10000.0, "5–10 s"),
    (20000.0, "10–20 s"),
    (45000.0, "20–45 s"),
    (90000.0, "45–90 s"),
    (float("inf"), "≥90 s"),
)
#: Who each hang fault makes the client wait on: the silence that begins when the hung
#: request is sent (`hung_at`) must be named for that party (issue 28: `hangs` names
#: `mcp_server` for a tools/call the server never answers, `model` for a model that holds
#: its answer). Anyone else named is a finding about the client or a bug in `hangs`.
HANG_FAULTS: Final = {"tools_call_hang": WaitedOn.MCP_SERVER, "model_hang": WaitedOn.MODEL}
#: The hang's silence begins when the hung request is sent, or as soon as traffic then
#: under way has ended (the model turn that asked for the tool ends a few ms after the
#: `tools/call` is sent): within this of the send.
HUNG_SLACK_MS: Final = 2000


def bucket(ms: float | None, buckets: tuple[tuple[float, str], ...] = BUCKETS) -> str:
    if ms is None:
        return "?"
    for bound, name in buckets:
        if ms < bound:
            return name
    return buckets[-1][1]


def _epoch(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    """The run's records, in file then line order (a torn last line is skipped)."""
    return [rec for path in sorted(run_dir.glob("mcp-*.jsonl")) for rec in _read_jsonl(path)]


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


@dataclass(frozen=True)
class Retry:
    method: str
    origin: str
    attempt: int
    delay_ms: float | None
    model: bool
    retry_after_honored: bool | None
    #: when it was sent (epoch s), to list a cell's retries in the order they happened
    at: float | None = field(default=None, compare=False)
    #: the record is a subscription stream (`NoteCode.SUBSCRIPTION`)
    subscription: bool = False


@dataclass
class Cell:
    """One row of the matrix: one run's client × fault × script."""

    run: RunResult
    fired: int = 0
    retries: list[Retry] = field(default_factory=list)
    attempts: int | None = None
    reinit: bool = False
    model: list[str] = field(default_factory=list)  #: verdicts, in order
    model_hints: list[str] = field(default_factory=list)
    tool_offered: bool = False
    printed: list[str] | None = None  #: the verdicts the client printed (None: no LAB-DONE)
    clients_seen: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: why the fault could not act on this client (it never sent what the fault hits)
    inapplicable: str | None = None
    #: the client's known name lookup was seen (and stopped by the namespace)
    known_lookup: bool = False
    #: the MCP protocol versions its requests carried: its era (2025-11-25: sessions;
    #: 2026-07-28: stateless), which decides which faults can reach it
    protocols: list[str] = field(default_factory=list)
    #: the silences of its traffic of at least SILENCE_FLOOR_MS, with who was waited on
    #: (`hangs.silences`), in time order
    silences: list[Silence] = field(default_factory=list)
    #: a hang fault's: when the hung request was sent, epoch ms (`hung_at`)
    hung_at: float | None = None

    @property
    def broken(self) -> bool:
        """The run cannot be trusted as it is: the lab must say so and fail."""
        return bool(self.notes)

    # -- the columns

    @property
    def retried(self) -> str:
        if self.inapplicable is not None:
            return f"n/a: {self.inapplicable}"
        methods = list(dict.fromkeys(r.method for r in self.retries))
        return ", ".join(methods) if methods else "no"

    @property
    def how(self) -> str:
        if not self.retries:
            return "—"
        parts: dict[str, None] = {}
        for r in self.retries:
            model_tag = r.model and r.origin != RetryOrigin.MODEL
            parts[f"{r.origin} (model)" if model_tag else r.origin] = None
        return ", ".join(parts)

    @property
    def after(self) -> str:
        if not self.retries:
            return "—"
        text = ", ".join(
            dict.fromkeys(
                bucket(r.delay_ms, MODEL_BUCKETS if coarse(r) else BUCKETS) for r in self.retries
            )
        )
        honoured = [
            r.retry_after_honored for r in self.retries if r.retry_after_honored is not None
        ]
        if honoured:
            text += "; Retry-After " + ("honoured" if honoured[0] else "not honoured")
        return text

    @property
    def attempts_text(self) -> str:
        return "—" if self.attempts is None else str(self.attempts)

    @property
    def model_text(self) -> str:
        if not self.tool_offered and not self.model:
            return "no tool"
        if not self.model:
            return "no result"
        return " → ".join(
            v if v == "ok" or not h else f"{v} ({h})"
            for v, h in zip(self.model, self.model_hints, strict=True)
        )

    @property
    def printed_text(self) -> str:
        r = self.run
        if r.error:
            return "harness error"
        if self.printed is not None:
            shown = ",".join(self.printed) or "none"
            mark = "" if self.agrees else " ≠ model"
            return f"{shown}{mark}" + (f" (exit {r.exit_code})" if r.exit_code else "")
        if r.timed_out:
            return "timeout"
        return f"exit {r.exit_code}, no answer"

    @property
    def stalls(self) -> list[Silence]:
        """The silences `mcp-layers hangs` reports by default."""
        return [s for s in self.silences if s.ms >= STALL_MS]

    @property
    def waited_text(self) -> str:
        return waited_on_text(self.silences, self.run.fault, self.hung_at)

    @property
    def agrees(self) -> bool:
        # `LAB-DONE results=none` reads as [], which is what a model without results has.
        return self.printed is None or self.printed == self.model


_HINTS: Final = (
    (re.compile(r"-32\d{3}"), None),
    (re.compile(r"Injected tool failure"), "isError"),
    # Not a stack trace's line number (mcp-use hands the model its traceback).
    (re.compile(r"(?<!line )\b(?:HTTP |status |code[: ]*)?(4\d\d|5\d\d)\b"), None),
    (re.compile(r"(?i)timed? ?out"), "timeout"),
    (re.compile(r"(?i)abort"), "aborted"),
    (re.compile(r"(?i)session"), "session"),
    (
        re.compile(r"(?i)socket|connection|ECONNRESET|closed|terminated|fetch failed|network"),
        "connection",
    ),
)


def hint(text: str) -> str:
    """A short, stable key for an error result: a status, a JSON-RPC code, a kind."""
    for pattern, name in _HINTS:
        m = pattern.search(text)
        if m:
            return name or (m.group(1) if m.groups() else m.group(0))
    return ""


def hung_at(fault: str, records: list[dict[str, Any]]) -> float | None:
    """When a hang fault's hung request was sent (epoch ms), from the records alone (not
    from `hangs`): the `tools/call` the fault held, or the first model turn after a tool
    call (the fake model holds its first answer after a tool result). None: not reached."""
    if fault == "tools_call_hang":
        held = [r for r in records if r.get("injected") and r.get("method") == "tools/call"]
    elif fault == "model_hang":
        calls = [_epoch(r["ts"]) for r in records if r.get("method") == "tools/call"]
        held = [
            r
            for r in records
            if r.get("kind") == Kind.MODEL_TURN and calls and _epoch(r["ts"]) > min(calls)
        ]
    else:
        return None
    sent = [_epoch(r["ts"]) * 1000 for r in held if r.get("ts")]
    return min(sent) if sent else None


def hang_silence(silences: list[Silence], at: float | None) -> Silence | None:
    """The silence that began when the hung request was sent at `at` (epoch ms), or None
    (the client waited on it less than SILENCE_FLOOR_MS, or never sent it)."""
    if at is None:
        return None
    return next((s for s in silences if at - 1 <= s.start_ms <= at + HUNG_SLACK_MS), None)


def waited_on_text(silences: list[Silence], fault: str, at: float | None = None) -> str:
    """The *waited on* column: each stall's party and length (bucketed), in time order;
    for a hang fault whose hang was shorter than a stall, `gave up sooner:` and how long
    the client waited (`at`: when the hung request was sent, `hung_at`)."""
    shown = [
        (s.start_ms, f"{s.waited_on} {bucket(s.ms, STALL_BUCKETS)}")
        for s in silences
        if s.ms >= STALL_MS
    ]
    if fault in HANG_FAULTS:
        hung = hang_silence(silences, at)
        if hung is not None and hung.ms < STALL_MS:
            said = f"gave up sooner: {hung.waited_on} {bucket(hung.ms, STALL_BUCKETS)}"
            shown.append((hung.start_ms, said))
        elif hung is None and not shown:
            return f"no stall ≥{hangs.DEFAULT_MIN_S:g} s"
    return ", ".join(dict.fromkeys(text for _, text in sorted(shown))) or "—"


def recordings(run_dir: Path) -> list[Path]:
    """A run's recordings (what `read_records` reads)."""
    return sorted(run_dir.glob("mcp-*.jsonl"))


def silences_of(paths: list[Path]) -> dict[Path, list[Silence]]:
    """Every silence of at least SILENCE_FLOOR_MS in each recording, by `hangs`' own query
    over one engine for all of them (one per run would take seconds per hundred runs).

    Raises AnalysisError or InputError (a recording that cannot be read)."""
    if not paths:
        return {}
    from mcp_layers_analysis.duck import DuckEngine

    sources = expand([str(p) for p in paths])
    engine = DuckEngine()
    try:
        engine.load(sources, hangs.HANG_COLUMNS, lambda _: None, shared=True)
        found = hangs.silences(engine, Filters(), SILENCE_FLOOR_MS)
    finally:
        engine.close()
    out: dict[Path, list[Silence]] = {p: [] for p in paths}
    for s in found:
        path = sources[s.src].path
        if path is not None:
            out.setdefault(Path(path), []).append(s)
    return out


def build_cells(runs: list[RunResult]) -> list[Cell]:
    """Every run's cell, the silences of all their recordings found in one pass."""
    try:
        found: dict[Path, list[Silence]] | None = silences_of(
            [p for r in runs for p in recordings(Path(r.run_dir))]
        )
    except (AnalysisError, InputError):
        found = None  # each cell reads its own, and the one that fails says so
    if found is None:
        return [build_cell(r) for r in runs]
    return [
        build_cell(r, [s for p in recordings(Path(r.run_dir)) for s in found.get(p, [])])
        for r in runs
    ]


def build_cell(run: RunResult, silences: list[Silence] | None = None) -> Cell:
    """One run's cell (`silences`: its recordings' silences, when already found)."""
    run_dir = Path(run.run_dir)
    cell = Cell(run)
    fault = presets.fault(run.fault)
    records = read_records(run_dir)
    model_log = read_log(run_dir / MODEL_LOG)
    requests = [r for r in records if r.get("kind") == Kind.REQUEST]
    by_id = {r.get("id"): r for r in records}
    cell.fired = sum(1 for r in records if r.get("injected"))
    cell.clients_seen = sorted({r["client"] for r in records if r.get("client")})
    cell.protocols = sorted(
        {str(r["protocolVersion"]) for r in requests if r.get("protocolVersion")}
    )

    # Model re-calls: when the model, holding a tool result, asked for the tool again.
    recalls = [e["ts"] for e in model_log if e.get("reply") == "tool" and e.get("results")]
    for rec in requests:
        origin = rec.get("retryOrigin")
        if origin not in RETRY_ORIGINS and origin != RetryOrigin.MODEL:
            continue
        # The proxy saw the model's turns (the fake model goes through it): the record says.
        model = origin == RetryOrigin.MODEL
        prev = by_id.get(rec.get("retryOf"))
        if not model and rec.get("method") == "tools/call" and prev is not None:
            lo, hi = _epoch(prev["ts"]), _epoch(rec["ts"])
            model = any(lo <= t <= hi for t in recalls)
        cell.retries.append(
            Retry(
                str(rec.get("method")),
                str(rec["retryOrigin"]),
                int(rec.get("attempt") or 1),
                rec.get("retryDelayMs"),
                model,
                rec.get("retryAfterHonored"),
                _epoch(rec["ts"]),
                NoteCode.SUBSCRIPTION in (rec.get("notes") or []),
            )
        )
    cell.retries += resumptions(records)
    cell.retries.sort(key=lambda r: r.at or 0.0)
    if fault.method is not None:
        attempts = [int(r.get("attempt") or 1) for r in requests if r.get("method") == fault.method]
        cell.attempts = max(attempts) if attempts else None
    failed = [r["id"] for r in requests if r.get("outcome") not in OK_OUTCOMES]
    if failed:
        cell.reinit = any(
            r.get("method") == "initialize"
            and r["id"] > failed[0]
            and r.get("retryOrigin") in (None, RetryOrigin.NONE)
            for r in requests
        )

    offered = [e for e in model_log if e.get("tool")]
    cell.tool_offered = bool(offered)
    with_results = [e for e in model_log if e.get("results")]
    if with_results:
        last = max(with_results, key=lambda e: len(e["results"]))
        cell.model = [r["verdict"] for r in last["results"]]
        cell.model_hints = [
            hint(r["text"]) if r["verdict"] != "ok" else "" for r in last["results"]
        ]

    cell.printed = printed_verdicts(run_dir / "client.out")
    if not cell.agrees:
        cell.notes.append("the client printed other results than the model received")
    # A replayed run has no fault of its own: its recording holds what the fault did. A
    # fault with no rule at the proxy (the fake model stalls: `model_hang`) marks nothing.
    at_proxy = fault.sets() != presets.fault("none").sets()
    if at_proxy and cell.fired == 0 and run.replayed is None:
        cell.inapplicable = inapplicable(fault, records)
        if cell.inapplicable is None:
            cell.notes.append("the fault never fired")
    passed = [
        r["method"]
        for r in requests
        if r.get("method") in fault.always and r.get("outcome") in OK_OUTCOMES
    ]
    if passed:
        # A fault meant to fail every call let one through: the proxy, not the client.
        cell.notes.append(f"the fault let {', '.join(dict.fromkeys(passed))} through")
    client = clients_mod.client(run.client)
    outbound = list(run.violations)
    if client.known_lookup is not None and outbound and all(v.endswith(":53") for v in outbound):
        cell.known_lookup = True
        outbound = []
    if outbound:
        cell.notes.append("OUTBOUND CONNECT " + " ".join(outbound))
    if run.unhandled:
        cell.notes.append("fake model could not answer " + "; ".join(run.unhandled))
    # Only the addon's own failures (a hook that raised, a cutter that broke, lost records)
    # make a run untrustworthy; its advice about the upstream is kept in run.json only.
    addon = [
        w
        for w in run.addon_errors or addon_warnings(run_dir / "mitmdump.log")
        if " failed" in w or "could not be written" in w
    ]
    if addon:
        cell.notes.append("addon: " + "; ".join(addon))
    if run.error:
        cell.notes.append(f"harness error: {run.error}")
    if records and client.client_info not in cell.clients_seen:
        seen = ", ".join(cell.clients_seen)
        cell.notes.append(f"records name {seen}, not {client.client_info}")
    if silences is None:
        try:
            silences = [s for found in silences_of(recordings(run_dir)).values() for s in found]
        except (AnalysisError, InputError) as exc:
            cell.notes.append(f"hangs could not read the recording: {exc}")
            silences = []
    cell.silences = silences
    cell.hung_at = hung_at(run.fault, records)
    expected = HANG_FAULTS.get(run.fault)
    hung = hang_silence(silences, cell.hung_at)
    if expected is not None and hung is not None and hung.waited_on != expected:
        # The fault stalls one party; its silence named for another is a finding about the
        # client (it waited on something else) or a bug in `hangs`: either way, look.
        cell.notes.append(
            f"hangs named {hung.waited_on}, not {expected}, for the silence of "
            f"`{run.fault}` ({hung.ms / 1000:.1f} s: {hung.detail})"
        )
    return cell


def _end_ms(rec: dict[str, Any], closed: bool = False) -> float:
    """When a record's exchange ended (``closed``: when its stream did), in epoch ms."""
    took = rec.get("streamClosedMs") if closed else None
    if took is None:
        took = rec.get("durationMs") or 0
    return _epoch(rec["ts"]) * 1000 + float(took)


def resumptions(records: list[dict[str, Any]]) -> list[Retry]:
    """The client's resumptions of a lost stream: each GET with ``Last-Event-ID``.

    The lab's server is resumable (every event has an id), so a client whose stream was
    cut before its answer may ask for the rest instead of failing or sending again. The
    resumption is of the session's last stream that ended unanswered (a POST's: its
    method; else a GET stream); the delay runs from that stream's end (or the previous
    resumption's) to the GET. A resumption refused (any status but 2xx) says so.
    """
    out: list[Retry] = []
    lost: dict[Any, tuple[str, float]] = {}  # session -> (what was lost, when it ended)
    for rec in sorted(records, key=lambda r: _epoch(r["ts"]) if r.get("ts") else 0.0):
        session, sse = rec.get("session"), rec.get("sse")
        kind = rec.get("kind")
        headers = rec.get("requestHeaders") or []
        if kind == Kind.STREAM and "last-event-id" in headers:
            method, ended = lost.get(session, ("GET", None))
            delay = None if ended is None else round(max(0.0, _epoch(rec["ts"]) * 1000 - ended), 1)
            status = (rec.get("httpStatuses") or [None])[-1]
            origin = "resume" if status is not None and 200 <= status < 300 else "resume refused"
            if status is not None and origin != "resume":
                origin += f" ({status})"
            at = _epoch(rec["ts"])
            out.append(Retry(method, origin, len(out) + 2, delay, False, None, at))
            lost[session] = (method, _end_ms(rec))
        elif (
            rec.get("eventIds")
            and isinstance(sse, dict)
            and (
                (kind == Kind.REQUEST and (not sse.get("final") or sse.get("resumed")))
                or (kind == Kind.STREAM and NoteCode.PROXY_SHUTDOWN not in (rec.get("notes") or []))
            )
        ):
            lost[session] = (str(rec.get("method") or "GET"), _end_ms(rec, closed=True))
    return out


def inapplicable(fault: presets.Fault, records: list[dict[str, Any]]) -> str | None:
    """Why a fault that never fired had nothing to act on, or None (then it misfired).

    A client on the stateless protocol (2026-07-28) sends no ``initialize``; a server
    answers it with JSON, so a fault that cuts an SSE answer has no stream to cut.
    """
    streams = [r for r in records if r.get("kind") == Kind.STREAM]
    if fault.get_stream and not streams:
        return "opens no standby GET stream"
    idle = fault.idle_ms
    lasted = [r.get("durationMs") for r in streams]
    if fault.get_stream and idle and all(ms is not None and ms < idle for ms in lasted):
        # A client with a session per operation closes each GET stream with its session.
        # How soon is left to the recording: a cell must read the same in a rerun (it was
        # 0.3 s, 0.4 s and 0.1 s in three passes).
        return f"closes its GET streams before {idle / 1000:g} s of silence"
    if fault.method is None:
        return None
    hit = [r for r in records if r.get("kind") == Kind.REQUEST and r.get("method") == fault.method]
    if not hit:
        return f"never sends `{fault.method}`"
    if fault.sse and not any("event-stream" in str(r.get("contentType")) for r in hit):
        return f"`{fault.method}` answered with JSON, no SSE to cut"
    return None


def printed_verdicts(stdout: Path) -> list[str] | None:
    """The verdicts of the last ``LAB-DONE results=…`` the client printed (None: none)."""
    try:
        text = stdout.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = re.findall(re.escape(DONE_PREFIX) + r"([a-z,]+)", text)
    if not found:
        return None
    last = found[-1]
    return [] if last == "none" else last.split(",")


# ------------------------------------------------------------------ Markdown


HEADERS: Final = (
    "fault",
    "client",
    "retried",
    "how",
    "after",
    "attempts",
    "re-init",
    "reached the model",
    "client printed",
    "waited on",
)


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


#: What each protocol version means for the faults (the matrix's client table).
ERAS: Final = {"2025-11-25": "sessions", "2026-07-28": "stateless"}


def era_text(protocols: list[str]) -> str:
    """The protocol versions seen, each with its era: `2026-07-28 (stateless)`."""
    if not protocols:
        return "—"
    return ", ".join(f"{v} ({ERAS[v]})" if v in ERAS else v for v in protocols)


def _eras(cells: list[Cell]) -> dict[str, list[str]]:
    """Per client, every protocol version its cells carried."""
    out: dict[str, set[str]] = {}
    for c in cells:
        out.setdefault(c.run.client, set()).update(c.protocols)
    return {name: sorted(v) for name, v in out.items()}


def _table(cells: list[Cell]) -> list[str]:
    lines = [_row(HEADERS), _row("---" for _ in HEADERS)]
    eras = _eras(cells)
    for c in cells:
        # Every cell of a client is in the era of the client table, unless the client
        # changed era between runs: then the cell says its own.
        mixed = len(eras.get(c.run.client, [])) > 1
        lines.append(
            _row(
                [
                    f"`{c.run.fault}`",
                    f"{c.run.client} ({era_text(c.protocols)})" if mixed else c.run.client,
                    c.retried,
                    c.how,
                    c.after,
                    c.attempts_text,
                    "yes" if c.reinit else "no",
                    c.model_text,
                    c.printed_text,
                    c.waited_text,
                ]
            )
        )
    return lines


def _order(cells: list[Cell]) -> list[Cell]:
    fault_rank = {f.name: i for i, f in enumerate(presets.FAULTS)}
    client_rank = {c.name: i for i, c in enumerate(clients_mod.CLIENTS)}
    return sorted(
        cells, key=lambda c: (fault_rank.get(c.run.fault, 99), client_rank.get(c.run.client, 99))
    )


def render(cells: list[Cell], environment: dict[str, str], date: str | None = None) -> str:
    """The matrix as Markdown (versions, date, both scripts' tables, faults, legend)."""
    date = date or datetime.now(UTC).strftime("%Y-%m-%d")
    names = list(dict.fromkeys(c.run.client for c in _order(cells)))
    lines = [
        "# MCP client retry matrix",
        "",
        f"Made by the lab (`python -m mcp_layers_lab`, docs/lab.md) on {date}, on this "
        "project's machine. Every cell is read from the run's recording and the fake model's "
        "log; the runs are kept under `lab/out/`.",
        "",
        "| client | version | speaks | MCP protocol (era) |",
        "| --- | --- | --- | --- |",
    ]
    eras = _eras(cells)
    for name in names:
        c = clients_mod.client(name)
        package = c.package
        era = era_text(eras.get(name, []))
        lines.append(f"| {c.name} | {c.version} ({package}) | {c.api} model API | {era} |")
    lines += ["", "Environment: " + ", ".join(f"{k} {v}" for k, v in environment.items()) + "."]
    bad = [c for c in cells if c.notes]
    if bad:
        lines += ["", "**Warnings:**", ""]
        lines += [f"- {c.run.client} / `{c.run.scenario}`: {'; '.join(c.notes)}" for c in bad]
    lookups = list(dict.fromkeys(c.run.client for c in _order(cells) if c.known_lookup))
    if lookups:
        lines += ["", "Known name lookups (stopped by the network namespace):", ""]
        lines += [f"- {n}: {clients_mod.client(n).known_lookup}" for n in lookups]
    once = _order([c for c in cells if c.run.script == "once"])
    again = _order([c for c in cells if c.run.script != "once"])
    if once:
        lines += ["", "## The model calls the tool once", "", *_table(once)]
    if again:
        lines += [
            "",
            "## The model calls the tool again after an error",
            "",
            "The fake model answers an error result with one more call of the tool (script "
            "`again_after_error`): a model-driven re-issue, on the wire like any other.",
            "",
            *_table(again),
        ]
    used = list(dict.fromkeys(c.run.fault for c in _order(cells)))
    lines += ["", "## Faults", "", "| fault | what | addon settings |", "| --- | --- | --- |"]
    for name in used:
        f = presets.fault(name)
        lines.append(f"| `{f.name}` | {f.what} | {f.describe()} |")
    lines += ["", *LEGEND]
    return "\n".join(lines) + "\n"


LEGEND: Final = (
    "## Reading a row",
    "",
    "- **retried**: the methods the client sent again after a failed attempt (the addon's "
    "`retryOrigin` is not `none`), or whose cut answer it asked the server for again "
    "(a resumption); `no` when nothing was repeated.",
    "- **how**: `resend` (same session, same JSON-RPC id), `reissue` (same session, new "
    "id), `reinit` (on a new session it initialised after the failure); `model` when the "
    "proxy saw the model ask for the tool again in a new turn (the record's `retryOrigin`), "
    "rather than the client repeating it by itself (`(model)` after another origin: the "
    "fake model's log says so, the records do not); `resume` when it resumed the cut "
    "stream (a GET with `Last-Event-ID`: the lab's server is resumable and redelivers the "
    "rest), `resume refused (404)` when that GET was refused.",
    "- **after**: the delay from the end of the failed attempt to the retry, in buckets "
    "(exact values in the run's `runs.md`): <0.15 s, 0.15–0.4 s, 0.4–1 s, 1–10 s, "
    "≥10 s; a re-call the model asked for, a re-initialisation and a reopened "
    "`subscriptions/listen` in two (<10 s, ≥10 s), since they wait on the agent's loop "
    "and the fake model or on a new handshake rather than on a back-off; for a 429 "
    "whether the client waited `Retry-After`.",
    "- **attempts**: the most attempts of one logical call of the method the fault hits "
    "(`—`: the client never sent that method).",
    "- **re-init**: an `initialize` that is not a retry of `initialize`, after the first "
    "failure: the client started a new session.",
    "- **reached the model**: the tool results the model received, in order: `ok` (the "
    "echo result) or `error` with a key from the error text; `no tool` when the model was "
    "never offered the tool; `no result` when it asked for the tool but nothing came back.",
    "- **client printed**: the results the client printed at the end (the model's final "
    "answer names them); `≠ model` if they differ from the model's log, `timeout` if the "
    "client had to be killed.",
    "- **waited on**: each stall of the run — a silence of its traffic of at least "
    f"{hangs.DEFAULT_MIN_S:g} s, what `mcp-layers hangs` reports by default — with who was "
    "waited on through it, as `hangs` names them from the same recording (the agent's model "
    "API goes through the proxy too): `model` (a model request in flight), `mcp_server` (an "
    "MCP request without its answer), `agent` (every answer in, nothing sent), `none` (the "
    "model had ended its turn), `unknown` (no model traffic recorded); its length in "
    "buckets (exact values in `runs.md`): 10–20 s, 20–45 s, 45–90 s, ≥90 s; `—` when "
    "nothing stalled. A hang fault's silence — the one that began when the hung request "
    "was sent — must be named `mcp_server` for `tools_call_hang` and `model` for "
    "`model_hang`; named for anyone else, the run is listed under **Warnings**. Shorter "
    "than a stall (the client gave up sooner) it is shown as `gave up sooner:` with its "
    "length (1–5 s, 5–10 s); `no stall ≥10 s` when the client did not even wait 1 s.",
)


def write_html(runs: Path, target: Path) -> None:
    """The matrix as a page: the report's compare section (client × scenario heat map and
    every figure) over the runs' recordings, its rows grouped by client (or by fault) with
    a filter (`matrix_page`), and its *waited on* column (`page_waited_on`)."""
    from mcp_layers_analysis import report

    from . import matrix_page

    report.write_from(
        [str(runs)], target, title="MCP client retry matrix: the lab's runs", sections=("compare",)
    )
    try:
        matrix_page.group_file(target, page_waited_on(runs))
    except matrix_page.PageError as exc:
        raise AnalysisError(f"{target}: {exc}") from exc


def page_waited_on(runs: Path) -> dict[tuple[str, str], str]:
    """The *waited on* text of each heat-map row of the page, by (client, scenario) as the
    records name them (the rows' keys): the recordings the report read, each under the
    client and scenario of its MCP records. Raises AnalysisError or InputError."""
    paths = [Path(s.path) for s in expand([str(runs)]) if s.path is not None]
    found = silences_of(paths)
    by_row: dict[tuple[str, str], tuple[list[Silence], list[float]]] = {}
    for path in paths:
        records = _read_jsonl(path)
        named = [r for r in records if r.get("client") and r.get("scenario")]
        if not named:
            continue
        key = str(named[0]["client"]), str(named[0]["scenario"])
        silences, sent = by_row.setdefault(key, ([], []))
        silences += found.get(path, [])
        at = hung_at(_fault_of(key[1]), records)
        if at is not None:
            sent.append(at)
    return {
        key: waited_on_text(
            sorted(silences, key=lambda s: s.start_ms), _fault_of(key[1]), min(sent, default=None)
        )
        for key, (silences, sent) in by_row.items()
    }


def _fault_of(scenario: str) -> str:
    """`session_404+again` is the fault `session_404` with the model calling again."""
    return scenario.split("+", 1)[0]


def runs_table(cells: list[Cell]) -> str:
    """Per-run details: exact delays, exit codes, durations, fault hits, records."""
    lines = [
        "# Runs",
        "",
        "| client | scenario | exit | seconds | fault hits | retries (method origin attempt "
        "delay) | stalls (waited on, s) | records client | notes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in _order(cells):
        r = c.run
        retries = "; ".join(
            f"{x.method} {x.origin}"
            f"{' (model)' if x.model and x.origin != RetryOrigin.MODEL else ''} #{x.attempt} "
            f"{'?' if x.delay_ms is None else f'{x.delay_ms:.0f} ms'}"
            for x in c.retries
        )
        status = "timeout" if r.timed_out else str(r.exit_code)
        lines.append(
            _row(
                [
                    r.client,
                    f"`{r.scenario}`",
                    status,
                    f"{r.seconds:.1f}",
                    str(c.fired),
                    retries or "—",
                    ", ".join(f"{s.waited_on} {s.ms / 1000:.1f}" for s in c.stalls) or "—",
                    ", ".join(c.clients_seen) or "—",
                    "; ".join(c.notes) or "",
                ]
            )
        )
    return "\n".join(lines) + "\n"
