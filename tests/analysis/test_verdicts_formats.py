"""`mcp-layers verdicts --format junit|sarif`: the CI formats, end to end through the CLI on
small recordings, validated against the published schemas (committed under
tests/fixtures/schemas/, so nothing is fetched at test time), and checked against the
verdict table the same run gives as JSON."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import xmlschema
from analysis_helpers import FIXTURES, invoke
from click.testing import Result
from mcp_layers_analysis import verdict_formats as formats
from mcp_layers_analysis.exitcodes import ExitStatus
from mcp_layers_analysis.verdicts import HEADERS, RULE, RULES, Verdict
from mcp_layers_core.record import new_record

SCHEMAS = Path(__file__).resolve().parents[1] / "fixtures" / "schemas"
DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
REAL = sorted(FIXTURES.glob("real_*.jsonl"))
T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
GOOD = "good-client@1.0"
BAD = "bad-client@2.0"
HEADERS_SENT = ["accept", "mcp-protocol-version", "mcp-session-id"]
BOTH = ["application/json", "text/event-stream"]


@pytest.fixture(scope="module")
def junit_schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(SCHEMAS / "junit-10.xsd")


@pytest.fixture(scope="module")
def sarif_validator() -> jsonschema.Draft4Validator:
    schema = json.loads((SCHEMAS / "sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft4Validator.check_schema(schema)  # the draft the schema declares
    return jsonschema.Draft4Validator(schema)


# --------------------------------------------------------------------- recordings


class Recording:
    """The records of one recording file of one client, numbered and timed in order."""

    def __init__(self, client: str, session: str, start_s: float = 0) -> None:
        self.client = client
        self.session = session
        self.start_s = start_s
        self.records: list[dict[str, Any]] = []

    def add(self, kind: str, at_s: float, **fields: Any) -> None:
        ts = (T0 + timedelta(seconds=self.start_s + at_s)).isoformat(timespec="milliseconds")
        values: dict[str, Any] = {
            "session": self.session,
            "client": self.client,
            "protocolVersion": "2025-11-25",
            "durationMs": 10.0,
            "server": "127.0.0.1:1",
            "requestHeaders": HEADERS_SENT,
            "accept": BOTH,
        }
        values.update(fields)
        rec_id = len(self.records) + 1
        self.records.append(
            new_record(id=rec_id, kind=kind, ts=ts.replace("+00:00", "Z"), **values)
        )

    def request(self, at_s: float, method: str, rpc_id: int, **fields: Any) -> None:
        self.add(
            "request",
            at_s,
            method=method,
            outcome="SUCCESS",
            httpStatuses=[200],
            jsonrpc={"id": rpc_id, "errorCode": None, "errorMessage": None},
            **fields,
        )

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(r) + "\n" for r in self.records))
        return path


def well_behaved(client: str, session: str, start_s: float = 0) -> Recording:
    """initialize, notifications/initialized, tools/list, DELETE: nothing to fault."""
    rec = Recording(client, session, start_s)
    rec.request(0, "initialize", 0, requestHeaders=["accept"])
    rec.add("notification", 0.1, method="notifications/initialized", httpStatuses=[202])
    rec.request(0.2, "tools/list", 1)
    rec.add(
        "session_end",
        1,
        endReason="delete",
        httpStatuses=[200],
        requestHeaders=["mcp-protocol-version", "mcp-session-id"],
        accept=[],
    )
    return rec


def misbehaving(client: str, session: str, start_s: float = 0) -> Recording:
    """No notifications/initialized and a reused request id (two MUSTs broken), then a GET
    answered 405 after which the client gave the session up with a DELETE (a SHOULD
    missed: no POST after the 405)."""
    rec = Recording(client, session, start_s)
    rec.request(0, "initialize", 0, requestHeaders=["accept"])
    rec.request(0.2, "tools/list", 1)
    rec.request(0.3, "tools/call", 1)
    rec.add("stream", 0.4, httpStatuses=[405], accept=["text/event-stream"])
    rec.add(
        "session_end",
        0.5,
        endReason="delete",
        httpStatuses=[200],
        requestHeaders=["mcp-protocol-version", "mcp-session-id"],
        accept=[],
    )
    return rec


def run(*args: str | Path, input: str | None = None) -> Result:
    return invoke("verdicts", *args, input=input)


def table(*paths: Path) -> tuple[int, dict[tuple[str, str], dict[str, Any]]]:
    """The verdict table of the same inputs, as JSON: what the CI formats must say."""
    result = run(*paths, "--format", "json")
    return result.exit_code, {(r["client"], r["check"]): r for r in json.loads(result.stdout)}


@pytest.fixture
def two_clients(tmp_path: Path) -> tuple[Path, Path]:
    rec = tmp_path / "rec"
    rec.mkdir()
    good = well_behaved(GOOD, "s-good000000").write(rec / "good.jsonl")
    bad = misbehaving(BAD, "s-bad0000000").write(rec / "bad.jsonl")
    return good, bad


# --------------------------------------------------------------------- JUnit


def test_junit_is_a_case_per_client_and_check_and_validates(
    two_clients: tuple[Path, Path], junit_schema: xmlschema.XMLSchema
) -> None:
    good, bad = two_clients
    code, rows = table(good, bad)
    verdicts = {r["verdict"] for r in rows.values()}
    assert {"PASS", "FAIL", "WARNING", "NOT_EXERCISED"} <= verdicts, rows  # the test's premise

    result = run(good, bad, "--format", "junit")
    assert result.exit_code == code == ExitStatus.VERDICT_FAILED
    assert result.stdout.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    junit_schema.validate(result.stdout)

    root = ET.fromstring(result.stdout)
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == sorted([GOOD, BAD])
    cases = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    assert cases.keys() == rows.keys()
    for key, case in cases.items():
        _assert_case(case, rows[key])
    fails = sum(r["verdict"] == "FAIL" for r in rows.values())
    assert root.get("tests") == str(len(rows)) and root.get("failures") == str(fails)
    for suite in suites:
        mine = [r for r in rows.values() if r["client"] == suite.get("name")]
        skipped = sum(r["verdict"] in ("NOT_EXERCISED", "UNDECIDABLE") for r in mine)
        assert suite.get("tests") == str(len(mine))
        assert suite.get("failures") == str(sum(r["verdict"] == "FAIL" for r in mine))
        assert suite.get("skipped") == str(skipped) and suite.get("errors") == "0"


def _assert_case(case: ET.Element, row: dict[str, Any]) -> None:
    """One testcase says what its row of the table says."""
    children = {child.tag: child for child in case}
    verdict = row["verdict"]
    if verdict == "FAIL":
        failure = children["failure"]
        assert failure.get("message") == row["evidence"] and failure.get("type") == row["level"]
        assert row["evidence"] in (failure.text or "")
        assert RULE[row["check"]].url in (failure.text or "")
    elif verdict in ("NOT_EXERCISED", "UNDECIDABLE"):
        assert set(children) == {"skipped"}
        assert (children["skipped"].get("message") or "").startswith(verdict)
    elif verdict == "WARNING":  # passes, and says why not quite
        assert set(children) == {"system-out"}
        wanted = "WARNING (a SHOULD missed)" if row["level"] == "SHOULD" else "WARNING (the softer"
        assert (children["system-out"].text or "").startswith(wanted)
        assert row["evidence"] in (children["system-out"].text or "")
    else:
        assert verdict == "PASS" and set(children) <= {"system-out"}


def test_a_clean_run_exits_0_and_has_no_failure(
    tmp_path: Path, junit_schema: xmlschema.XMLSchema
) -> None:
    path = well_behaved(GOOD, "s-good000000").write(tmp_path / "good.jsonl")
    result = run(path, "--format", "junit")
    assert result.exit_code == ExitStatus.OK
    junit_schema.validate(result.stdout)
    root = ET.fromstring(result.stdout)
    assert root.get("failures") == "0" and not list(root.iter("failure"))


def test_nothing_matched_is_an_empty_valid_document(
    two_clients: tuple[Path, Path],
    junit_schema: xmlschema.XMLSchema,
    sarif_validator: jsonschema.Draft4Validator,
) -> None:
    junit = run(*two_clients, "--client", "nobody", "--format", "junit")
    assert junit.exit_code == ExitStatus.NOTHING_MATCHED
    junit_schema.validate(junit.stdout)
    assert ET.fromstring(junit.stdout).get("tests") == "0"
    sarif = run(*two_clients, "--client", "nobody", "--format", "sarif")
    assert sarif.exit_code == ExitStatus.NOTHING_MATCHED
    log = json.loads(sarif.stdout)
    sarif_validator.validate(log)
    assert log["runs"][0]["results"] == []


# --------------------------------------------------------------------- SARIF


def test_sarif_has_a_rule_per_check_and_a_result_per_fail_and_warning(
    two_clients: tuple[Path, Path], sarif_validator: jsonschema.Draft4Validator
) -> None:
    good, bad = two_clients
    code, rows = table(good, bad)
    result = run(good, bad, "--format", "sarif")
    assert result.exit_code == code == ExitStatus.VERDICT_FAILED
    log = json.loads(result.stdout)
    sarif_validator.validate(log)
    assert log["version"] == "2.1.0"

    (only_run,) = log["runs"]
    driver = only_run["tool"]["driver"]
    assert driver["name"] == "mcp-layers" and driver["version"]
    assert [r["id"] for r in driver["rules"]] == [rule.id for rule in RULES]
    for descriptor, rule in zip(driver["rules"], RULES, strict=True):
        assert descriptor["helpUri"] == rule.url and rule.url.startswith("https://")
        assert descriptor["shortDescription"]["text"] == rule.requirement
        assert descriptor["properties"]["level"] == rule.level
        assert descriptor["defaultConfiguration"]["level"] == (
            "error" if rule.level == "MUST" else "warning"
        )

    wanted = {
        key: {"FAIL": "error", "WARNING": "warning"}[row["verdict"]]
        for key, row in rows.items()
        if row["verdict"] in ("FAIL", "WARNING")
    }
    got = {(r["properties"]["client"], r["ruleId"]): r["level"] for r in only_run["results"]}
    assert got == wanted and "error" in got.values() and "warning" in got.values()
    for res in only_run["results"]:
        client, check = res["properties"]["client"], res["ruleId"]
        assert driver["rules"][res["ruleIndex"]]["id"] == check
        assert rows[(client, check)]["evidence"] in res["message"]["text"]
        (location,) = res["locations"]
        assert location["logicalLocations"][0]["name"] == client
        # Every fault is the bad client's, in its recording (absolute here: a file URI).
        assert location["physicalLocation"]["artifactLocation"]["uri"] == bad.as_uri()


def test_a_result_is_located_in_the_recording_its_evidence_names(
    tmp_path: Path, sarif_validator: jsonschema.Draft4Validator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One client in two recordings with the same record ids: the result points at the one
    where it misbehaved, not at the first that has a record #1."""
    monkeypatch.chdir(tmp_path)
    Path("rec").mkdir()
    well_behaved(BAD, "s-first00000").write(Path("rec/1-good.jsonl"))
    misbehaving(BAD, "s-second0000", start_s=60).write(Path("rec/2-bad.jsonl"))
    result = run("rec/1-good.jsonl", "rec/2-bad.jsonl", "--format", "sarif")
    log = json.loads(result.stdout)
    sarif_validator.validate(log)
    results = log["runs"][0]["results"]
    assert results
    for res in results:
        uris = [loc["physicalLocation"]["artifactLocation"]["uri"] for loc in res["locations"]]
        assert uris == ["rec/2-bad.jsonl"], res  # relative as given: code scanning's root
        assert "relatedLocations" not in res


