"""A real mitmdump refuses a bad `mcp_*` option before it serves anything: one line,
exit 2. (mitmproxy 12 binds its port before it imports the script, so "before it
listens" cannot be had; what a client connecting meanwhile sees is
tests/e2e/test_startup_refusal_race.py's.)

Before, mitmproxy's deferred `--set` handling lost these errors: the proxy served traffic,
exited 0 and wrote no record (or printed a traceback after "listening at").
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from mcp_layers_demo import procs

CASES = [
    (["mcp_record_bodies=maybe"], "mcp_record_bodies must be true or false, not 'maybe'"),
    (["mcp_raw_session_ids=perhaps"], "mcp_raw_session_ids must be true or false"),
    (["mcp_record_max_mb=abc"], "mcp_record_max_mb must be a whole number, not 'abc'"),
    (["mcp_fault_seed=x"], "mcp_fault_seed must be a whole number, not 'x'"),
    (["mcp_record_bodies=true", "mcp_record_bodies=false"], "mcp_record_bodies is given 2 times"),
    (["mcp_fautls=errors.rate_limited"], "did you mean mcp_faults?"),
    (["mcp_max_body_kb=0"], "mcp_max_body_kb must be a positive number of KiB"),
    (["mcp_faults=errors.no_such_preset"], "is neither a preset nor a file"),
]


@pytest.mark.parametrize(("sets", "message"), CASES, ids=[c[0][0] for c in CASES])
def test_bad_option_stops_mitmdump_before_it_serves(
    tmp_path: Path, sets: list[str], message: str
) -> None:
    cmd = procs.mitmdump_cmd(
        upstream_port=procs.free_port(),
        listen_port=procs.free_port(),
        record_dir=tmp_path / "rec",
        extra_sets=sets,
    )
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    refusal = [line for line in done.stderr.splitlines() if "mcp-layers:" in line]
    assert len(refusal) == 1 and refusal[0].startswith("mitmdump: mcp-layers: ")
    output = done.stdout + done.stderr
    assert "Traceback" not in output and "listening at" not in output
    assert not list((tmp_path / "rec").glob("*.jsonl"))


def startup_lines(tmp_path: Path, sets: list[str]) -> tuple[list[str], str]:
    """Start a real mitmdump with the addon, wait (bounded) for its start-up line, stop
    it: (the start-up lines, everything it printed)."""
    log = tmp_path / "mitmdump.log"
    proc = procs.start_mitmdump(
        upstream_port=procs.free_port(),
        listen_port=procs.free_port(),
        log=log,
        record_dir=tmp_path / "rec",
        extra_sets=sets,
    )
    try:
        for _ in range(100):  # the line comes with `running`, just after listening
            if "mcp-layers: recording to" in log.read_text():
                break
            time.sleep(0.05)
    finally:
        procs.stop(proc)
    output = log.read_text()
    return [x for x in output.splitlines() if "mcp-layers: recording to" in x], output


def test_mitmdump_says_once_where_it_records_and_what_is_on(tmp_path: Path) -> None:
    """One line at start: the recording's file, the faults, the OTLP export (its host and
    port only: the credentials in the URL and the headers never reach the terminal)."""
    sets = [
        "mcp_faults=errors.http_status_sequence",
        "mcp_otlp_endpoint=http://user:s3cret@127.0.0.1:9",
        "mcp_otlp_headers=authorization=Bearer%20CANARY",
    ]
    (line,), output = startup_lines(tmp_path, sets)
    assert f"recording to {tmp_path / 'rec'}/mcp-" in line and line.endswith(
        "OpenTelemetry export: on, to http://127.0.0.1:9"
    )
    assert "faults: errors.http_status_sequence" in line
    assert "s3cret" not in output and "CANARY" not in output


def test_without_faults_or_export_the_line_says_so(tmp_path: Path) -> None:
    (line,), _ = startup_lines(tmp_path, [])
    assert line.endswith("· faults: none · OpenTelemetry export: off")
