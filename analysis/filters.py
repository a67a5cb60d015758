"""Which records count: `--client`, `--method`, `--tool`, `--scenario`, `--since`, `--until`.

Filters choose the records that are counted. Commands that follow links between records
(a retry and the attempt it repeats) still follow them through records that do not match.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class Filters:
    """Empty sets and None bounds match everything.

    A client given as `name@version` matches that version; a bare `name` matches every
    version. `since` is inclusive and `until` exclusive; both are record `ts` strings.
    """

    clients: frozenset[str] = frozenset()
    methods: frozenset[str] = frozenset()
    tools: frozenset[str] = frozenset()
    scenarios: frozenset[str] = frozenset()
    since: str | None = None
    until: str | None = None

    @property
    def active(self) -> bool:
        return bool(
            self.clients or self.methods or self.tools or self.scenarios or self.since or self.until
        )

    def fields(self) -> tuple[str, ...]:
        """Record fields the filters read."""
        out = []
        if self.clients:
            out.append("client")
        if self.methods:
            out.append("method")
        if self.tools:
            out.append("tool")
        if self.scenarios:
            out.append("scenario")
        if self.since or self.until:
            out.append("ts")
        return tuple(out)

    def predicate(self) -> Callable[[Any], bool] | None:
        """A test for one record, or None when every record matches."""
        if not self.active:
            return None
        tests: list[Callable[[Any], bool]] = []
        if self.clients:
            tests.append(_client_test(self.clients))
        if self.methods:
            methods = self.methods
            tests.append(lambda r: r.method in methods)
        if self.tools:
            tools = self.tools
            tests.append(lambda r: r.tool in tools)
        if self.scenarios:
            scenarios = self.scenarios
            tests.append(lambda r: r.scenario in scenarios)
        if self.since is not None:
            since = self.since
            tests.append(lambda r: r.ts is not None and r.ts >= since)
        if self.until is not None:
            until = self.until
            tests.append(lambda r: r.ts is not None and r.ts < until)
        if len(tests) == 1:
            return tests[0]
        return lambda r: all(t(r) for t in tests)


def _client_test(wanted: frozenset[str]) -> Callable[[Any], bool]:
    exact = {c for c in wanted if "@" in c}
    names = {c for c in wanted if "@" not in c}
    verdicts: dict[str | None, bool] = {}  # clients are few: decide each once

    def test(r: Any) -> bool:
        c = r.client
        v = verdicts.get(c)
        if v is None:
            v = c is not None and (c in exact or c.rpartition("@")[0] in names or c in names)
            verdicts[c] = v
        return v

    return test


def parse_time(text: str) -> str:
    """An ISO-8601 date or time as a record `ts` string (UTC, milliseconds, `Z`).

    A time without an offset is taken as UTC, like the records. Raises ValueError.
    """
    value = datetime.fromisoformat(text.strip())
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def frozen(values: Iterable[str]) -> frozenset[str]:
    return frozenset(v for v in values if v)