def test_stdin_has_no_file_to_point_at(
    two_clients: tuple[Path, Path], sarif_validator: jsonschema.Draft4Validator
) -> None:
    _, bad = two_clients
    result = run("-", "--format", "sarif", input=bad.read_text())
    assert result.exit_code == ExitStatus.VERDICT_FAILED
    log = json.loads(result.stdout)
    sarif_validator.validate(log)
    assert log["runs"][0]["results"]
    for res in log["runs"][0]["results"]:
        (location,) = res["locations"]
        assert "physicalLocation" not in location and location["logicalLocations"]


# --------------------------------------------------------------------- both


def test_real_recordings_validate_and_say_what_the_table_says(
    junit_schema: xmlschema.XMLSchema, sarif_validator: jsonschema.Draft4Validator
) -> None:
    """The agents' and SDKs' own recordings (through the addon, committed), read together."""
    assert REAL
    code, rows = table(*REAL)
    junit = run(*REAL, "--format", "junit")
    sarif = run(*REAL, "--format", "sarif")
    assert junit.exit_code == sarif.exit_code == code
    junit_schema.validate(junit.stdout)
    cases = {
        (c.get("classname"), c.get("name")): c for c in ET.fromstring(junit.stdout).iter("testcase")
    }
    assert cases.keys() == rows.keys()
    for key, case in cases.items():
        _assert_case(case, rows[key])
    log = json.loads(sarif.stdout)
    sarif_validator.validate(log)
    results = log["runs"][0]["results"]
    assert len(results) == sum(r["verdict"] in ("FAIL", "WARNING") for r in rows.values())
    names = {p.as_uri() for p in REAL}
    for res in results:  # each names the one recording that holds its evidence's record
        (location,) = res["locations"]
        assert location["physicalLocation"]["artifactLocation"]["uri"] in names
        assert "relatedLocations" not in res, res


