"""The two decoders agree on every line, good or bad; bad lines say why."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_layers_analysis.errors import NewerRecordVersion
from mcp_layers_analysis.limits import MAX_VOCABULARY
from mcp_layers_analysis.records import TRUNCATED, BadLine, BlockDecoder
from mcp_layers_analysis.schema import ALL_FIELDS, FIELDS, NESTED, SUMMARY_FIELDS

pytest.importorskip("msgspec")


def as_plain(rec: Any) -> dict[str, Any]:
    """A decoded record as plain values, whichever decoder made it."""
    out = {}
    for name in ("v", *ALL_FIELDS):
        if not hasattr(rec, name):
            continue  # not a field this decoder was asked for
        value = getattr(rec, name)
        if name in FIELDS and FIELDS[name] in NESTED and value is not None:
            value = {m: getattr(value, m) for m in NESTED[FIELDS[name]]}
        out[name] = value
    return out


def decode_both(
    data: bytes, fields: tuple[str, ...] = ALL_FIELDS
) -> tuple[list[dict[str, Any]], list[BadLine]]:
    results = []
    for fast in (True, False):
        try:
            recs, bad = BlockDecoder(fields, fast=fast).decode(data)
        except NewerRecordVersion as exc:
            results.append(("newer", exc.version, exc.index, exc.earlier))
            continue
        results.append(([as_plain(r) for r in recs], bad))
    assert results[0] == results[1]
    return results[0]  # type: ignore[return-value]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
field_values = st.fixed_dictionaries(
    {}, optional={name: json_values for name in ("v", *ALL_FIELDS)}
)
typed_values = st.fixed_dictionaries(
    {"v": st.just(1)},
    optional={
        "id": st.integers(0, 10**6),
        "kind": st.sampled_from(["request", "notification", "x"]),
        "durationMs": st.floats(0, 1e6) | st.integers(0, 100),
        "client": st.text(max_size=8),
        "httpStatuses": st.lists(st.integers(100, 599), max_size=3),
        "jsonrpc": st.fixed_dictionaries({"errorCode": st.none() | st.integers(-33000, 0)}),
        "outcome": st.sampled_from(["SUCCESS", "NEW_OUTCOME", "HTTP_ERROR"]),
        "injected": st.none() | st.fixed_dictionaries({"rule": st.text(max_size=4)}),
    },
)


@settings(max_examples=300, deadline=None)
@given(st.lists(field_values | typed_values, min_size=1, max_size=6))
def test_decoders_agree_on_any_objects(objs: list[dict[str, Any]]) -> None:
    data = b"".join(orjson.dumps(o) + b"\n" for o in objs)
    decode_both(data)
    decode_both(data, SUMMARY_FIELDS)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=30), min_size=1, max_size=5))
def test_decoders_agree_on_any_bytes(lines: list[bytes]) -> None:
    decode_both(b"\n".join(line.replace(b"\n", b"") for line in lines))


def test_missing_fields_are_null() -> None:
    recs, bad = decode_both(b'{"v":1,"kind":"request"}\n')
    assert bad == [] and recs[0]["kind"] == "request"
    assert all(v is None for k, v in recs[0].items() if k not in ("v", "kind"))


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'["x"]', "not a JSON object (an array), skipped"),
        (b'{"kind":"request"}', 'not a record (no "v" field), skipped'),
        (b'{"v":"1"}', 'not a record of a known schema version ("v": "1"), skipped'),
        (b'{"v":0}', 'not a record of a known schema version ("v": 0), skipped'),
        (b'{"v":1.0}', 'not a record of a known schema version ("v": 1.0), skipped'),
        (
            b'{"v":1,"durationMs":"fast"}',
            "not a valid v1 record: durationMs should be a number or null, not a string, skipped",
        ),
        (
            b'{"v":1,"jsonrpc":{"errorCode":1.5}}',
            "not a valid v1 record: jsonrpc.errorCode should be an integer or null, not a number, "
            "skipped",
        ),
        (
            b'{"v":1,"httpStatuses":[200,"x"]}',
            "not a valid v1 record: httpStatuses[1] should be an integer, not a string, skipped",
        ),
        (b"{oops", "not JSON (unexpected character, expected a string key at column 2), skipped"),
    ],
)
def test_bad_lines_say_why(line: bytes, reason: str) -> None:
    recs, bad = decode_both(b'{"v":1}\n' + line + b'\n{"v":1}\n')
    assert len(recs) == 2
    assert bad == [BadLine(1, reason)]


def test_a_torn_last_line_is_a_truncation_only_at_the_end() -> None:
    torn = b'{"v":1}\n{"v":1,"ki'
    assert decode_both(torn)[1] == [BadLine(1, TRUNCATED)]
    _, bad = BlockDecoder(ALL_FIELDS).decode(torn, final=False)
    assert bad[0].reason.startswith("not JSON")
    assert decode_both(b'{"v":1}\n{"v":1}')[1] == []  # complete, just unterminated


def test_blank_lines_are_skipped_silently() -> None:
    recs, bad = decode_both(b'\n{"v":1}\n  \n\r\n{"v":1}\n')
    assert len(recs) == 2 and bad == []


def test_newer_version_names_the_line_and_keeps_earlier_bad_lines() -> None:
    result = decode_both(b'{"v":1}\nnope\n{"v":7,"kind":"request"}\n{"v":1}\n')
    assert result[:3] == ("newer", 7, 2)  # type: ignore[comparison-overlap]
    assert [b.index for b in result[3]] == [1]  # type: ignore[misc]


def test_vocabularies_are_learned_and_capped() -> None:
    dec = BlockDecoder(("client", "kind"), fast=True)
    recs, _ = dec.decode(b'{"v":1,"client":"a@1"}\n{"v":1,"client":"b@2"}\n')
    assert [r.client for r in recs] == ["a@1", "b@2"]
    assert dec.vocabulary["client"] == {"a@1", "b@2"}
    many = b"".join(
        orjson.dumps({"v": 1, "client": f"c{i}"}) + b"\n" for i in range(MAX_VOCABULARY + 5)
    )
    recs, _ = dec.decode(many)
    assert len(recs) == MAX_VOCABULARY + 5
    assert dec.vocabulary["client"] is None  # too many values: plain strings from now on
    recs, _ = dec.decode(b'{"v":1,"client":"zzz","kind":"request"}\n')
    assert recs[0].client == "zzz"


def test_the_record_format_examples_decode() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "record-format.md").read_text()
    block = doc.split("```jsonl\n", 1)[1].split("```", 1)[0].encode()
    recs, bad = decode_both(block)
    assert bad == [] and len(recs) == 3
    assert [r["outcome"] for r in recs] == ["SUCCESS", None, "TOOL_ERROR"]
