"""The addons' options on mitmproxy's side: declared from the one table
(`mcp_layers_core.options.SPECS`), checked when they change, refused at start-up.

A bad `mcp_*` option stops the proxy before it serves traffic. mitmproxy parses a
script's `--set` values only after the script's `load`, in a place where a failure is
lost: the proxy would run on, record nothing and inject nothing. So the addons check
every `mcp_*` entry (a value, or a name no addon has) themselves, at the end of their
load, and turn a configuration error at start-up into one line and exit 2. Only the
script's own instances do this; instances a test builds raise `OptionsError`, as
mitmproxy's own addons do.

mitmproxy 12 imports a `-s` script in a task that runs only after its proxy server has
bound and is listening (`ScriptLoader` defers it; `Master.run` starts the servers
meanwhile), so no code of ours runs before the port accepts: a client may connect in
that window. What it must not get is service from a proxy that never ran (its TLS addon
has no certificates before `running`, and every request raised a traceback). So the
refusal ends the process where it stands once the servers exist, without going back to
mitmproxy's event loop: nothing accepted is served, and the kernel resets what waited
(docs/mitmproxy.md, *A bad option at start-up*).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

from mcp_layers_core import options
from mitmproxy import exceptions, optmanager
from mitmproxy.addonmanager import Loader


def add_options(loader: Loader, addon: options.Addon) -> None:
    """Declare the options of `addon` ("recorder" or "faults"), as the table says."""
    for name, spec in options.SPECS.items():
        if spec.addon == addon:
            loader.add_option(name, options.TYPES[spec.kind], spec.default, spec.help)


def refuse_bad_startup_options(opts: optmanager.OptManager) -> None:
    """Check the `mcp_*` values mitmproxy still holds for us, as the user typed them."""
    problem = options.startup_problem(
        {name: getattr(value, "val", value) for name, value in opts.deferred.items()}
    )
    if problem is not None:
        refuse(problem)


def check_updated(opts: optmanager.OptManager, updated: set[str], names: frozenset[str]) -> None:
    """The value checks of `options` on the updated options among `names`, as
    mitmproxy's own `OptionsError` (one line that says what to write)."""
    for name in sorted(updated & names):
        try:
            options.check(name, getattr(opts, name))
        except options.OptionValueError as e:
            raise exceptions.OptionsError(str(e)) from None


def shown_endpoint(url: str) -> str:
    """A collector URL as the terminal may show it: scheme, host and port; never the
    user and password a URL can carry, nor its path or query (a token may hide there)."""
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(an endpoint that is not a URL)"
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}{port}"


def startup_line(target: str, opts: Any) -> str:
    """What the proxy says once when it starts: where it records, which faults are on,
    whether spans are exported (to where: scheme, host and port only, never credentials).
    """
    faults = [getattr(opts, name, "") for name in ("mcp_faults", "mcp_fault")]
    on = "; ".join(f for f in faults if f) or "none"
    endpoint = getattr(opts, "mcp_otlp_endpoint", "")
    export = f"on, to {shown_endpoint(endpoint)}" if endpoint else "off"
    return f"mcp-layers: recording to {target} · faults: {on} · OpenTelemetry export: {export}"


def writable_dir(value: str) -> Path:
    """`mcp_record_dir` made (`0700`) if it is not there, or an `OptionsError` that says
    what to write instead."""
    path = Path(value).expanduser()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        raise exceptions.OptionsError(
            f"mcp_record_dir: cannot create {str(path)!r} ({e.strerror}); "
            f"point it at a writable directory, e.g. --set mcp_record_dir=./recordings"
        ) from e
    if not path.is_dir() or not os.access(path, os.W_OK | os.X_OK):
        raise exceptions.OptionsError(
            f"mcp_record_dir: {str(path)!r} is not a writable directory; "
            f"point it at one, e.g. --set mcp_record_dir=./recordings"
        )
    return path


def configure_or_refuse(configure: Callable[[], None], refuse_at_startup: bool) -> None:
    """Run `configure`; before the proxy runs, an `OptionsError` stops it in one line."""
    try:
        configure()
    except exceptions.OptionsError as e:
        if refuse_at_startup and not _proxy_running():
            refuse(str(e))
        raise


def refuse(message: str) -> NoReturn:
    """One line, no traceback, and a non-zero exit: recording nothing is worse than not
    starting."""
    program = os.path.basename(sys.argv[0]) or "mitmdump"
    print(f"{program}: mcp-layers: {message}", file=sys.stderr, flush=True)
    if _servers_started():
        # `sys.exit` would unwind through asyncio, whose clean-up runs the loop again:
        # it accepts the waiting clients and mitmproxy serves them half-started (a
        # traceback each). Ending here serves none; at start-up nothing is open that
        # needs closing (no record is written before `running`).
        sys.stdout.flush()
        os._exit(2)
    sys.exit(2)


def _servers_started() -> bool:
    """Has mitmproxy's proxy server bound (or begun to bind) its listening sockets?
    (Not in a test's context, nor under `mitmdump --options`: no server there.)"""
    from mitmproxy import ctx

    proxyserver = ctx.master.addons.get("proxyserver")
    return proxyserver is not None and len(proxyserver.servers) > 0


def _proxy_running() -> bool:
    """Has mitmproxy started? (Then a bad value is only refused and rolled back.)"""
    from mitmproxy import ctx

    loader = ctx.master.addons.get("scriptloader")
    return bool(getattr(loader, "is_running", False))
