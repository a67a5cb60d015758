"""`verdicts --format junit|sarif`: the verdict table as a CI system reads it.

Pure functions from the table's rows (`verdicts.HEADERS`) and the rules to text or a JSON
document, so that a project can gate its CI on a recorded test run:

- JUnit XML (the Ant/Surefire dialect that Jenkins, GitLab, GitHub test reporters and most
  CI systems read): a `<testsuite>` per client, a `<testcase>` per client × check
  (`classname` the client, `name` the check id). FAIL is a `<failure>`; UNDECIDABLE and
  NOT_EXERCISED are `<skipped>`; WARNING passes (JUnit has no warning) and says so in
  `<system-out>`.
- SARIF 2.1.0 (GitHub code scanning, `github/codeql-action/upload-sarif`): one rule per
  check with its spec link, a result per FAIL (level `error`) and per WARNING (`warning`),
  located in the recording that holds the record its evidence names.

Output is deterministic: suites, cases and results are sorted, and nothing carries a time
or a host name, so the same recording gives the same bytes.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Final, Literal

from .verdicts import Verdict

if TYPE_CHECKING:
    from .filters import Filters
    from .load import Engine
    from .verdicts import Rule

CiFormat = Literal["junit", "sarif"]

#: The formats only `verdicts` writes (the other commands refuse them by name).
CI_FORMATS: Final[tuple[CiFormat, ...]] = ("junit", "sarif")

#: The SARIF schema the log declares: the OASIS standard with its first errata, the same
#: file tests/fixtures/schemas/ holds.
SARIF_SCHEMA: Final = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SARIF_VERSION: Final = "2.1.0"

#: The tool's name in the SARIF log (`tool.driver.name`) and the JUnit `<testsuites>`.
TOOL: Final = "mcp-layers"

#: The `partialFingerprints` key: a result is the same alert from run to run when its
#: client and check are (code scanning then tracks it instead of opening a new one).
FINGERPRINT: Final = "mcpLayersClientCheck/v1"

#: A record id in the evidence: `#7 at 16:29:08.987`, `GET #12`, `used by #2, #3`.
_RECORD_ID: Final = re.compile(r"#(\d+)")

#: Characters XML 1.0 cannot carry, even escaped. A client's name or an evidence string
#: comes from the wire and may hold any of them; the document must still parse.
_NOT_XML: Final = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True, slots=True)
class Row:
    """One row of the verdict table."""

    client: str
    check: str
    verdict: Verdict
    level: str
    spec: str
    evidence: str | None


#: Where the record a result's evidence names first was read: (client, check) → the paths
#: (as given) of the inputs that hold it, in input order; more than one only when the
#: evidence cannot tell them apart.
Places = Mapping[tuple[str, str], Sequence[str]]


def parse_rows(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> list[Row]:
    """The table's rows by column name (not position: the table may grow columns)."""
    out = []
    for cells in rows:
        by = dict(zip(headers, cells, strict=True))
        evidence = by["evidence"]
        out.append(
            Row(
                client=str(by["client"]),
                check=str(by["check"]),
                verdict=Verdict(str(by["verdict"])),
                level=str(by["level"]),
                spec=str(by["spec"]),
                evidence=None if evidence is None else str(evidence),
            )
        )
    return sorted(out, key=lambda r: (r.client, r.check))


def evidence_record(evidence: str | None) -> int | None:
    """The first record id the evidence names (`#7`), the one a result is located at."""
    found = _RECORD_ID.search(evidence or "")
    return int(found.group(1)) if found else None


# --------------------------------------------------------------------- JUnit


def junit_xml(rows: Sequence[Row], rules: Mapping[str, Rule]) -> str:
    """The JUnit XML document: a `<testsuite>` per client, a `<testcase>` per check."""
    root = ET.Element("testsuites", name=f"{TOOL} verdicts")
    clients = sorted({r.client for r in rows})
    for client in clients:
        _testsuite(root, client, [r for r in rows if r.client == client], rules)
    _count(root, rows, skipped=False)
    ET.indent(root, space="  ")
    body = ET.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'


