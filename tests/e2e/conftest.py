"""Fixtures for the end-to-end tests (real server, real mitmdump with the addon, real SDK client).

Servers are started once per session and mode (the tests only read the server's counters,
never reset them); proxies are started per run, because each run must own its recording.
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_layers_support import node_peers
from mcp_layers_support.harness import Proxies, ServerPool


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Everything under tests/e2e starts real processes: mark it so `-m "not e2e"` skips it.
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    # On a failure, show what the processes said: an addon traceback in the mitmdump log is
    # usually the real answer. Any fixture value with failure_context() takes part.
    if report.failed:
        for name, value in getattr(item, "funcargs", {}).items():
            context = getattr(value, "failure_context", None)
            if callable(context):
                try:
                    report.sections.append((f"{name} context", context()))
                except Exception as exc:  # reporting must never hide the real failure
                    report.sections.append((f"{name} context", f"unavailable: {exc!r}"))
    return report


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    pool = ServerPool(tmp_path_factory.mktemp("servers"))
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def proxies(tmp_path: Path) -> Iterator[Proxies]:
    made = Proxies(tmp_path)
    try:
        yield made
    finally:
        made.stop_all()


@pytest.fixture(scope="session")
def peers() -> node_peers.NodePeers:
    """The TS SDK peers from npm (installed once); the test is skipped without npm."""
    found = node_peers.ensure()
    if found is None:
        pytest.skip(node_peers.NO_NPM)
    return found
