"""How many Python calls the addon makes to record one exchange: a count, not a timing.

On a shared 2-core machine a timing wanders by tens of percent from one run to the next;
the number of Python function calls the addon makes per exchange does not, so it can be
compared across commits. This loads `addon/mcp_layers.py` as `mitmdump -s` does
(mitmproxy's own `load_script`), into a master carrying mitmdump's own addon chain, in
process and without sockets, and drives mitmproxy's hooks through mitmproxy's dispatch in
the order the proxy calls them:

- `json`: a `tools/call` POST answered with a small JSON body (requestheaders, request,
  responseheaders, response);
- `sse`: the same POST answered by an SSE stream of three events (two
  `notifications/progress`, then the response), fed chunk by chunk through the
  `flow.response.stream` callable the addon installs, then the stream's end (`b""`) and
  the response hook.

The recorder runs on an event loop, as in mitmdump (`running` is called inside one), so
its work is queued by the hooks and run later in a batch: each count lasts until that
batch has written the exchange's record. `sys.setprofile` counts every Python `call`
event made while code under `addon/` is on the stack: calls *into* `addon/` code (the
addon's own functions) and all Python calls (those plus what they call in mitmproxy and
the standard library; C functions are not counted). Warm-up exchanges on the same
session come first, so the count is of an exchange in a running session.

Only the mitmproxy hook interface is used (the script's `addons`, `load`, `configure`,
`running`, `done`, the flow hooks and the stream callable), never the addon's internals,
so the count survives refactors of them.

    .venv/bin/python benchmarks/call_count.py
    .venv/bin/python benchmarks/call_count.py --workloads json --modules
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any, cast

from mitmproxy import hooks, http
from mitmproxy.addons.script import load_script
from mitmproxy.test import taddons, tflow

REPO = Path(__file__).resolve().parent.parent
ADDON = REPO / "addon" / "mcp_layers.py"
WORKLOADS = ("json", "sse")
#: The aims of issue 26, "Cost": calls into addon code per exchange.
AIMS = {"json": 70, "sse": 90}
SESSION = "call-count-session"
WARMUP = 10
#: Exchanges counted one by one (each alone in its batch); their counts must agree.
SAMPLES = 5
#: Exchanges counted together in one batch, as under load (c=8 in addon_bench.py).
BATCH = 8
#: Wait after an exchange for the recorder's deferred batch: longer than any batching
#: delay the addon uses (addon_bench.py's SETTLE_S says the same of the running proxy).
SETTLE_S = 0.15


@dataclass
class CallCount:
    """One workload's figures; per exchange unless said otherwise."""

    workload: str
    addon_calls: int  # calls into code under addon/ (median of the samples)
    all_calls: int  # every Python call made while addon code is on the stack
    samples: list[tuple[int, int]]  # (addon, all) of each exchange counted alone
    modules: dict[str, int]  # calls into each addon module (the median sample)
    phases: dict[str, int]  # all calls, by the hook (or the batch) they were made in
    others: dict[str, int]  # calls out of addon code, by the callee's file (the median)
    batched_addon: float  # per exchange, BATCH exchanges in one batch
    batched_all: float
    aim: int | None = None


class _Profiler:
    """A `sys.setprofile` function: counts Python calls made with addon code on the stack."""

    def __init__(self, root: str) -> None:
        self.root = root  # a call is the addon's when its code lives here (script, core)
        self.phase = "?"
        self.addon = 0
        self.all = 0
        self.modules: Counter[str] = Counter()
        self.phases: Counter[str] = Counter()
        self.others: Counter[str] = Counter()  # calls out of the addon, by callee's file

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if event != "call":  # also resumed generators and coroutines, as profilers count
            return
        filename = _file_of(frame)
        own = filename.startswith(self.root)
        if not own and not _under(frame.f_back, self.root):
            return  # mitmproxy's or asyncio's own work, not caused by the addon
        self.all += 1
        self.phases[self.phase] += 1
        if own:
            self.addon += 1
            self.modules[filename[len(self.root) :]] += 1
        else:
            self.others[_short(filename)] += 1


