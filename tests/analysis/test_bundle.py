"""`mcp-layers bundle`: the zip a person attaches to an issue, over real recordings.

`real_demo.jsonl` is `make demo`'s recording: three runs concatenated (record ids restart
in each), two SDK clients, and in `errors.session_expired` a session lost to a 404 that
neither client re-initialises (a FAIL of `mcp-layers/session-renegotiate-on-404`).
"""

from __future__ import annotations

import io
import json
import re
import socket
import zipfile
from pathlib import Path

import pytest
from analysis_helpers import FIXTURES, invoke
from mcp_layers_analysis import bundle
from mcp_layers_analysis.exitcodes import ExitStatus
from mcp_layers_analysis.verdicts import RULE, Level, Verdict

DEMO = FIXTURES / "real_demo.jsonl"
#: The python SDK client's session lost to a 404 in real_demo.jsonl.
LOST = "s-9a167072fa"
PYTHON = "python-sdk@0.1.0"
RENEGOTIATE = "mcp-layers/session-renegotiate-on-404"
MEMBERS = [
    "SUMMARY.md",
    "hangs.json",
    "records.jsonl",
    "report.html",
    "verdicts.json",
    "verdicts.txt",
]


def lines_where(path: Path, field: str, value: str) -> bytes:
    """The recording's lines whose `field` is `value`, as recorded."""
    return b"".join(
        line + b"\n"
        for line in path.read_bytes().splitlines()
        if line.strip() and json.loads(line).get(field) == value
    )


def make(tmp_path: Path, *args: str | Path, name: str = "bug.zip") -> dict[str, bytes]:
    out = tmp_path / name
    result = invoke("bundle", *args, "-o", out)
    assert result.exit_code == ExitStatus.OK, result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith(f"mcp-layers: bundle written to {out} (")
    with zipfile.ZipFile(out) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


