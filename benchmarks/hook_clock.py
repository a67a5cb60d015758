"""A mitmproxy script for the benchmarks: the real addon, with a CPU clock on its hooks.

    mitmdump -s benchmarks/hook_clock.py ...

It loads `addon/mcp_layers.py` (both its addons) and times, in CPU time of the proxy's
thread, every hook of theirs, the stream tap and every batch the recorder runs after
the answers have gone out: the cost of the addon where it is paid, inside a running
mitmdump, with mitmproxy's own work around it. `GET /__hook_clock` on the proxy answers
with the counters as JSON (and is not passed upstream), so a benchmark reads them before
and after a run. Only for measuring: the clock itself costs ~1 µs per timed call.
"""

from __future__ import annotations

import functools
import gc
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mitmproxy import http

ADDON = Path(__file__).resolve().parent.parent / "addon" / "mcp_layers.py"
CLOCK_PATH = "/__hook_clock"
HOOKS = ("request", "responseheaders", "response", "error")

_ns: dict[str, int] = {}
_calls: dict[str, int] = {}
_depth = [0]


def _timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    clock = time.thread_time_ns

    @functools.wraps(fn)
    def timed(*args: Any) -> Any:
        if _depth[0]:
            return fn(*args)  # nested (a batch run from inside a hook): counted once
        _depth[0] += 1
        start = clock()
        try:
            return fn(*args)
        finally:
            _ns[name] = _ns.get(name, 0) + clock() - start
            _calls[name] = _calls.get(name, 0) + 1
            _depth[0] -= 1

    return timed


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("mcp_layers", ADDON)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mcp_layers"] = module
    spec.loader.exec_module(module)
    return module


def _gc_clock(phase: str, info: dict[str, Any]) -> None:
    """Garbage collection, timed like a hook: the whole process's, addon or not."""
    if phase == "start":
        _gc_start[0] = time.thread_time_ns()
    else:
        name = f"gc (gen {info.get('generation')}, whole process)"
        _ns[name] = _ns.get(name, 0) + time.thread_time_ns() - _gc_start[0]


_gc_start = [0]
gc.callbacks.append(_gc_clock)
mcp_layers = _load()
recorder = mcp_layers.recorder
recorder.queue.flush = _timed("batch", recorder.queue.flush)  # every batch runs through it
_tap_call = mcp_layers.StreamTap.__call__
mcp_layers.StreamTap.__call__ = _timed("stream tap", _tap_call)
for index, addon in enumerate(mcp_layers.addons):
    for hook in HOOKS:
        if callable(getattr(addon, hook, None)):
            setattr(addon, hook, _timed(f"{index}.{hook}", getattr(addon, hook)))


class ClockReader:
    """Answers `GET /__hook_clock` with the counters; runs before the addon's hooks."""

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.request.path == CLOCK_PATH:
            body = json.dumps({"ns": _ns, "calls": _calls, "cpu": time.process_time()})
            flow.response = http.Response.make(200, body, {"content-type": "application/json"})


addons = [ClockReader(), *mcp_layers.addons]