@pytest.mark.parametrize("fmt", ["junit", "sarif"])
def test_output_is_deterministic(two_clients: tuple[Path, Path], fmt: str) -> None:
    good, bad = two_clients
    first = run(good, bad, "--format", fmt).stdout
    assert run(good, bad, "--format", fmt).stdout == first
    # The order the inputs are given in changes nothing either.
    assert run(bad, good, "--format", fmt).stdout == first
    assert "2026-" not in first  # no time stamp of the run, nor of the records' days


@pytest.mark.parametrize("command", ["summary", "retries", "compare", "sessions", "report"])
@pytest.mark.parametrize("fmt", ["junit", "sarif"])
def test_other_commands_refuse_the_ci_formats(
    two_clients: tuple[Path, Path], command: str, fmt: str
) -> None:
    result = invoke(command, two_clients[0], "--format", fmt)
    assert result.exit_code == ExitStatus.USAGE_ERROR
    assert f"'{fmt}' is written by `mcp-layers verdicts` only, not by {command}" in (result.stderr)
    assert result.stdout == ""


def test_help_lists_the_ci_formats_for_verdicts_only() -> None:
    assert "junit|sarif" in invoke("verdicts", "--help").stdout.replace("\n", "")
    assert "junit" not in invoke("summary", "--help").stdout


