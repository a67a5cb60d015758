"""Naive reference answers, computed from whole records held in memory.

Deliberately simple and slow: every definition in docs/cli.md written the obvious way, so
the streaming, parallel, bounded implementation can be checked against it.
"""

from __future__ import annotations

import gzip
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import orjson

SUCCESSISH = {"SUCCESS", "TOOL_SUCCESS", "INPUT_REQUIRED"}
COMPLETED = {"SUCCESS", "TOOL_SUCCESS"}
DIM_FIELD = {"client": "client", "version": "protocolVersion", "scenario": "scenario"}


def load(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


def nearest_rank(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    rank = max(1, math.ceil(Fraction(str(q)) * len(ordered)))
    return ordered[rank - 1]


def label(v: Any) -> str:
    return "(none)" if v is None else str(v)


def group(rec: dict[str, Any], by: Sequence[str]) -> tuple[str, ...]:
    return tuple(label(rec.get(DIM_FIELD[d])) for d in by)


# --------------------------------------------------------------------- summary


def summary(
    records: Iterable[dict[str, Any]], by: Sequence[str] = ("client",)
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """(group, origin, breakdown, key) -> {calls, failed, durations}."""
    out: dict[tuple[Any, ...], dict[str, Any]] = defaultdict(
        lambda: {"calls": 0, "failed": 0, "durations": []}
    )
    for r in records:
        if r.get("kind") != "request":
            continue
        g = group(r, by)
        probe = r.get("negotiation") is True or r.get("method") == "server/discover"
        origin = "injected" if r.get("injected") is not None else "probe" if probe else "organic"
        # A negotiation probe's refusal is part of a healthy start, never a failure.
        failed = origin != "probe" and r.get("outcome") not in SUCCESSISH
        st = r.get("httpStatuses") or []
        code = (r.get("jsonrpc") or {}).get("errorCode")
        keys = [
            ("all", None),
            ("layer", label(r.get("layer"))),
            ("outcome", label(r.get("outcome"))),
        ]
        if r.get("method") is not None:
            keys.append(("method", r["method"]))
        if r.get("tool") is not None:
            keys.append(("tool", r["tool"]))
        if code is not None:
            keys.append(("jsonrpc_error", str(code)))
        if st:
            keys.append(("http_status", str(st[-1])))
        if r.get("injected") is not None:
            keys.append(("rule", r["injected"].get("rule") or ""))
        for breakdown, key in keys:
            cell = out[(*g, origin, breakdown, key)]
            cell["calls"] += 1
            cell["failed"] += failed
            if r.get("durationMs") is not None:
                cell["durations"].append(float(r["durationMs"]))
    return out


# --------------------------------------------------------------------- retries


def retries(
    files: Sequence[Sequence[dict[str, Any]]], by: Sequence[str] = ("client",), keep: Any = None
) -> dict[tuple[str, ...], dict[str, Any]]:
    """Group -> every retries figure, by the definitions, with all records in memory."""
    figs: dict[tuple[str, ...], dict[str, Any]] = defaultdict(
        lambda: {
            "calls": 0,
            "failed": Counter(),
            "retried": Counter(),
            "logical": 0,
            "retries": 0,
            "second": 0,
            "max_attempt": 0,
            "delays": [],
            "origins": Counter(),
            "retry_after": 0,
            "honoured": 0,
            "not_honoured": 0,
            "unsafe": 0,
            "futile": 0,
            "ended_404": 0,
            "reinitialised": 0,
            "ir": 0,
            "continued": 0,
            "completed": 0,
        }
    )
    matched = keep or (lambda r: True)
    ended: dict[str, tuple[tuple[str, ...], bool, int]] = {}  # session -> group, matched, pos
    reinit_after: dict[str, list[int]] = defaultdict(list)
    position = 0
    for records in files:
        by_id: dict[int, dict[str, Any]] = {}
        successors: dict[int, list[int]] = defaultdict(list)
        for r in records:
            position += 1
            r = dict(r, _pos=position)
            g = group(r, by)
            if r.get("previousSession") and r.get("method") == "initialize":
                reinit_after[r["previousSession"]].append(position)
            st = r.get("httpStatuses") or []
            is_404 = (r.get("kind") == "request" and bool(st) and st[-1] == 404) or (
                r.get("kind") == "session_end" and r.get("endReason") == "not_found"
            )
            if is_404 and r.get("session") and r["session"] not in ended:
                ended[r["session"]] = (g, matched(r), position)
            if r.get("kind") != "request":
                continue
            prev = by_id.get(r["retryOf"]) if r.get("retryOf") is not None else None
            cont = by_id.get(r["continues"]) if r.get("continues") is not None else None
            if prev is not None and prev["outcome"] not in SUCCESSISH and not _refused_probe(prev):
                successors[prev["id"]].append(r["id"])
            if cont is not None and cont["outcome"] == "INPUT_REQUIRED":
                successors[cont["id"]].append(r["id"])
            by_id[r["id"]] = r
            if not matched(r):
                continue
            f = figs[g]
            f["calls"] += 1
            probe = r.get("negotiation") is True or r.get("method") == "server/discover"
            if r["outcome"] not in SUCCESSISH and not probe:
                f["failed"][r["outcome"]] += 1
            if r["outcome"] == "INPUT_REQUIRED":
                f["ir"] += 1
            if r.get("retryOf") is None:
                f["logical"] += 1
            else:
                f["retries"] += 1
                f["origins"][r.get("retryOrigin")] += 1
                if r.get("retryDelayMs") is not None:
                    f["delays"].append(float(r["retryDelayMs"]))
                f["unsafe"] += bool(r.get("unsafeRetry"))
                if (
                    prev is not None
                    and prev["outcome"] == "JSONRPC_ERROR"
                    and prev["jsonrpc"]["errorCode"] == -32602
                ):
                    f["futile"] += 1
            if r.get("attempt") == 2:
                f["second"] += 1
            f["max_attempt"] = max(f["max_attempt"], r.get("attempt") or 0)
            f["retry_after"] += r.get("retryAfterMs") is not None
            f["honoured"] += r.get("retryAfterHonored") is True
            f["not_honoured"] += r.get("retryAfterHonored") is False
        # Links within the recording: who was retried, continued, completed.
        for rid, nexts in successors.items():
            r = by_id[rid]
            if not matched(r):
                continue
            f = figs[group(r, by)]
            if r["outcome"] not in SUCCESSISH and any(
                by_id[n].get("retryOf") == rid for n in nexts
            ):
                f["retried"][r["outcome"]] += 1
            if r["outcome"] == "INPUT_REQUIRED" and any(
                by_id[n].get("continues") == rid for n in nexts
            ):
                f["continued"] += 1
                if _reaches_completion(rid, successors, by_id):
                    f["completed"] += 1
    for session, (g, ok, pos) in ended.items():
        if not ok:
            continue
        figs[g]["ended_404"] += 1
        if any(p > pos for p in reinit_after.get(session, [])):
            figs[g]["reinitialised"] += 1
    return figs


def _refused_probe(r: dict[str, Any]) -> bool:
    """A negotiation probe's refusal is no failure, so nothing retries it (a look-alike
    client's probe the core links to it as a resend, say), unless it is linked some other
    way: as `queries._links` has it."""
    probe = r.get("negotiation") is True or r.get("method") == "server/discover"
    statuses = r.get("httpStatuses") or []
    linked = (
        r["outcome"] == "INPUT_REQUIRED"
        or (bool(statuses) and statuses[-1] == 404)
        or r.get("retryOf") is not None
        or r.get("continues") is not None
        or (r.get("method") == "initialize" and bool(r.get("previousSession")))
    )
    return probe and not linked


def _reaches_completion(
    rid: int, successors: dict[int, list[int]], by_id: dict[int, dict[str, Any]]
) -> bool:
    todo = list(successors.get(rid, []))
    seen = set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if by_id[n]["outcome"] in COMPLETED:
            return True
        todo.extend(successors.get(n, []))
    return False
