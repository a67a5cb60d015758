"""Live OTLP/HTTP export from the proxy: records in, spans and metrics out, in the
background.

The proxy's event loop only puts finished records on a bounded queue (`submit`: no
encoding, no I/O, never waits); a daemon thread maps them (`otel_map`), batches them
and sends them with the OpenTelemetry SDK's OTLP/HTTP exporters. When the queue is full
a record is dropped and counted, never waited for; a collector that is down or slow
costs a warning (once per stretch of failures) and the records queued meanwhile.

Only this module's `LiveExporter.start` imports the SDK (`otel_sdk`), so an addon
without `mcp_otlp_endpoint` imports nothing of OpenTelemetry. It lives beside the addon
scripts, not in the core: it runs a thread and does network I/O, which the sans-IO core
never does.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from mcp_layers_core.otel_config import endpoint_base
from mcp_layers_core.otel_map import (
    DURATION_BUCKETS,
    EXCHANGES,
    OPERATION_DURATION,
    SESSION_DURATION,
    Measurement,
    SpanMapper,
)
from mcp_layers_core.tracker import Emitted

QUEUE_RECORDS: Final = 4096
BATCH_RECORDS: Final = 256
#: The longest a record waits in the queue before its batch is sent.
BATCH_DELAY_S: Final = 1.0
#: Per OTLP request, retries included: a stuck collector holds the thread no longer.
EXPORT_TIMEOUT_S: Final = 5.0
#: At proxy shutdown, how long the queue may take to drain before it is abandoned.
CLOSE_TIMEOUT_S: Final = 3.0
METRIC_INTERVAL_S: Final = 10.0

_STOP: Final = object()


class LiveExporter:
    """Owns the queue, the worker thread and the SDK exporters of one proxy run."""

    def __init__(
        self,
        endpoint: str,
        headers: Mapping[str, str],
        run: str,
        *,
        warn: Callable[[str], None],
        queue_records: int = QUEUE_RECORDS,
        batch_records: int = BATCH_RECORDS,
        batch_delay_s: float = BATCH_DELAY_S,
        export_timeout_s: float = EXPORT_TIMEOUT_S,
        metric_interval_s: float = METRIC_INTERVAL_S,
    ) -> None:
        self.endpoint = endpoint_base(endpoint)
        self._headers = dict(headers)
        self.run = run
        self._warn = warn
        self._queue: queue.Queue[object] = queue.Queue(queue_records)
        self._batch = batch_records
        self._delay = batch_delay_s
        self._timeout = export_timeout_s
        self._metric_interval = metric_interval_s
        self._mapper = SpanMapper(run)
        self._thread: threading.Thread | None = None
        self._dropping = False
        self._failing = False
        self.dropped = 0
        self.exported_spans = 0
        self.failed_batches = 0
        self._span_exporter: Any = None
        self._meter_provider: Any = None
        self._instruments: dict[str, Any] = {}

    # -- the proxy's side -----------------------------------------------------------------

    def start(self) -> None:
        """Import the SDK and build its exporters (raises ImportError without the
        `otel` extra), then start the worker."""
        from mcp_layers_core import otel_sdk
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        # The SDK logs every failed attempt; a dead collector would flood the proxy's
        # log. This module says it once per stretch of failures instead.
        for name in ("opentelemetry.exporter.otlp", "opentelemetry.sdk.metrics"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        self._span_exporter = OTLPSpanExporter(
            endpoint=f"{self.endpoint}/v1/traces", headers=self._headers, timeout=self._timeout
        )
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(
                endpoint=f"{self.endpoint}/v1/metrics",
                headers=self._headers,
                timeout=self._timeout,
            ),
            export_interval_millis=self._metric_interval * 1000,
            export_timeout_millis=self._timeout * 1000,
        )
        self._meter_provider = MeterProvider(
            metric_readers=[reader], resource=otel_sdk.resource(self.run), shutdown_on_exit=False
        )
        meter = self._meter_provider.get_meter(otel_sdk.SCOPE_NAME, otel_sdk.version())
        self._instruments = {
            OPERATION_DURATION: meter.create_histogram(
                OPERATION_DURATION,
                unit="s",
                description="The duration of the MCP request as observed at the proxy, "
                "from the request until its answer ended.",
                explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
            ),
            SESSION_DURATION: meter.create_histogram(
                SESSION_DURATION,
                unit="s",
                description="The duration of the MCP session as observed at the proxy.",
                explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
            ),
            EXCHANGES: meter.create_counter(
                EXCHANGES,
                unit="{exchange}",
                description="Exchanges recorded, by outcome and retry origin.",
            ),
        }
        self._thread = threading.Thread(target=self._run, name="mcp-layers-otlp", daemon=True)
        self._thread.start()

    def submit(self, records: list[dict[str, Any]]) -> None:
        """Hand finished records over; never blocks. A full queue drops and counts."""
        for record in records:
            try:
                self._queue.put_nowait(record)
            except queue.Full:
                self.dropped += 1
                if not self._dropping:
                    self._dropping = True
                    self._warn(
                        "mcp-layers: OTLP export queue full (collector slow or down?); "
                        "records are dropped from the export (the recording keeps them)"
                    )

    def take(self, emitted: list[Emitted], hooked: str | None) -> None:
        """The recorder's subscriber interface (`mcp_layers_subscribers.Subscriber`):
        finished records are submitted as they come."""
        self.submit([e.record for e in emitted])

    def flush(self) -> None:
        """A batch ended: nothing to do, the worker sends on its own clock."""

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Send what is queued, within `timeout_s`, then stop (abandoning the rest)."""
        thread = self._thread
        if thread is None:
            return
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._queue.put(_STOP, timeout=max(0.01, deadline - time.monotonic()))
                break
            except queue.Full:
                if time.monotonic() >= deadline:
                    break
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            self._warn(
                f"mcp-layers: OTLP export did not finish within {timeout_s:.0f} s; "
                f"{self._queue.qsize()} records were not exported"
            )
        else:
            self._shutdown_sdk(deadline)
        if self.dropped:
            self._warn(f"mcp-layers: {self.dropped} records were dropped from the OTLP export")
        self._thread = None

    # -- the worker's side ----------------------------------------------------------------

    def _run(self) -> None:
        while True:
            batch, stop = self._take_batch()
            if batch:
                try:
                    self._export(batch)
                except Exception as e:  # the worker must live on, whatever a record holds
                    self._failed(f"mapping or encoding failed ({e!r})")
            if stop:
                return

    def _take_batch(self) -> tuple[list[dict[str, Any]], bool]:
        first = self._queue.get()
        if first is _STOP:
            return [], True
        batch: list[dict[str, Any]] = [first]  # type: ignore[list-item]
        deadline = time.monotonic() + self._delay
        while len(batch) < self._batch:
            try:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if item is _STOP:
                return batch, True
            batch.append(item)  # type: ignore[arg-type]
        return batch, False

    def _export(self, records: list[dict[str, Any]]) -> None:
        from mcp_layers_core import otel_sdk
        from opentelemetry.sdk.trace.export import SpanExportResult

        spans = []
        measurements: list[Measurement] = []
        for record in records:
            mapped = self._mapper.map(record)
            spans.extend(mapped.spans)
            measurements.extend(mapped.measurements)
            # Hand the GIL back to the proxy's event loop between records rather than
            # only at the interpreter's forced switch (5 ms): the export must not delay
            # the traffic, even by a scheduling slice.
            time.sleep(0)
        for m in measurements:
            instrument = self._instruments.get(m.instrument)
            if instrument is None:
                continue
            if m.instrument == EXCHANGES:
                instrument.add(int(m.value), m.attributes)
            else:
                instrument.record(m.value, m.attributes)
        if not spans:
            return
        result = self._span_exporter.export(otel_sdk.readable_spans(spans, self.run))
        if result is SpanExportResult.SUCCESS:
            self.exported_spans += len(spans)
            self._dropping = False
            if self._failing:
                self._failing = False
                self._warn("mcp-layers: OTLP export works again")
        else:
            self._failed(f"the collector at {self.endpoint} did not take {len(spans)} spans")

    def _failed(self, why: str) -> None:
        self.failed_batches += 1
        if not self._failing:
            self._failing = True
            self._warn(f"mcp-layers: OTLP export failed: {why}; traffic is unaffected")

    def _shutdown_sdk(self, deadline: float) -> None:
        left_ms = max(10.0, (deadline - time.monotonic()) * 1000)
        try:
            if self._meter_provider is not None:
                self._meter_provider.shutdown(timeout_millis=left_ms)
            if self._span_exporter is not None:
                self._span_exporter.shutdown()
        except Exception as e:  # shutting down must not fail the proxy's exit
            self._warn(f"mcp-layers: OTLP exporter shutdown failed ({e!r})")