# --------------------------------------------------------------------- the pure functions


def rows_of(*cells: tuple[str, str, str, str | None]) -> list[formats.Row]:
    """Table rows (client, check, verdict, evidence), level and spec from the rule."""
    return formats.parse_rows(
        HEADERS,
        [
            [client, check, verdict, RULE[check].level, RULE[check].spec, evidence]
            for client, check, verdict, evidence in cells
        ],
    )


MUST_CHECK = next(r.id for r in RULES if r.level == "MUST")
SHOULD_CHECK = next(r.id for r in RULES if r.level == "SHOULD")


@pytest.mark.parametrize(
    ("verdict", "evidence", "child", "attributes"),
    [
        ("FAIL", "#3 at 12:00:00.300 no", "failure", {"message": "#3 at 12:00:00.300 no"}),
        ("UNDECIDABLE", "1 not decidable", "skipped", {"message": "UNDECIDABLE: 1 not decidable"}),
        (
            "NOT_EXERCISED",
            None,
            "skipped",
            {"message": "NOT_EXERCISED: no instance in the recording"},
        ),
        ("WARNING", "#4 late", "system-out", {}),
        ("PASS", "#2 ok", "system-out", {}),
        ("PASS", None, None, {}),
    ],
)
def test_each_verdict_as_a_testcase(
    verdict: str,
    evidence: str | None,
    child: str | None,
    attributes: dict[str, str],
    junit_schema: xmlschema.XMLSchema,
) -> None:
    text = formats.junit_xml(rows_of(("c@1", MUST_CHECK, verdict, evidence)), RULE)
    junit_schema.validate(text)
    case = ET.fromstring(text).find("testsuite/testcase")
    assert case is not None
    assert [c.tag for c in case] == ([child] if child else [])
    if child:
        found = case.find(child)
        assert found is not None
        assert {k: found.get(k) for k in attributes} == attributes


