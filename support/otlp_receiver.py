"""A small OTLP/HTTP collector for the tests and the benchmark, on 127.0.0.1.

It decodes what it is sent with `opentelemetry-proto` (the protobuf messages the
Collector itself speaks) and keeps it; `delay_s` makes it a slow collector (each export
answered that much later). A dead collector is just a port nobody listens on
(`procs.free_port()`).
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

HOST = "127.0.0.1"
#: Largest request body read (a batch of 512 spans is far below it).
MAX_BODY = 64 * 1024 * 1024


class OtlpReceiver:
    """`with OtlpReceiver() as r:` … `r.url` is the endpoint to give the addon."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                receiver._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((HOST, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://{HOST}:{self._server.server_address[1]}"

    def spans(self) -> list[Span]:
        with self._lock:
            requests = list(self.traces)
        return [
            span
            for request in requests
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        ]

    def metric_names(self) -> set[str]:
        with self._lock:
            requests = list(self.metrics)
        return {
            metric.name
            for request in requests
            for rm in request.resource_metrics
            for sm in rm.scope_metrics
            for metric in sm.metrics
        }

    def wait_for(self, ready: Callable[[OtlpReceiver], bool], timeout_s: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready(self):
                return True
            time.sleep(0.05)
        return ready(self)

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        body = handler.rfile.read(min(length, MAX_BODY))
        encoding = (handler.headers.get("content-encoding") or "").lower()
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        if self.delay_s:
            time.sleep(self.delay_s)
        reply: bytes
        if handler.path.endswith("/v1/traces"):
            request = ExportTraceServiceRequest.FromString(body)
            with self._lock:
                self.traces.append(request)
                self.headers.append({k.lower(): v for k, v in handler.headers.items()})
            reply = ExportTraceServiceResponse().SerializeToString()
        elif handler.path.endswith("/v1/metrics"):
            metrics = ExportMetricsServiceRequest.FromString(body)
            with self._lock:
                self.metrics.append(metrics)
            reply = ExportMetricsServiceResponse().SerializeToString()
        else:
            handler.send_error(404)
            return
        try:
            handler.send_response(200)
            handler.send_header("content-type", "application/x-protobuf")
            handler.send_header("content-length", str(len(reply)))
            handler.end_headers()
            handler.wfile.write(reply)
        except OSError:
            pass  # the exporter gave up waiting (a slow collector's fate): nothing to answer
