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