def _file_of(frame: FrameType) -> str:
    """The file of the module that defined the running code: for the methods a dataclass
    generates (`<string>`), the module of the dataclass, so the core's event classes
    count as the addon's."""
    filename = frame.f_code.co_filename
    if filename.startswith("<"):
        return str(frame.f_globals.get("__file__") or filename)
    return filename


def _under(frame: FrameType | None, root: str) -> bool:
    while frame is not None:
        if _file_of(frame).startswith(root):
            return True
        frame = frame.f_back
    return False


def _short(filename: str) -> str:
    """`mitmproxy/addonmanager.py`, `python3.12/contextlib.py`: a file, briefly."""
    parts = Path(filename).parts
    for anchor in ("site-packages", "lib"):
        if anchor in parts:
            return "/".join(parts[len(parts) - parts[::-1].index(anchor) :])
    return filename


# -- the traffic -----------------------------------------------------------------------


def _message(payload: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **payload}).encode()


def _result(rid: int) -> bytes:
    result = {"content": [{"type": "text", "text": "ok"}], "isError": False}
    return _message({"id": rid, "result": result})


def _sse_events(rid: int) -> list[bytes]:
    """What addon_bench.py's upstream sends: two progress notifications, the response."""
    progress = [
        _message(
            {
                "method": "notifications/progress",
                "params": {"progressToken": rid, "progress": n, "total": 3},
            }
        )
        for n in (1, 2)
    ]
    return [b"event: message\ndata: " + m + b"\n\n" for m in (*progress, _result(rid))]


def _post(rid: int) -> http.HTTPFlow:
    """The POST addon_bench.py's client sends."""
    body = _message(
        {"id": rid, "method": "tools/call", "params": {"name": "echo", "arguments": {"n": rid}}}
    )
    now = time.time()
    headers = (
        (b"Host", b"127.0.0.1"),
        (b"Content-Type", b"application/json"),
        (b"Accept", b"application/json, text/event-stream"),
        (b"MCP-Protocol-Version", b"2025-11-25"),
        (b"Mcp-Session-Id", SESSION.encode()),
        (b"Content-Length", str(len(body)).encode()),
    )
    req = http.Request(
        "127.0.0.1",
        8000,
        b"POST",
        b"http",
        b"",
        b"/mcp",
        b"HTTP/1.1",
        headers,
        body,
        None,
        now,
        now,
    )
    return tflow.tflow(req=req)


def _response_head(sse: bool, length: int) -> http.Response:
    """The answer's head, its body not read yet (as at mitmproxy's responseheaders)."""
    headers: tuple[tuple[bytes, bytes], ...]
    if sse:
        headers = (
            (b"Content-Type", b"text/event-stream"),
            (b"Cache-Control", b"no-cache"),
            (b"Transfer-Encoding", b"chunked"),
        )
    else:
        headers = ((b"Content-Type", b"application/json"), (b"Content-Length", b"%d" % length))
    return http.Response(b"HTTP/1.1", 200, b"OK", headers, None, None, time.time(), None)


# -- driving the hooks as mitmproxy does -------------------------------------------------


def _hook(name: str, *args: Any) -> hooks.Hook:
    """mitmproxy's hook event of that name (the name of the addon method it calls)."""
    hook: Any = hooks.all_hooks[name]
    return cast(hooks.Hook, hook(*args))


