"""How the start-up refusal ends the process: `sys.exit` where no proxy server exists (a
test's context, `mitmdump --options`), `os._exit` once mitmproxy's servers do, so that its
event loop never runs again to serve a waiting client (docs/mitmproxy.md, *A bad option
at start-up*; the race itself is tests/e2e/test_startup_refusal_race.py)."""

from __future__ import annotations

import os

import mcp_layers_startup
import pytest
from mitmproxy.test import taddons


class Ended(Exception):
    """Stands in for the end of the process in this test."""


class Proxyserver:
    """Named as mitmproxy's proxy server addon, with one server started."""

    def __init__(self) -> None:
        self.servers: list[object] = [object()]


def test_without_proxy_servers_the_refusal_is_a_system_exit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with taddons.context(), pytest.raises(SystemExit) as stopped:
        mcp_layers_startup.refuse("mcp_x: no good; write --set mcp_x=1")
    assert stopped.value.code == 2
    assert capsys.readouterr().err.endswith(": mcp-layers: mcp_x: no good; write --set mcp_x=1\n")


def test_once_the_servers_exist_the_refusal_ends_the_process_where_it_stands(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    codes: list[int] = []

    def end(code: int) -> None:
        codes.append(code)
        raise Ended

    monkeypatch.setattr(os, "_exit", end)
    with taddons.context(Proxyserver()), pytest.raises(Ended):
        mcp_layers_startup.refuse("mcp_x: no good; write --set mcp_x=1")
    assert codes == [2]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "mcp-layers: mcp_x: no good" in err
