"""One long SSE stream through mitmdump with the addon, measured as it flows.

Shared by the CI-sized proof (`test_long_stream.py`) and the 1 GB benchmark
(`benchmarks/long_stream.py`). The scripted upstream (in this process, `keep_log=False`
so it keeps nothing) sends a stream of `event_bytes`-sized JSON-RPC notifications in
`piece_bytes` writes, each piece generated just before it is written, optionally paced
to a rate. The stream is either a GET stream of a session (2025 Streamable HTTP) or the
answer to a `subscriptions/listen` POST (2026-07-28), which ends with the response.

While it flows, every `sample_s` the run samples what the upstream has sent, what the
client has received, and mitmdump's CPU time and resident memory (Linux /proc). Both
ends hash the body, so the whole stream is compared byte for byte without keeping it.
The result holds the samples and, per tenth of the stream, the proxy's CPU time per
event, throughput and memory: the figures that show whether the cost of an event grows
with the stream's age and whether memory stays flat.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_layers_support.gauges import cpu_s, hwm_kib, proxy_pid, rss_kib
from mcp_layers_support.harness import Proxy
from mcp_layers_support.rawhttp import RawClient
from mcp_layers_support.recordings import check_dir
from mcp_layers_support.scripted_upstream import Received, Reply, ScriptedUpstream

SESSION = "long-stream-session"
LISTEN_ID = "listen-1"


@dataclass
class Sample:
    t: float
    sent_bytes: int
    sent_events: int
    received_bytes: int
    cpu_s: float
    rss_kib: int


@dataclass
class Decile:
    n: int  # 1..10
    events: int
    cpu_us_per_event: float
    mb_per_s: float
    rss_mib: float


@dataclass
class StreamResult:
    kind: str
    total_bytes: int
    events: int
    seconds: float
    client_complete: bool
    client_error: str | None
    received_bytes: int
    hashes_equal: bool
    samples: list[Sample]
    deciles: list[Decile]
    rss_start_mib: float  # after the first tenth (warm)
    rss_peak_mib: float
    hwm_mib: float
    records: list[dict[str, Any]] = field(default_factory=list)

    def cpu_us_per_event(self, tenths: slice) -> float:
        chosen = self.deciles[tenths]
        cpu = sum(d.cpu_us_per_event * d.events for d in chosen)
        return cpu / max(1, sum(d.events for d in chosen))

    @property
    def early_us(self) -> float:
        """CPU per event over tenths 2-4 (the first warms up). Three tenths, not one: CPU
        time comes in 10 ms ticks, and a short run's tenth holds only a few of them."""
        return self.cpu_us_per_event(slice(1, 4))

    @property
    def late_us(self) -> float:
        """CPU per event over tenths 8-10."""
        return self.cpu_us_per_event(slice(7, 10))

    def ratio(self) -> float:
        return self.late_us / self.early_us

    def summary(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "mib": round(self.total_bytes / 2**20),
            "events": self.events,
            "seconds": round(self.seconds, 1),
            "mib_per_s": round(self.total_bytes / 2**20 / self.seconds, 1),
            "bytes_compared": self.received_bytes,
            "equal": self.hashes_equal,
            "rss_after_first_tenth_mib": round(self.rss_start_mib, 1),
            "rss_peak_mib": round(self.rss_peak_mib, 1),
            "rss_growth_mib": round(self.rss_peak_mib - self.rss_start_mib, 1),
            "cpu_us_per_event_tenths_2_4": round(self.early_us, 2),
            "cpu_us_per_event_tenths_8_10": round(self.late_us, 2),
            "late_over_early": round(self.ratio(), 2),
        }


