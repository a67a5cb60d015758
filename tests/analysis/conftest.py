from __future__ import annotations

from pathlib import Path

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The analysis tests write recordings of their own (bad lines and partial records
    included) as inputs: they are exempt from the schema check of tests/conftest.py."""
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.opaque_records)


@pytest.fixture(autouse=True)
def records_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Each test its own records cache (analysis/cache.py), empty at its start: a test
    never reads an entry another one left, nor the user's cache."""
    where = tmp_path_factory.mktemp("records-cache")
    monkeypatch.setenv("MCP_LAYERS_CACHE_DIR", str(where))
    monkeypatch.delenv("MCP_LAYERS_CACHE_MB", raising=False)
    return where