@pytest.fixture(scope="module")
def session_zip(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    return make(tmp_path_factory.mktemp("bundle"), DEMO, "--session", LOST)


def test_a_session_bundle_holds_the_session_records_as_recorded(
    session_zip: dict[str, bytes],
) -> None:
    assert sorted(session_zip) == MEMBERS
    assert session_zip["records.jsonl"] == lines_where(DEMO, "session", LOST)


def test_its_verdicts_judge_the_session_and_cite_the_spec(session_zip: dict[str, bytes]) -> None:
    rows = json.loads(session_zip["verdicts.json"])
    assert {r["client"] for r in rows} == {PYTHON}
    assert len(rows) == len(RULE)
    failed = [r for r in rows if r["verdict"] == Verdict.FAIL]
    assert [r["check"] for r in failed] == [RENEGOTIATE]
    # Record ids restart in each run of the recording: only this session's instances
    # count, never a record of another run that shares an id.
    for row in rows:
        assert "s-23507f8529" not in (row["evidence"] or "")
    assert RENEGOTIATE in session_zip["verdicts.txt"].decode()
    summary = session_zip["SUMMARY.md"].decode()
    rule = RULE[RENEGOTIATE]
    assert f"**FAIL** `{RENEGOTIATE}`" in summary
    assert rule.quote in summary and rule.url in summary


def test_its_summary_names_what_a_maintainer_asks_first(session_zip: dict[str, bytes]) -> None:
    summary = session_zip["SUMMARY.md"].decode()
    assert summary.startswith(f"# mcp-layers bundle: session {LOST}\n")
    assert f"- client: `{PYTHON}`" in summary
    assert "- server: `127.0.0.1:39555`" in summary
    assert "- protocol version: `2025-11-25`" in summary
    assert re.search(r"^- versions: mcp-layers \S+, mitmproxy \S+", summary, re.MULTILINE)
    # The four 404s, one line each, in time order.
    failing = [line for line in summary.splitlines() if line.startswith("- `2026-")]
    assert failing == [
        "- `2026-11-30T16:35:20.508Z` #3 `tools/call echo`: HTTP 404, HTTP_ERROR at transport",
        "- `2026-11-30T16:35:20.513Z` #5 `tools/call add_note`: HTTP 404, HTTP_ERROR at transport",
        "- `2026-11-30T16:35:20.518Z` #6 `tools/call get_notes`: HTTP 404, HTTP_ERROR at transport",
        "- `2026-11-30T16:35:20.523Z` #7 `tools/call fail`: HTTP 404, HTTP_ERROR at transport",
    ]
    for name in MEMBERS:
        assert f"- `{name}`" in summary


def test_its_hang_evidence_is_the_forensics_of_its_failures(session_zip: dict[str, bytes]) -> None:
    hangs = json.loads(session_zip["hangs.json"])
    assert [h["id"] for h in hangs] == [3, 5, 6, 7]
    assert hangs[0]["then"] == "then tools/call #5 0.00 s later"
    assert not any(h["stalled"] for h in hangs)
    assert "- #3 HTTP_ERROR: then tools/call #5 0.00 s later" in session_zip["SUMMARY.md"].decode()


def test_its_report_is_the_report_of_those_records(session_zip: dict[str, bytes]) -> None:
    page = session_zip["report.html"].decode()
    assert f"<title>mcp-layers bundle: session {LOST}</title>" in page
    # Made "at" the last record, and naming the member, not the input's path.
    assert "8 records from records.jsonl · made 2026-11-30 16:35 UTC" in page
    assert "typescript-sdk" not in page


def test_a_client_bundle_is_what_verdicts_says_of_the_client(tmp_path: Path) -> None:
    got = make(tmp_path, DEMO, "--client", "python-sdk")
    assert sorted(got) == MEMBERS
    assert got["records.jsonl"] == lines_where(DEMO, "client", PYTHON)
    said = invoke("verdicts", DEMO, "--client", "python-sdk", "--format", "json")
    assert json.loads(got["verdicts.json"]) == json.loads(said.stdout)
    summary = got["SUMMARY.md"].decode()
    assert "# mcp-layers bundle: client python-sdk" in summary
    assert "sessions: 3;" in summary


def test_the_same_records_give_the_same_bytes(tmp_path: Path) -> None:
    first = tmp_path / "a.zip"
    second = tmp_path / "b.zip"
    for out in (first, second):
        assert invoke("bundle", DEMO, "--session", LOST, "-o", out).exit_code == 0
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as zf:
        infos = zf.infolist()
    assert [i.filename for i in infos] == MEMBERS
    assert {i.date_time for i in infos} == {bundle.ZIP_TIME}


def test_the_bundle_takes_nothing_from_the_machine(
    tmp_path: Path, session_zip: dict[str, bytes]
) -> None:
    # The inputs' folder, the working directory, the home, the host: none is in a member.
    host = socket.gethostname()
    told = [str(FIXTURES), str(Path.cwd()), str(Path.home()), str(tmp_path)]
    if len(host) >= 6:  # a short host name may be part of any word
        told.append(host)
    for name, data in session_zip.items():
        for secret in told:
            assert secret.encode() not in data, (name, secret)


def test_several_inputs_give_a_records_member_each(tmp_path: Path) -> None:
    other = FIXTURES / "real_lab_claude-code_session_404.jsonl"
    copy = tmp_path / "demo-again.jsonl"
    copy.write_bytes(DEMO.read_bytes())
    got = make(tmp_path, DEMO, other, copy, "--client", PYTHON)
    assert [n for n in sorted(got) if n.startswith("records")] == [
        "records-01.jsonl",
        "records-02.jsonl",
    ]
    assert got["records-01.jsonl"] == got["records-02.jsonl"] == lines_where(DEMO, "client", PYTHON)


def test_stdin_is_a_recording_too(tmp_path: Path) -> None:
    out = tmp_path / "stdin.zip"
    result = invoke("bundle", "-", "--session", LOST, "-o", out, input=DEMO.read_bytes())
    assert result.exit_code == 0, result.stderr
    with zipfile.ZipFile(out) as zf:
        assert zf.read("records.jsonl") == lines_where(DEMO, "session", LOST)


def test_an_unknown_session_lists_the_sessions_there_are(tmp_path: Path) -> None:
    out = tmp_path / "bug.zip"
    result = invoke("bundle", DEMO, "--session", "s-0000000000", "-o", out)
    assert result.exit_code == ExitStatus.NOTHING_MATCHED
    lines = result.stderr.splitlines()
    assert lines[0] == "mcp-layers: no records of session s-0000000000; the sessions in the input:"
    assert f"  {LOST}  {PYTHON}" in lines
    assert "  s-709cd5ab4f  typescript-sdk@1.32.2" in lines
    assert len(lines) == 7
    assert not out.exists()


def test_an_unknown_client_lists_the_clients_there_are(tmp_path: Path) -> None:
    result = invoke("bundle", DEMO, "--client", "cursor", "-o", tmp_path / "bug.zip")
    assert result.exit_code == ExitStatus.NOTHING_MATCHED
    assert result.stderr.splitlines() == [
        "mcp-layers: no records of client cursor; the clients in the input:",
        "  python-sdk@0.1.0  (24 records)",
        "  typescript-sdk@1.32.2  (25 records)",
    ]


def test_an_input_without_records_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke("bundle", FIXTURES / "empty.jsonl", "--client", "x", "-o", tmp_path / "b.zip")
    assert result.exit_code == ExitStatus.USAGE_ERROR
    assert result.stderr == "mcp-layers: no records in the input: nothing to bundle\n"


@pytest.mark.parametrize(
    "choice", [[], ["--session", LOST, "--client", PYTHON]], ids=["neither", "both"]
)
def test_one_of_session_and_client_is_required(tmp_path: Path, choice: list[str]) -> None:
    result = invoke("bundle", DEMO, *choice, "-o", tmp_path / "b.zip")
    assert result.exit_code == ExitStatus.USAGE_ERROR
    assert "Error: give one of --session ID or --client NAME[@VERSION]" in result.stderr


def test_an_existing_file_is_kept_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "bug.zip"
    out.write_bytes(b"mine")
    result = invoke("bundle", DEMO, "--session", LOST, "-o", out)
    assert result.exit_code == ExitStatus.USAGE_ERROR
    assert result.stderr == f"Error: {out} exists; --force overwrites it\n"
    assert out.read_bytes() == b"mine"
    assert invoke("bundle", DEMO, "--session", LOST, "-o", out, "--force").exit_code == 0
    assert zipfile.is_zipfile(out)
    assert [p.name for p in tmp_path.iterdir()] == ["bug.zip"]  # no partial file left


def test_zip_bytes_sorts_and_fixes_every_member() -> None:
    members = {"b.txt": b"2", "a.txt": b"1"}
    data = bundle.zip_bytes(members)
    assert data == bundle.zip_bytes(dict(reversed(members.items())))
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        infos = zf.infolist()
        assert [i.filename for i in infos] == ["a.txt", "b.txt"]
        assert all(i.external_attr == 0o644 << 16 and i.create_system == 3 for i in infos)
        assert zf.read("b.txt") == b"2"


def test_needle_skips_only_lines_that_cannot_match() -> None:
    assert bundle.needle(bundle.Subject("session", LOST)) == LOST.encode()
    assert bundle.needle(bundle.Subject("client", "python-sdk@0.1.0")) == b"python-sdk"
    # A value JSON escapes is not searched for as is: every line is parsed instead.
    assert bundle.needle(bundle.Subject("session", 'a"b')) is None


def test_summary_cites_failures_and_misses_only() -> None:
    facts = bundle.Facts([PYTHON], [], [], [LOST], 3, None, None)
    versions = bundle.Versions("1.2.3", "not installed")
    must = next(r for r in RULE.values() if r.level == Level.MUST)
    should = next(r for r in RULE.values() if r.level == Level.SHOULD)
    passed = next(r for r in RULE.values() if r.level == Level.MUST and r is not must)
    rows: list[list[str | None]] = [
        [PYTHON, must.id, Verdict.WARNING, must.level, must.spec, "late"],
        [PYTHON, should.id, Verdict.WARNING, should.level, should.spec, "missed"],
        [PYTHON, passed.id, Verdict.PASS, passed.level, passed.spec, "fine"],
    ]
    text = bundle.summary_md(
        bundle.Subject("client", PYTHON), facts, versions, [], 0, rows, [], ["SUMMARY.md"]
    )
    assert f"**WARNING** `{must.id}` ({PYTHON}, missed the softer part of a MUST)" in text
    assert f"**WARNING** `{should.id}` ({PYTHON}, missed a SHOULD)" in text
    assert f"`{passed.id}`" not in text
    assert "- server: not recorded" in text
    assert "- versions: mcp-layers 1.2.3, mitmproxy not installed" in text
    assert "None: every request succeeded (or was a negotiation probe)." in text
    assert "judged on the whole recording" not in text  # said of --session bundles only