def test_characters_xml_cannot_hold_are_replaced(junit_schema: xmlschema.XMLSchema) -> None:
    """A client names itself on the wire: a control character must not break the report."""
    text = formats.junit_xml(rows_of(("evil\x00\x1b@1", MUST_CHECK, "FAIL", "#1 \x07 <&>")), RULE)
    junit_schema.validate(text)
    case = ET.fromstring(text).find("testsuite/testcase")
    assert case is not None and case.get("classname") == "evil\ufffd\ufffd@1"
    failure = case.find("failure")
    assert failure is not None and failure.get("message") == "#1 \ufffd <&>"


def test_sarif_of_a_warning_and_a_fail(sarif_validator: jsonschema.Draft4Validator) -> None:
    table_rows = rows_of(
        ("b@1", SHOULD_CHECK, "WARNING", "#5 at 12:00:00.500 late"),
        ("a@1", MUST_CHECK, "FAIL", "#2 at 12:00:00.200 no"),
        ("a@1", SHOULD_CHECK, "UNDECIDABLE", "1 not decidable"),
        ("c@1", MUST_CHECK, "PASS", "#1 ok"),
    )
    places = {
        ("a@1", MUST_CHECK): ["/abs/rec one.jsonl"],
        ("b@1", SHOULD_CHECK): ["x.jsonl", "y.jsonl"],
    }
    log = formats.sarif_log(table_rows, RULES, version="9.9.9", places=places)
    sarif_validator.validate(log)
    results = log["runs"][0]["results"]
    assert [(r["properties"]["client"], r["ruleId"], r["level"]) for r in results] == [
        ("a@1", MUST_CHECK, "error"),
        ("b@1", SHOULD_CHECK, "warning"),
    ]
    a, b = results
    assert a["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == (
        "file:///abs/rec%20one.jsonl"
    )
    assert b["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "x.jsonl"
    assert b["relatedLocations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "y.jsonl"
    assert a["partialFingerprints"] == {formats.FINGERPRINT: f"a@1 {MUST_CHECK}"}
    assert formats.sarif_text(log) == formats.sarif_text(log)


def test_evidence_names_its_first_record() -> None:
    assert formats.evidence_record("2 of 3 failed; #7 at 16:29:08.987 retried #6") == 7
    assert formats.evidence_record("session s-1: id 1 used by #2, #3") == 2
    assert formats.evidence_record("1 not decidable from this recording") is None
    assert formats.evidence_record(None) is None


def test_every_verdict_is_mapped() -> None:
    """A verdict added later must be given a JUnit and SARIF meaning here, not fall through
    as a PASS."""
    assert {v.value for v in Verdict} == {
        "PASS",
        "FAIL",
        "WARNING",
        "UNDECIDABLE",
        "NOT_EXERCISED",
    }


def test_the_schemas_reject_what_they_should(
    junit_schema: xmlschema.XMLSchema, sarif_validator: jsonschema.Draft4Validator
) -> None:
    """The validations above can fail: a level SARIF does not have, a testcase without a
    name, are refused."""
    log = formats.sarif_log(
        rows_of(("a@1", MUST_CHECK, "FAIL", "#1 no")), RULES, version="1", places={}
    )
    log["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        sarif_validator.validate(log)
    text = formats.junit_xml(rows_of(("a@1", MUST_CHECK, "PASS", None)), RULE)
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        junit_schema.validate(text.replace(f' name="{MUST_CHECK}"', ""))


def test_docs_show_the_recipe_end_to_end() -> None:
    doc = DOC.read_text()
    section = doc[doc.index("#### Gating CI on verdicts") : doc.index("### `report`")]
    for step in (
        'mitmdump -s "$(mcp-layers addon)"',
        "--set mcp_record_dir=rec",
        "mcp-layers verdicts rec/ --format junit > verdicts.xml",
        "mcp-layers verdicts rec/ --format sarif > verdicts.sarif",
        "github/codeql-action/upload-sarif",
        "junit: verdicts.xml",  # GitLab's report
    ):
        assert step in section, step