def _count(element: ET.Element, rows: Sequence[Row], *, skipped: bool) -> None:
    """The counts a JUnit reader checks (`<testsuites>` has no `skipped` in the schema)."""
    element.set("tests", str(len(rows)))
    element.set("failures", str(sum(r.verdict is Verdict.FAIL for r in rows)))
    element.set("errors", "0")  # a verdict is never an error of the tool
    if skipped:
        element.set("skipped", str(sum(r.verdict in _SKIPPED for r in rows)))


#: Verdicts that decided nothing: skipped tests, not passes.
_SKIPPED: Final = frozenset({Verdict.UNDECIDABLE, Verdict.NOT_EXERCISED})

#: Verdicts that are SARIF results (a PASS or a skip is no finding).
_RESULTS: Final = frozenset({Verdict.FAIL, Verdict.WARNING})


def _testsuite(
    root: ET.Element, client: str, rows: Sequence[Row], rules: Mapping[str, Rule]
) -> None:
    suite = ET.SubElement(root, "testsuite", name=_xml(client))
    _count(suite, rows, skipped=True)
    for row in rows:
        _testcase(suite, row, rules.get(row.check))


def _testcase(suite: ET.Element, row: Row, rule: Rule | None) -> None:
    case = ET.SubElement(suite, "testcase", classname=_xml(row.client), name=_xml(row.check))
    evidence = row.evidence or ""
    about = _about(row, rule)
    if row.verdict is Verdict.FAIL:
        failure = ET.SubElement(case, "failure", message=_xml(evidence), type=row.level)
        failure.text = _xml(f"FAIL ({row.level} broken): {about}\n{evidence}")
    elif row.verdict is Verdict.UNDECIDABLE:
        ET.SubElement(case, "skipped", message=_xml(f"UNDECIDABLE: {evidence}"))
    elif row.verdict is Verdict.NOT_EXERCISED:
        # Named, not bare: a reader's list of skips then tells the two kinds apart.
        ET.SubElement(case, "skipped", message="NOT_EXERCISED: no instance in the recording")
    elif row.verdict is Verdict.WARNING:
        out = ET.SubElement(case, "system-out")
        out.text = _xml(f"WARNING ({_missed(row.level)}): {about}\n{evidence}")
    elif evidence:  # PASS: what it passed on, for a release note
        out = ET.SubElement(case, "system-out")
        out.text = _xml(f"PASS ({row.level}): {about}\n{evidence}")


def _missed(level: str) -> str:
    """What a WARNING missed: a SHOULD, or the softer part of a MUST rule (a retry late
    but within twice the delay, as the conformance suite grades it)."""
    return "a SHOULD missed" if level == "SHOULD" else f"the softer part of a {level} missed"


def _about(row: Row, rule: Rule | None) -> str:
    """The requirement, its spec and link: what a reader of one case needs."""
    if rule is None:  # a row of a check this build does not know: say what the row says
        return row.spec
    return f"{rule.requirement} ({row.spec}; {rule.url})"


