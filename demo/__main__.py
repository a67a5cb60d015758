"""``python -m mcp_layers_demo`` (``make demo``): one real MCP session through the addon.

It starts the bundled server and a mitmdump reverse proxy with the addon in front of it, runs
the SDK client through the proxy in legacy mode (2025-11-25 handshake) and in auto mode
(2026-07-28), stops the proxy with SIGTERM (the addon writes what is pending) and prints the
recording it left in ``recordings/``.
"""

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp_layers_demo import procs
from mcp_layers_demo.client import CallResult, run_calls

RECORD_DIR = procs.REPO / "recordings"
SCENARIO = "demo"
MODES = ("legacy", "auto")

TABLE_COLUMNS = (
    "id",
    "kind",
    "method",
    "tool",
    "httpStatuses",
    "outcome",
    "layer",
    "client",
    "protocolVersion",
)


def _say(message: str) -> None:
    print(message, flush=True)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ",".join(str(v) for v in value) or "[]"
    return str(value)


def format_table(records: list[dict[str, Any]]) -> str:
    """A compact fixed-width table, one line per record."""
    rows = [[_cell(r.get(col)) for col in TABLE_COLUMNS] for r in records]
    widths = [
        max([len(col)] + [len(row[i]) for row in rows]) for i, col in enumerate(TABLE_COLUMNS)
    ]
    lines = ["  ".join(col.ljust(w) for col, w in zip(TABLE_COLUMNS, widths, strict=True))]
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    return "\n".join(lines)


def _run_client(url: str, mode: str) -> list[CallResult]:
    results = anyio.run(run_calls, url, mode)
    _say(f"client {mode}: {len(results)} calls")
    for result in results:
        _say(f"  {result.summary()}")
    return results


def _report(started_at: float) -> int:
    # Only a file this run wrote: an older recording would be a misleading answer.
    files = [p for p in procs.recording_files(RECORD_DIR) if p.stat().st_mtime >= started_at - 1]
    if not files:
        _say(f"error: the proxy wrote no recording into {RECORD_DIR}")
        return 1
    path = files[-1]
    records = procs.read_jsonl(path, out=sys.stdout)
    try:
        shown = path.relative_to(Path.cwd())
    except ValueError:
        shown = path
    _say(f"\nrecording: {shown} ({len(records)} records)\n")
    _say(format_table(records))
    return 0


def main() -> int:
    if not procs.ADDON.exists():
        _say(f"error: the addon {procs.ADDON} is missing; is this a complete checkout?")
        return 1
    RECORD_DIR.mkdir(parents=True, exist_ok=True)
    logs = Path(tempfile.mkdtemp(prefix="mcp-layers-demo-"))
    server_log, proxy_log = logs / "server.log", logs / "mitmdump.log"
    server = proxy = None
    ok = False
    started_at = time.time()
    try:
        server_port, proxy_port = procs.free_port(), procs.free_port()
        _say(f"starting server on http://{procs.HOST}:{server_port}{procs.MCP_PATH} ...")
        server = procs.start_server(server_port, server_log)
        _say(f"starting mitmdump -s {procs.ADDON.relative_to(procs.REPO)} ...")
        proxy = procs.start_mitmdump(
            server_port, proxy_port, proxy_log, record_dir=RECORD_DIR, scenario=SCENARIO
        )
        url = f"http://{procs.HOST}:{proxy_port}{procs.MCP_PATH}"
        _say(f"mitmdump listening on {url} -> server {procs.HOST}:{server_port}")
        for mode in MODES:
            _run_client(url, mode)
        _say("stopping mitmdump (SIGTERM) ...")
        code = procs.stop(proxy)
        proxy = None
        if code not in (0, None):
            _say(f"warning: mitmdump exited with code {code}; see {proxy_log}")
        ok = True
    except procs.StartError as exc:
        _say(f"error: {exc}")
    except Exception as exc:
        _say(f"error: the client run failed: {type(exc).__name__}: {exc}")
        tail = procs.log_tail(proxy_log, 15)
        if tail:
            _say(f"last lines of {proxy_log}:\n{tail}")
    finally:
        if proxy is not None:
            procs.stop(proxy)
        if server is not None:
            _say("stopping server ...")
            procs.stop(server)
    if not ok:
        _say(f"logs kept in {logs}")
        return 1
    code = _report(started_at)
    if code == 0:
        shutil.rmtree(logs, ignore_errors=True)
    else:
        _say(f"logs kept in {logs}")
    return code


if __name__ == "__main__":
    sys.exit(main())