async def _exchange(tctx: Any, rid: int, sse: bool, prof: _Profiler) -> None:
    """One exchange's hooks, each through mitmproxy's dispatch (`handle_lifecycle`, which
    also sends the `update` hook after each); nothing here waits on the loop, so the
    recorder's batch cannot run in the middle of an exchange."""
    addons = tctx.master.addons
    flow = _post(rid)
    for name in ("requestheaders", "request"):
        prof.phase = name
        await addons.handle_lifecycle(_hook(name, flow))
    body = _result(rid)
    flow.response = _response_head(sse, len(body))
    prof.phase = "responseheaders"
    await addons.handle_lifecycle(_hook("responseheaders", flow))
    if sse:
        prof.phase = "stream"
        _stream(flow, _sse_events(rid))
    else:
        flow.response.data.content = body  # the body read whole, as mitmproxy does
    flow.response.timestamp_end = time.time()
    prof.phase = "response"
    await addons.handle_lifecycle(_hook("response", flow))


def _stream(flow: http.HTTPFlow, chunks: list[bytes]) -> None:
    """Each chunk through the stream callable, then `b""` (the end), as mitmproxy does."""
    assert flow.response is not None
    tap = flow.response.stream
    if not callable(tap):
        raise RuntimeError("the addon set no stream callable on an SSE answer")
    for chunk in [*chunks, b""]:
        out = tap(chunk)
        if out != chunk:
            raise RuntimeError(f"the stream callable changed a chunk: {chunk!r} -> {out!r}")


def _requests_recorded(directory: Path) -> int:
    return sum(
        json.loads(line).get("kind") == "request"
        for path in directory.rglob("*.jsonl")
        for line in path.read_bytes().splitlines()
        if line.strip()
    )


@dataclass
class _Proxy:
    """The addon in its master, and what has been sent through it so far."""

    tctx: Any
    root: str  # the folder of the script and its core
    records: Path  # mcp_record_dir
    sse: bool
    sent: int = 0

    async def counted(self, n: int) -> _Profiler:
        """Count the calls of `n` exchanges sent back to back and of their batch."""
        prof = _Profiler(self.root)
        sys.setprofile(prof)
        try:
            for _ in range(n):
                self.sent += 1
                await _exchange(self.tctx, self.sent, self.sse, prof)
            prof.phase = "batch"
            await asyncio.sleep(SETTLE_S)  # the loop runs the recorder's deferred batch
        finally:
            sys.setprofile(None)
        found = _requests_recorded(self.records)
        if found != self.sent:
            raise RuntimeError(
                f"{found} request records for {self.sent} exchanges after {SETTLE_S} s: the "
                "addon's batch did not run in time, or did not record every exchange"
            )
        return prof


def _mitmdump_chain() -> list[Any]:
    """The addons `mitmdump` itself loads (mitmproxy.tools.dump.DumpMaster): the
    recorder's `update` notices go to every one of them, as in a running mitmdump."""
    from mitmproxy import addons
    from mitmproxy.addons import dumper, errorcheck, keepserving, readfile

    chain: list[Any] = addons.default_addons()  # type: ignore[no-untyped-call]
    chain += [dumper.Dumper(), keepserving.KeepServing(), readfile.ReadFileStdin()]  # type: ignore[no-untyped-call]
    return [*chain, errorcheck.ErrorCheck()]


def _script(path: Path) -> ModuleType:
    """A fresh copy of the addon script, loaded by mitmproxy's own script loader (which
    puts the script's folder first on sys.path while it runs it, as `mitmdump -s` does)."""
    module = load_script(str(path))
    if module is None:
        raise RuntimeError(f"mitmproxy could not load {path} (its error is logged above)")
    core = sys.modules.get("mcp_layers_core")
    if core is not None and not str(core.__file__).startswith(str(path.parent)):
        # Another build's core was imported first: its calls would not be counted.
        raise RuntimeError(f"mcp_layers_core comes from {core.__file__}: use a fresh process")
    return module


