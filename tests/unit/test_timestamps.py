"""`iso_ms` caches the date part of the current second: it must write what `datetime`
writes, to the millisecond, for every time (rounding to microseconds first, half to
even, as `datetime.fromtimestamp` does, then cutting to milliseconds)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st
from mcp_layers_core.records import iso_ms


def reference(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@given(st.floats(min_value=0, max_value=4e9, allow_nan=False))
def test_any_time_is_written_as_datetime_writes_it(ts: float) -> None:
    assert iso_ms(ts) == reference(ts)


@given(st.integers(1_700_000_000, 1_900_000_000), st.integers(0, 999_999))
def test_times_near_a_microsecond_or_second_boundary(second: int, micros: int) -> None:
    for ts in (second + micros / 1e6, second + (micros + 0.5) / 1e6, second + 0.9999995):
        assert iso_ms(ts) == reference(ts)


def test_the_cached_second_does_not_leak_into_the_next_one() -> None:
    assert iso_ms(1_764_594_766.999) == "2025-12-01T13:12:46.999Z"
    assert iso_ms(1_764_594_767.0004) == "2025-12-01T13:12:47.000Z"
    assert iso_ms(1_764_594_766.5) == "2025-12-01T13:12:46.500Z"
    assert iso_ms(-1.5) == reference(-1.5)  # before 1970: the long way
