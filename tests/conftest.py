"""Every record any test produces must validate against docs/record.schema.json, and
every note in it must start with a code `record.NoteCode` defines.

Two nets catch them all: records the core returns in this process (unit, adapter and fuzz
tests) are checked as they come out of `Tracker.handle`; recordings written by the real
mitmdump processes the end-to-end tests start are checked at the end of the session, in
every addon recording file (`mcp-<UTC start>[-NNN].jsonl`) under pytest's temporary
directory. A line that does not parse is a torn last line (a killed proxy, a full disk),
which the writer's own tests cover; every line that parses must be a valid record.
Tests of the writer itself write opaque payloads: they carry the marker `opaque_records`,
and their temporary directories are not scanned.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp_layers_core.record import NoteCode
from mcp_layers_core.record_docs import json_schema
from mcp_layers_core.tracker import Emitted, Tracker

VALIDATOR = Draft202012Validator(json_schema())
NOTE_CODES = frozenset(c.value for c in NoteCode)

#: The addon's own file names (`jsonl.py`): anything else under the temporary directory is
#: an input a test made on purpose, bad lines and all.
ADDON_FILE = re.compile(r"^mcp-\d{8}T\d{6}Z(-\d{3})?\.jsonl$")

#: Temporary directories made by `opaque_records` tests.
OPAQUE_DIRS: set[Path] = set()


def record_errors(record: object) -> list[str]:
    """Why `record` is not a valid record (empty when it is): the schema, and every note
    starting with a code `record.NoteCode` defines (a repeat count adds `_more`)."""
    errors = [
        f"{'/'.join(map(str, e.absolute_path)) or '<record>'}: {e.message}"
        for e in VALIDATOR.iter_errors(record)
    ]
    notes = record.get("notes") if isinstance(record, dict) else None
    for note in notes if isinstance(notes, list) else ():
        code = str(note).split(":", 1)[0].removesuffix("_more")
        if code not in NOTE_CODES:
            errors.append(f"notes: {code!r} is no NoteCode (add it to record.py)")
    return errors


@pytest.fixture(autouse=True, scope="session")
def _validate_core_records() -> Iterator[None]:
    original = Tracker.handle

    def checked(self: Tracker, event: Any) -> list[Emitted]:
        emitted = original(self, event)
        for record, _ in emitted:
            errors = record_errors(record)
            assert not errors, f"invalid record {record}: {errors}"
        return emitted

    Tracker.handle = checked  # type: ignore[method-assign]
    try:
        yield
    finally:
        Tracker.handle = original  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[object]:
    """Note the temporary directories an `opaque_records` test makes (its fixtures' too)."""
    if item.get_closest_marker("opaque_records") is None:
        return (yield)
    base = item.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    before = set(base.iterdir())
    try:
        return (yield)
    finally:
        OPAQUE_DIRS.update(set(base.iterdir()) - before)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None:
        return
    try:
        base = factory.getbasetemp()
    except (OSError, ValueError):
        return
    bad: list[str] = []
    files = 0
    for path in sorted(base.rglob("mcp-*.jsonl")):
        opaque = any(path.is_relative_to(d) for d in OPAQUE_DIRS)
        if opaque or not ADDON_FILE.match(path.name) or not path.is_file():
            continue
        files += 1
        bad += _bad_lines(path)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if bad:
        if reporter is not None:
            reporter.write_line(f"records failing docs/record.schema.json ({len(bad)}):", red=True)
            for line in bad[:20]:
                reporter.write_line(f"  {line}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif reporter is not None and files:
        reporter.write_line(f"every record in {files} addon recording files matches the schema")


def _bad_lines(path: Path) -> list[str]:
    bad: list[str] = []
    with path.open("rb") as f:
        for lineno, line in enumerate(f, 1):
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a torn line: see the module docstring
            errors = record_errors(record)
            if errors:
                bad.append(f"{path}:{lineno}: {errors[0]}")
    return bad


@pytest.fixture(autouse=True)
def records_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Each test its own records cache (analysis/cache.py), empty at its start: a test
    never reads an entry another one left, nor writes the user's cache (the processes it
    starts inherit the setting)."""
    where = tmp_path_factory.mktemp("records-cache")
    monkeypatch.setenv("MCP_LAYERS_CACHE_DIR", str(where))
    monkeypatch.delenv("MCP_LAYERS_CACHE_MB", raising=False)
    return where