async def _measure(workload: str, addon: Path, records: Path) -> CallCount:
    script = _script(addon)
    # taddons.context is untyped; it is what the adapter tests drive the addon with.
    with taddons.context(*_mitmdump_chain(), script, loadcore=False) as tctx:  # type: ignore[no-untyped-call]
        # addon_bench.py's mitmdump: `-q` (flow_detail=0), lazy connections, a record dir.
        tctx.configure(
            script, flow_detail=0, connection_strategy="lazy", mcp_record_dir=str(records)
        )
        # Inside the running loop, as in mitmdump: the recorder batches its work on it.
        tctx.master.addons.invoke_addon_sync(script, _hook("running"))
        proxy = _Proxy(tctx, str(addon.parent) + os.sep, records, workload == "sse")
        try:
            for _ in range(WARMUP):
                await proxy.counted(1)
            singles = [await proxy.counted(1) for _ in range(SAMPLES)]
            batch = await proxy.counted(BATCH)
        finally:
            # As mitmdump stops: `done` to every addon, and mitmproxy's log handler removed.
            await tctx.master.done()
    median = sorted(singles, key=lambda p: p.addon)[len(singles) // 2]
    return CallCount(
        workload=workload,
        addon_calls=median.addon,
        all_calls=median.all,
        samples=[(p.addon, p.all) for p in singles],
        modules=dict(median.modules.most_common()),
        others=dict(median.others.most_common()),
        phases=dict(median.phases),
        batched_addon=batch.addon / BATCH,
        batched_all=batch.all / BATCH,
        aim=AIMS.get(workload),
    )


def count_calls(workloads: Sequence[str] = WORKLOADS, addon: Path = ADDON) -> dict[str, CallCount]:
    """The call counts of each workload (each on a fresh script, loop and recording).
    `addon`: another build of the script (a checkout before a change), in a fresh process."""
    counts = {}
    for workload in workloads:
        with tempfile.TemporaryDirectory(prefix="call-count-") as tmp:
            counts[workload] = asyncio.run(_measure(workload, addon.resolve(), Path(tmp)))
    return counts


# -- the report ------------------------------------------------------------------------


def format_table(counts: dict[str, CallCount]) -> str:
    out = [
        "Python calls per exchange (call_count.py): the addon's hooks, its stream tap and the "
        "deferred batch that writes the record; mitmdump's addon chain, no sockets",
        "",
        "workload | addon calls (aim) | all Python calls | addon modules "
        f"| in a batch of {BATCH}: addon / all",
        "-" * 96,
    ]
    for c in counts.values():
        aim = f"(<={c.aim})" if c.aim is not None else ""
        out.append(
            f"{c.workload:<8} | {c.addon_calls:>10} {aim:>6} | {c.all_calls:>16} "
            f"| {len(c.modules):>13} | {c.batched_addon:>15.1f} / {c.batched_all:.1f}"
        )
    out.append("")
    for c in counts.values():
        phases = ", ".join(f"{name} {n}" for name, n in c.phases.items())
        line = f"{c.workload}: all Python calls by hook: {phases}"
        if len({a for a, _ in c.samples}) > 1:  # the count should not move: say so if it did
            line += f"; the {SAMPLES} samples (addon, all): {c.samples}"
        out.append(line)
    return "\n".join(out)


def format_modules(counts: dict[str, CallCount]) -> str:
    out = []
    for c in counts.values():
        out.append(
            f"{c.workload}: calls into each addon module: "
            + ", ".join(f"{name} {n}" for name, n in c.modules.items())
        )
        out.append(
            f"{c.workload}: calls the addon makes out of addon/, by file: "
            + ", ".join(f"{name} {n}" for name, n in c.others.items())
        )
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS), help="a subset"
    )
    parser.add_argument("--modules", action="store_true", help="also the calls per module")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--addon",
        type=Path,
        default=ADDON,
        help="another build of addon/mcp_layers.py, its core beside it (e.g. a `git archive` "
        "of an older commit): count that one",
    )
    args = parser.parse_args(argv)
    counts = count_calls(args.workloads, args.addon)
    print(format_table(counts))
    if args.modules:
        print("\n" + format_modules(counts))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({w: vars(c) for w, c in counts.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
