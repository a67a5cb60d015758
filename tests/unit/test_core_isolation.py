"""The core is sans-IO: it imports without mitmproxy or click anywhere in reach."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import mcp_layers_core


def test_every_core_module_imports_with_mitmproxy_and_click_blocked() -> None:
    names = [m.name for m in pkgutil.iter_modules(mcp_layers_core.__path__)]
    assert {"classify", "sse", "tracker", "records", "jsonrpc"} <= set(names)
    code = (
        "import sys\n"
        "sys.modules['mitmproxy'] = None\n"
        "sys.modules['click'] = None\n"
        f"for n in {names!r}:\n"
        "    __import__('mcp_layers_core.' + n)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_core_runs_without_orjson() -> None:
    """The addon must also load into a mitmproxy installed elsewhere, orjson or not."""
    code = (
        "import sys\n"
        "sys.modules['orjson'] = None\n"
        "from mcp_layers_core.tracker import Tracker\n"
        "from mcp_layers_core.events import PostReceived, ResponseStarted, ResponseBody\n"
        "from mcp_layers_core.jsonl import dumps_line\n"
        "t = Tracker()\n"
        't.handle(PostReceived(\'f\', 1.0, \'s:1\', \'p:2\', {}, b\'{"jsonrpc":"2.0","id":1,"method":"ping"}\'))\n'
        "t.handle(ResponseStarted('f', 1.1, 200, {'content-type': 'application/json'}))\n"
        '((r, _),) = t.handle(ResponseBody(\'f\', 1.2, b\'{"jsonrpc":"2.0","id":1,"result":{}}\'))\n'
        "print(r['outcome'], dumps_line(r)[:6])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "SUCCESS b'{\"v\":1'"


def test_the_addon_imports_no_opentelemetry_while_the_export_is_off() -> None:
    """`mcp_otlp_endpoint` unset: the addon needs mitmproxy and the standard library only."""
    code = (
        "import sys\n"
        "import mcp_layers\n"
        "r = mcp_layers.Recorder()\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('opentelemetry', 'google'))\n"
        "print(loaded or 'none')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "none"
