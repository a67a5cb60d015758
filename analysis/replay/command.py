"""`mcp-layers replay`: the command line around `script`, `player` and `server`."""

from __future__ import annotations

import errno
import gc
import signal
import sys
from types import FrameType

import click
from mcp_layers_analysis.errors import InputError
from mcp_layers_analysis.exitcodes import ExitStatus


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM ends the replay as Ctrl-C does: misses reported


@click.command(short_help="Serve a recording's server side to a live client, faults included.")
@click.argument("recordings", nargs=-1, required=True, metavar="RECORDING...")
@click.option("--session", help="Replay this session only (a `session` value of the records).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port to listen on (0: any free one; the start-up line says which).",
)
@click.option(
    "--speed",
    type=click.FloatRange(min=0.01),
    default=1.0,
    show_default=True,
    help="Play the recorded delays this many times faster.",
)
@click.option("--strict", is_flag=True, help="Exit 1 if any request had no recorded answer.")
def replay(
    recordings: tuple[str, ...],
    session: str | None,
    host: str,
    port: int,
    speed: float,
    strict: bool,
) -> None:
    """Serve RECORDING's server side (made with `--set mcp_record_bodies=true`) on
    http://HOST:PORT/mcp until interrupted: statuses, Retry-After, SSE events at their
    recorded pace, cut and reset streams, dropped connections, sessions that expire.

    The n-th request of a method and params (without `_meta`) gets the n-th recorded
    answer, its id rewritten; a request the recording does not hold gets a JSON-RPC error
    naming the nearest recorded one. Misses are listed at exit (docs/replay.md).

    \b
    Example:
        mcp-layers replay recordings/mcp-20261202T101500Z.jsonl --port 9000
        mcp-layers replay bug.jsonl --session s-0fe52def1b --speed 10 --strict
    """
    # Imported here: every `mcp-layers` command registers this one, and the server's modules
    # (http.server among them) cost ~0.2 s of start-up that only a replay uses.
    from .player import Player
    from .recording import read
    from .script import ScriptError, build
    from .server import ReplayServer, serve

    try:
        script = build(read(recordings), session)
    except (ScriptError, InputError) as exc:
        click.echo(f"mcp-layers replay: {exc}", err=True)
        sys.exit(ExitStatus.USAGE_ERROR)
    # The script is a large graph that never changes: out of the collector's way, so that a
    # full collection does not stall a paced stream (an 8.7 ms late event was one).
    gc.freeze()
    player = Player(script, speed=speed)
    try:
        server = ReplayServer((host, port), player)
    except OSError as exc:
        why = "the port is in use" if exc.errno == errno.EADDRINUSE else exc.strerror
        click.echo(f"mcp-layers replay: cannot listen on {host}:{port}: {why}", err=True)
        sys.exit(ExitStatus.USAGE_ERROR)
    signal.signal(signal.SIGTERM, _interrupt)
    bound_host, bound_port = server.server_address[:2]
    serve(
        server,
        f"mcp-layers replay: {script.count} exchanges of {len(script.sessions) or 'no'} "
        f"session(s) on http://{bound_host!s}:{bound_port}/mcp (speed {speed:g})",
    )
    for miss in player.misses:
        click.echo(f"mcp-layers replay: miss: {miss}", err=True)
    click.echo(f"mcp-layers replay: {len(player.misses)} request(s) without an answer", err=True)
    if strict and player.misses:
        sys.exit(ExitStatus.NOTHING_MATCHED)