class _Stream:
    """The upstream's side: pieces of events, generated on demand, hashed as sent."""

    def __init__(self, kind: str, total: int, event_bytes: int, piece_bytes: int) -> None:
        self.kind = kind
        self.per_piece = max(1, piece_bytes // event_bytes)
        self.pieces = max(1, total // (self.per_piece * event_bytes))
        self.hash = hashlib.sha256()
        self.sent_bytes = 0
        self.sent_events = 0
        self._k = 0
        pad = event_bytes - len(self._event(0, "")) - 1
        self._pad = "x" * max(0, pad)
        self._lock = threading.Lock()

    @staticmethod
    def _event(seq: int, pad: str) -> bytes:
        message = {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "logger": "long", "data": {"seq": seq, "pad": pad}},
        }
        return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"

    def piece(self) -> bytes:
        with self._lock:
            first = self._k * self.per_piece
            data = b"".join(self._event(first + i, self._pad) for i in range(self.per_piece))
            self._k += 1
            if self._k == self.pieces and self.kind == "listen":
                # A whole SubscriptionsListenResult (2026-07-28): its type and the id of
                # the subscription it closes.
                meta = {"io.modelcontextprotocol/subscriptionId": LISTEN_ID}
                result = {"resultType": "complete", "_meta": meta}
                final = {"jsonrpc": "2.0", "id": LISTEN_ID, "result": result}
                data += b"event: message\ndata: " + json.dumps(final).encode() + b"\n\n"
            self.hash.update(data)
            self.sent_bytes += len(data)
            self.sent_events += self.per_piece
            return data


def _deciles(samples: list[Sample], total: int) -> list[Decile]:
    """Per tenth of the stream (by bytes sent), bounded by the last sample before it
    began and the first sample after it ended."""
    out = []
    for n in range(1, 11):
        lo, hi = total * (n - 1) / 10, total * n / 10
        a = next((s for s in reversed(samples) if s.sent_bytes <= lo), samples[0])
        b = next((s for s in samples if s.sent_bytes >= hi), samples[-1])
        events = max(1, b.sent_events - a.sent_events)
        seconds = max(1e-6, b.t - a.t)
        inside = [s.rss_kib for s in samples if a.t <= s.t <= b.t]
        out.append(
            Decile(
                n=n,
                events=events,
                cpu_us_per_event=(b.cpu_s - a.cpu_s) / events * 1e6,
                mb_per_s=(b.sent_bytes - a.sent_bytes) / 2**20 / seconds,
                rss_mib=max(inside) / 1024,
            )
        )
    return out


def run_long_stream(
    kind: str,
    total_bytes: int,
    workdir: Path,
    *,
    event_bytes: int = 1024,
    piece_bytes: int = 64 * 1024,
    rate_bytes_per_s: float | None = None,
    sample_s: float = 0.25,
    deadline_s: float = 1800.0,
    extra_sets: tuple[str, ...] = (),
) -> StreamResult:
    """Send one `kind` ("get" or "listen") stream of about `total_bytes` through a fresh
    mitmdump with the addon; measure it. Stops the proxy (its recording is complete)."""
    stream = _Stream(kind, total_bytes, event_bytes, piece_bytes)
    gap = 0.0 if not rate_bytes_per_s else stream.per_piece * event_bytes / rate_bytes_per_s
    sse = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]

    def respond(_request: Received) -> Reply:
        return Reply(200, sse, chunks=[(gap, stream.piece)] * stream.pieces)

    received = hashlib.sha256()
    got_bytes = [0]

    def sink(data: bytes) -> None:
        received.update(data)
        got_bytes[0] += len(data)

    sets = ("flow_detail=0", "tcp_timeout=3600", *extra_sets)
    with (
        ScriptedUpstream(responder=respond, keep_log=False) as upstream,
        Proxy(upstream.port, workdir, scenario=f"long-{kind}", extra_sets=sets) as proxy,
    ):
        pid = proxy_pid(proxy)
        outcome: dict[str, Any] = {}

        def client() -> None:
            headers = [
                ("Accept", "text/event-stream, application/json"),
                ("User-Agent", "long-stream/1.0"),
                ("Mcp-Session-Id", SESSION),
                ("MCP-Protocol-Version", "2025-11-25" if kind == "get" else "2026-07-28"),
            ]
            with RawClient(proxy.port) as c:
                if kind == "get":
                    outcome["got"] = c.request(
                        "GET", headers=headers, keep_body=False, sink=sink, deadline_s=deadline_s
                    )
                else:
                    body = json.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": LISTEN_ID,
                            "method": "subscriptions/listen",
                            "params": {"filter": {"logging": True}},
                        }
                    ).encode()
                    headers.append(("Content-Type", "application/json"))
                    outcome["got"] = c.post(
                        body, headers, keep_body=False, sink=sink, deadline_s=deadline_s
                    )

        thread = threading.Thread(target=client, name="long-stream-client", daemon=True)
        started = time.monotonic()
        samples: list[Sample] = []
        thread.start()
        deadline = started + deadline_s
        while thread.is_alive() and time.monotonic() < deadline:
            samples.append(
                Sample(
                    time.monotonic() - started,
                    stream.sent_bytes,
                    stream.sent_events,
                    got_bytes[0],
                    cpu_s(pid),
                    rss_kib(pid),
                )
            )
            thread.join(sample_s)
        seconds = time.monotonic() - started
        samples.append(
            Sample(
                seconds,
                stream.sent_bytes,
                stream.sent_events,
                got_bytes[0],
                cpu_s(pid),
                rss_kib(pid),
            )
        )
        hwm = hwm_kib(pid) / 1024
        thread.join(5)
    got = outcome.get("got")
    deciles = _deciles(samples, stream.sent_bytes)
    warm = [s for s in samples if s.sent_bytes >= stream.sent_bytes / 10]
    return StreamResult(
        kind=kind,
        total_bytes=stream.sent_bytes,
        events=stream.sent_events,
        seconds=seconds,
        client_complete=bool(got and got.complete),
        client_error=got.error if got else "no response",
        received_bytes=got_bytes[0],
        hashes_equal=received.digest() == stream.hash.digest(),
        samples=samples,
        deciles=deciles,
        rss_start_mib=(warm[0].rss_kib if warm else samples[0].rss_kib) / 1024,
        rss_peak_mib=max(s.rss_kib for s in samples) / 1024,
        hwm_mib=hwm,
        records=[r for f in check_dir(proxy.record_dir) for r in f.records],
    )