def _xml(text: str) -> str:
    """Text XML 1.0 can hold: what it cannot becomes U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


# --------------------------------------------------------------------- SARIF


def sarif_log(
    rows: Sequence[Row], rules: Sequence[Rule], *, version: str, places: Places
) -> dict[str, Any]:
    """The SARIF 2.1.0 log: one run, one rule per check, a result per FAIL and WARNING."""
    index = {rule.id: i for i, rule in enumerate(rules)}
    results = [
        _result(row, index.get(row.check), places) for row in rows if row.verdict in _RESULTS
    ]
    driver = {
        "name": TOOL,
        "version": version,
        "semanticVersion": version,
        "rules": [_descriptor(rule) for rule in rules],
    }
    run = {"tool": {"driver": driver}, "columnKind": "unicodeCodePoints", "results": results}
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def sarif_text(log: Mapping[str, Any]) -> str:
    """The log as a file: indented, keys in the order built, one newline at the end."""
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _descriptor(rule: Rule) -> dict[str, Any]:
    """A check as a SARIF `reportingDescriptor`."""
    return {
        "id": rule.id,
        "shortDescription": {"text": rule.requirement},
        "fullDescription": {"text": rule.quote or rule.requirement},
        "helpUri": rule.url,
        "help": {"text": f"{rule.level} ({rule.spec} {rule.section}): {rule.quote}"},
        # A MUST broken is an error; a SHOULD missed a warning (what `result.level` says).
        "defaultConfiguration": {"level": "error" if rule.level == "MUST" else "warning"},
        "properties": {
            "level": str(rule.level),
            "spec": rule.spec,
            "section": rule.section,
            "namespace": rule.namespace,
            "tags": ["mcp", rule.namespace, str(rule.level)],
        },
    }


def _result(row: Row, rule_index: int | None, places: Places) -> dict[str, Any]:
    evidence = row.evidence or row.verdict.value
    result: dict[str, Any] = {
        "ruleId": row.check,
        "level": "error" if row.verdict is Verdict.FAIL else "warning",
        "message": {"text": f"{row.client}: {row.verdict.value} ({row.level}): {evidence}"},
        "locations": [],
        "partialFingerprints": {FINGERPRINT: f"{row.client} {row.check}"},
        "properties": {"client": row.client, "verdict": row.verdict.value},
    }
    if rule_index is not None:
        result["ruleIndex"] = rule_index
    files = places.get((row.client, row.check), ())
    # The recording that holds the record named first; code scanning needs a file to show
    # an alert. Another recording with a record of that id for the client is related.
    located = [_location(row.client, files[0])] if files else [_location(row.client, None)]
    result["locations"] = located
    if len(files) > 1:
        result["relatedLocations"] = [
            {"id": i, **_location(row.client, name)} for i, name in enumerate(files[1:], 1)
        ]
    return result


def _location(client: str, name: str | None) -> dict[str, Any]:
    """A result's place: the recording (where known) and, always, the client by name."""
    location: dict[str, Any] = {"logicalLocations": [{"name": client, "kind": "module"}]}
    if name is not None:
        location["physicalLocation"] = {"artifactLocation": {"uri": artifact_uri(name)}}
    return location


def artifact_uri(name: str) -> str:
    """A recording's path as a SARIF URI: relative paths stay relative (code scanning reads
    them from the repository's root), absolute ones become `file://` URIs."""
    path = PurePath(name)
    if path.is_absolute():
        return path.as_uri()
    return urllib.parse.quote(path.as_posix(), safe="/")


# --------------------------------------------------------------------- where records are


def places(
    engine: Engine, filters: Filters, rows: Sequence[Row], names: Sequence[str | None]
) -> Places:
    """Which inputs hold the record each result's evidence names first (the one query here).

    `names`: the inputs' paths by input number (`_src`), None for stdin (no file to point
    at). A record id is unique only within its recording: where one client has that id in
    several, the evidence's time of day (`#7 at 16:29:08.987`) or session id tells which.
    """
    from .verdicts import base

    named = {
        (r.client, r.check): (record, r.evidence or "")
        for r in rows
        if r.verdict in _RESULTS and (record := evidence_record(r.evidence)) is not None
    }
    if not named:
        return {}
    ids = ", ".join(str(i) for i in sorted({record for record, _ in named.values()}))
    sql = (
        f"WITH {base(filters)}\nSELECT DISTINCT cl, id, src, substr(ts, 12, 12), session "
        f"FROM r WHERE id IN ({ids})"
    )
    held: dict[tuple[str, int], list[tuple[int, str, str]]] = {}
    for client, record, src, time_of_day, session in engine.rows(sql):
        held.setdefault((client, record), []).append((src, time_of_day or "", session or ""))
    found: dict[tuple[str, str], list[str]] = {}
    for (client, check), (record, evidence) in named.items():
        candidates = sorted(held.get((client, record), []))
        fitting = _fitting(record, evidence, candidates)
        files = [n for n in dict.fromkeys(names[src] for src, _, _ in fitting) if n is not None]
        if files:
            found[(client, check)] = files
    return found


def _fitting(
    record: int, evidence: str, candidates: list[tuple[int, str, str]]
) -> list[tuple[int, str, str]]:
    """The candidates (src, time of day, session) the evidence names: by the record's time
    of day first (`#7 at 16:29:08.987` names one record), else by its session (evidence
    may name several), else all of them."""
    by_time = [c for c in candidates if c[1] and f"#{record} at {c[1]}" in evidence]
    by_session = [c for c in candidates if c[2] and c[2] in evidence]
    return by_time or by_session or candidates
