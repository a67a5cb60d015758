from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(params=["msgspec", "orjson"])
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run the test with each decoder: msgspec Structs and the orjson fallback."""
    monkeypatch.setenv("MCP_LAYERS_DECODER", request.param)
    yield request.param
