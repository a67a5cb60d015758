"""The recorder's queue: the core's work, noted by the hooks as steps, run in the order
they came, in batches after the answers have gone out (README, "When records are
written").

A step is one of the recorder's methods with the values it needs bound (`Step`, a
`functools.partial`): `StepQueue.later` takes the method and its arguments, so mypy
checks them against the method's own signature, and a batch calls each step with none.
It is the hot path: a partial is made and called in C, no dearer than the tuples it
replaced (`op[0](*op[1:])`) and cheaper than a class per kind of step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Final, ParamSpec

P = ParamSpec("P")

#: One step of the core: a recorder method and its arguments, run with none.
Step = partial[None]

#: The queue runs at the latest this long after its first step (a record is written
#: within it)...
BATCH_DELAY_S: Final = 0.02
#: ...or soon once this many steps wait (about 20 JSON exchanges): after a millisecond,
#: not on the loop's next turn, because mitmproxy sends an answer only after its hook
#: task resumes (its tasks start eagerly and then wait for the connection's lock), and a
#: callback queued from inside the hook would run before that send...
BATCH_OPS: Final = 64
BATCH_SOON_S: Final = 0.001
#: ...or by the hook itself past this many (the loop is not getting round to it), or
#: past this many bytes of stream chunks waiting to be read: memory stays bounded.
MAX_QUEUED_OPS: Final = 2048
MAX_QUEUED_BYTES: Final = 256 * 1024


class StepQueue:
    """Steps in hook order; `flush` runs them all as one batch. Without a loop (before
    `running`, after `done`, or while flows are saved) each step runs at once."""

    def __init__(self, report: Callable[[str, Exception], None], after: Callable[[], None]) -> None:
        self._report = report  # a step that raised: the others still run
        self._after = after  # the batch is over (the recorder hands its records on)
        self.steps: list[Step] = []
        #: The loop the batches run on; None: run each step at once.
        self.loop: asyncio.AbstractEventLoop | None = None
        #: True while a batch runs.
        self.running = False
        #: Bytes of stream chunks in the queue (see MAX_QUEUED_BYTES); the tap adds to it.
        self.queued_bytes = 0
        self._timer: asyncio.TimerHandle | None = None
        self._soon = False

    def later(self, fn: Callable[P, None], /, *args: P.args, **kwargs: P.kwargs) -> None:
        """Queue `fn(*args)`, or run it now when there is no loop to run it on."""
        loop = self.loop
        if loop is None:
            fn(*args, **kwargs)
            return
        steps = self.steps
        steps.append(partial(fn, *args, **kwargs))
        if len(steps) == 1:
            self._timer = loop.call_later(BATCH_DELAY_S, self.flush)
        elif len(steps) >= BATCH_OPS:
            if not self._soon:
                self._soon = True
                loop.call_later(BATCH_SOON_S, self.flush)
            elif len(steps) >= MAX_QUEUED_OPS:
                self.flush()  # the loop is not getting round to it: memory stays bounded

    def flush(self) -> None:
        """Run every queued step now, in order, as one batch."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._soon = False
        self.queued_bytes = 0
        steps = self.steps
        if not steps:
            return
        self.steps = []
        self.running = True
        try:
            for step in steps:
                try:
                    step()
                except Exception as e:  # one step failed: the others still run
                    self._report("batch", e)
        finally:
            self.running = False
            self._after()
