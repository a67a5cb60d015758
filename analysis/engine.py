"""Run a job over the inputs: read each byte once, decode in parallel, merge partial results.

A job (see `Job`) says which fields it needs and how to fold records into a state. Each
worker process keeps one state across all the tasks it takes and hands it back once at the
end, so merging costs the same whatever the number of tasks. A job that follows links
between records (a retry naming an earlier attempt) also returns a small part per task;
the main process takes those parts in input order, so a link that crosses a task boundary
is followed exactly as in one process.

Small inputs are read in this process: starting workers would cost more than it saves.
"""

from __future__ import annotations

import gc
import os
import queue
import signal
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import AnalysisError, NewerRecordVersion
from .inputs import (
    Source,
    Task,
    TruncatedStream,
    count_lines,
    open_stream,
    range_tasks,
    read_range,
    stream_blocks,
    total_size,
)
from .limits import (
    BLOCK_BYTES,
    MAX_REPORTED_BAD_LINES,
    MIN_RANGE_BYTES,
    PARALLEL_MIN_BYTES,
    RANGE_BYTES,
    STREAM_TASKS_PER_WORKER,
)
from .records import BadLine, BlockDecoder


class Job(Protocol):
    """What the engine runs. Worker side: `fields`, `new_state`, `feed`, `end_task`,
    `end_worker`; main side, in this process: `consume` (in input order) and `merge`."""

    fields: tuple[str, ...]

    def new_state(self) -> Any: ...

    def feed(self, state: Any, records: list[Any], task: Task) -> None: ...

    def end_task(self, state: Any, task: Task) -> Any: ...

    def end_worker(self, state: Any) -> Any: ...

    def consume(self, part: Any, task: Task) -> None: ...

    def merge(self, result: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A bad line as a worker saw it: where its block starts and its index in the block."""

    source: int
    offset: int
    index: int
    reason: str


@dataclass(slots=True)
class _TaskDone:
    number: int
    records: int
    bad: list[Diagnostic]  # the first few, to show
    bad_total: int
    part: Any
    newer: Diagnostic | None = None  # a record of a newer format version: stop here
    newer_version: int = 0


@dataclass(slots=True)
class Report:
    """What reading found besides records: the engine fills it, the CLI prints it."""

    records: int = 0
    bad_lines: int = 0
    messages: list[str] = field(default_factory=list)


Warn = Callable[[str], None]


def run(
    job: Job,
    sources: Sequence[Source],
    *,
    jobs: int,
    warn: Warn,
    progress: Callable[[int], None] | None = None,
    range_bytes: int = RANGE_BYTES,
    block_bytes: int = BLOCK_BYTES,
    parallel_min_bytes: int = PARALLEL_MIN_BYTES,
) -> Report:
    """Feed every record of `sources` to `job`; returns counts of records and bad lines.

    `warn` gets each bad-line message (`path:lineno: reason`) as it is found, in input
    order. Raises NewerRecordVersion (with `where` set) and AnalysisError.
    """
    report = Report()
    lines = _LineNumbers(sources)
    total = total_size(sources)
    if total is not None and jobs > 1:
        # Several tasks per worker, so that one slow range does not leave a core idle.
        range_bytes = min(range_bytes, max(MIN_RANGE_BYTES, total // (jobs * 4) + 1))
    plan = _Plan(sources, lines, range_bytes, block_bytes, progress)
    tasks = plan.tasks()
    # Look ahead far enough to know whether the input is big enough for workers.
    ahead: list[Task] = []
    ahead_bytes = 0
    for task in tasks:
        ahead.append(task)
        ahead_bytes += task.end - task.offset
        if ahead_bytes >= parallel_min_bytes:
            break
    all_tasks = _chain(ahead, tasks)
    consumer = _Consumer(job, sources, lines, report, warn, progress)
    if jobs <= 1 or ahead_bytes < parallel_min_bytes:
        _run_here(job, sources, all_tasks, consumer, block_bytes)
    else:
        _run_workers(job, sources, all_tasks, consumer, jobs, block_bytes)
    report.messages.extend(plan.messages)
    report.messages.extend(consumer.not_shown())
    return report


def _chain(first: list[Task], rest: Iterator[Task]) -> Iterator[Task]:
    yield from first
    yield from rest


class _Plan:
    """Tasks for all sources in order; streams are read here, a block at a time."""

    def __init__(
        self,
        sources: Sequence[Source],
        lines: _LineNumbers,
        range_bytes: int,
        block_bytes: int,
        progress: Callable[[int], None] | None,
    ) -> None:
        self.sources = sources
        self.lines = lines
        self.range_bytes = range_bytes
        self.block_bytes = block_bytes
        self.progress = progress
        self.messages: list[str] = []

    def tasks(self) -> Iterator[Task]:
        number = 0
        for index, source in enumerate(self.sources):
            if source.splittable:
                for task in range_tasks(source, index, number, self.range_bytes):
                    number += 1
                    yield task
                continue
            try:
                raw, stream = open_stream(source)
            except OSError as exc:
                raise AnalysisError(f"{source.name}: {exc}") from None
            with raw, stream:
                blocks = stream_blocks(stream, self.block_bytes)
                read = 0  # of the file on disk, for the progress bar
                try:
                    for offset, data, final in blocks:
                        self.lines.note_block(index, offset, data)
                        yield Task(number, index, offset, offset + len(data), data, final)
                        number += 1
                        if self.progress is not None and source.size is not None:
                            now = min(raw.tell(), source.size)
                            self.progress(now - read)
                            read = now
                except TruncatedStream:
                    self.messages.append(
                        f"{source.name}: compressed stream ends early (a copy cut short?); "
                        "read what was there"
                    )


class _LineNumbers:
    """Works out a bad line's number from where its block starts, only when one is found."""

    def __init__(self, sources: Sequence[Source]) -> None:
        self.sources = sources
        self.stream_lines: dict[tuple[int, int], int] = {}  # (source, offset) -> lines before
        self.stream_total: dict[int, int] = {}
        self.file_cache: dict[int, tuple[int, int]] = {}  # source -> (offset, lines before)

    def note_block(self, source: int, offset: int, data: bytes) -> None:
        before = self.stream_total.get(source, 0)
        self.stream_lines[(source, offset)] = before
        self.stream_total[source] = before + data.count(b"\n")

    def line(self, d: Diagnostic) -> int:
        before = self.stream_lines.get((d.source, d.offset))
        if before is None:
            cached = self.file_cache.get(d.source)
            src = self.sources[d.source]
            if cached is not None and cached[0] <= d.offset and not src.compressed:
                # Count on from the last answer: bad lines come in input order.
                before = cached[1] + count_lines(src, d.offset, start=cached[0])
            else:
                before = count_lines(src, d.offset)
            self.file_cache[d.source] = (d.offset, before)
        return before + d.index + 1


class _Consumer:
    """Takes finished tasks in input order: bad-line messages, ordered parts, progress."""

    def __init__(
        self,
        job: Job,
        sources: Sequence[Source],
        lines: _LineNumbers,
        report: Report,
        warn: Warn,
        progress: Callable[[int], None] | None,
    ) -> None:
        self.job = job
        self.sources = sources
        self.lines = lines
        self.report = report
        self.warn = warn
        self.progress = progress
        self.tasks: dict[int, Task] = {}
        self.waiting: dict[int, _TaskDone] = {}
        self.next = 0
        self.bad: dict[int, int] = {}  # source -> bad lines
        self.shown: dict[int, int] = {}  # source -> bad lines shown one by one

    def submitted(self, task: Task) -> None:
        self.tasks[task.number] = task

    def done(self, msg: _TaskDone) -> None:
        self.waiting[msg.number] = msg
        while self.next in self.waiting:
            self._take(self.waiting.pop(self.next), self.tasks.pop(self.next))
            self.next += 1

    def _take(self, msg: _TaskDone, task: Task) -> None:
        name = self.sources[task.source].name
        self.report.records += msg.records
        self.report.bad_lines += msg.bad_total
        self.bad[task.source] = self.bad.get(task.source, 0) + msg.bad_total
        for d in msg.bad:
            shown = self.shown.get(task.source, 0)
            if shown < MAX_REPORTED_BAD_LINES:
                self.warn(f"{name}:{self.lines.line(d)}: {d.reason}")
                self.shown[task.source] = shown + 1
        if msg.newer is not None:
            raise NewerRecordVersion(
                msg.newer_version, where=f"{name}:{self.lines.line(msg.newer)}"
            )
        if msg.part is not None:
            self.job.consume(msg.part, task)
        if self.progress is not None and task.data is None:
            self.progress(task.end - task.offset)

    def not_shown(self) -> list[str]:
        """One line per input with more bad lines than were shown."""
        return [
            f"{self.sources[s].name}: {n - self.shown.get(s, 0)} more bad lines not shown"
            for s, n in sorted(self.bad.items())
            if n > self.shown.get(s, 0)
        ]

    @property
    def in_flight(self) -> int:
        return len(self.tasks)


# --------------------------------------------------------------------- doing a task


def _do_task(
    job: Job,
    state: Any,
    decoder: BlockDecoder,
    sources: Sequence[Source],
    task: Task,
    block_bytes: int,
) -> _TaskDone:
    msg = _TaskDone(task.number, 0, [], 0, None)
    if task.data is not None:
        blocks: Iterator[tuple[int, bytes | memoryview]] = iter(((task.offset, task.data),))
    else:
        path = sources[task.source].path
        assert path is not None
        blocks = read_range(path, task.offset, task.end, block_bytes)
    for offset, data in blocks:
        final = task.final and offset + len(data) >= task.end
        try:
            records, bad = decoder.decode(data, final=final)
        except NewerRecordVersion as exc:
            if exc.earlier:
                _keep_bad(msg, task.source, offset, exc.earlier)
            msg.newer = Diagnostic(task.source, offset, exc.index, "")
            msg.newer_version = exc.version
            return msg
        msg.records += len(records)
        if bad:
            _keep_bad(msg, task.source, offset, bad)
        job.feed(state, records, task)
    msg.part = job.end_task(state, task)
    return msg


def _keep_bad(msg: _TaskDone, source: int, offset: int, bad: list[BadLine]) -> None:
    msg.bad_total += len(bad)
    room = MAX_REPORTED_BAD_LINES - len(msg.bad)
    msg.bad.extend(Diagnostic(source, offset, b.index, b.reason) for b in bad[: max(room, 0)])


def _run_here(
    job: Job,
    sources: Sequence[Source],
    tasks: Iterator[Task],
    consumer: _Consumer,
    block_bytes: int,
) -> None:
    decoder = BlockDecoder(job.fields)
    state = job.new_state()
    collecting = gc.isenabled()
    gc.disable()  # as in the workers: the loops make no cycles, collections only cost
    try:
        for task in tasks:
            consumer.submitted(task)
            consumer.done(_do_task(job, state, decoder, sources, task, block_bytes))
    finally:
        if collecting:
            gc.enable()
    job.merge(job.end_worker(state))


# --------------------------------------------------------------------- worker processes


def _worker(
    job: Job, sources: Sequence[Source], tasks: Any, results: Any, block_bytes: int
) -> None:
    # Ctrl-C is the main process's to handle; it stops the workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The hot loops make no reference cycles; collections would only cost time.
    gc.disable()
    try:
        decoder = BlockDecoder(job.fields)
        state = job.new_state()
        while (task := tasks.get()) is not None:
            msg = _do_task(job, state, decoder, sources, task, block_bytes)
            results.put(msg)
            if msg.newer is not None:
                return
        results.put(("done", job.end_worker(state)))
    except BaseException:
        results.put(("error", traceback.format_exc()))


def _run_workers(
    job: Job,
    sources: Sequence[Source],
    tasks: Iterator[Task],
    consumer: _Consumer,
    jobs: int,
    block_bytes: int,
) -> None:
    import multiprocessing  # only here: in-process runs need not import it

    methods = multiprocessing.get_all_start_methods()
    ctx = (
        multiprocessing.get_context("fork")
        if "fork" in methods
        else multiprocessing.get_context("spawn")
    )
    task_q: Any = ctx.Queue()
    result_q: Any = ctx.Queue()
    # Start the workers before anything is put on a queue: a put starts a feeder thread,
    # and forking a process that has threads is unsafe.
    procs = [
        ctx.Process(target=_worker, args=(job, sources, task_q, result_q, block_bytes), daemon=True)
        for _ in range(jobs)
    ]
    for p in procs:
        p.start()
    window = jobs * STREAM_TASKS_PER_WORKER + jobs
    finished = 0
    try:
        exhausted = False
        while True:
            while not exhausted and consumer.in_flight < window:
                task = next(tasks, None)
                if task is None:
                    exhausted = True
                    for _ in procs:
                        task_q.put(None)
                    break
                consumer.submitted(task)
                task_q.put(task)
            if exhausted and consumer.in_flight == 0 and finished == len(procs):
                break
            msg = _next_message(result_q, procs)
            if isinstance(msg, _TaskDone):
                consumer.done(msg)
            elif msg[0] == "done":
                job.merge(msg[1])
                finished += 1
            else:
                raise AnalysisError(f"a worker failed:\n{msg[1]}")
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join()
        task_q.close()
        result_q.close()


def _next_message(results: Any, procs: Sequence[Any]) -> Any:
    while True:
        try:
            return results.get(timeout=0.5)
        except queue.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise AnalysisError(
                    f"a worker process died (exit code {dead[0].exitcode})"
                ) from None


def default_jobs() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
