"""Strict parsing and checking of the addon's `mcp_*` options (the pure half of the start-up refusal)."""

from __future__ import annotations

import re
from pathlib import Path

import mcp_layers_startup
import pytest
from mcp_layers_core import options


@pytest.mark.parametrize(
    ("name", "given", "message"),
    [
        ("mcp_record_bodies", ["maybe"], "mcp_record_bodies must be true or false, not 'maybe'"),
        ("mcp_raw_session_ids", ["perhaps"], "write --set mcp_raw_session_ids=true or"),
        ("mcp_record_bodies", ["True"], "must be true or false"),
        ("mcp_record_max_mb", ["abc"], "mcp_record_max_mb must be a whole number, not 'abc'"),
        ("mcp_fault_seed", ["x"], "mcp_fault_seed must be a whole number, not 'x'; e.g. --set"),
        ("mcp_fault_seed", [" 4"], "must be a whole number"),
        ("mcp_fault_seed", ["1_000"], "must be a whole number"),
        ("mcp_fault_seed", ["٣"], "must be a whole number"),  # int() would take it
        ("mcp_max_body_kb", [], "must be a whole number, not 'nothing'"),
        (
            "mcp_record_bodies",
            ["true", "false"],
            "is given 2 times ('true', 'false'); give it once",
        ),
        ("mcp_max_body_kb", ["0"], "must be a positive number of KiB, not 0"),
        ("mcp_record_max_mb", ["-1"], "must be 0 (no rotation) or a number of MiB"),
        ("mcp_scenario", ["a\nb"], "mcp_scenario must be printable text"),
        ("mcp_record_dir", [], "mcp_record_dir needs a value"),
        ("mcp_record_dir", ["  "], "mcp_record_dir is empty"),
        ("mcp_record_bodies", "yes", "must be true or false, not 'yes'"),  # from a config file
        ("mcp_max_body_kb", True, "must be a whole number, not True"),
    ],
)
def test_bad_values_are_refused_in_one_line(name: str, given: object, message: str) -> None:
    with pytest.raises(options.OptionValueError) as caught:
        options.parse(name, given)
    text = str(caught.value)
    assert message in text
    assert "\n" not in text and text.startswith(name)


@pytest.mark.parametrize(
    ("name", "given", "value"),
    [
        ("mcp_record_bodies", ["true"], True),
        ("mcp_record_bodies", ["false"], False),
        ("mcp_record_bodies", [], True),  # `--set mcp_record_bodies` alone, as in mitmproxy
        ("mcp_fault_seed", ["-3"], -3),
        ("mcp_record_max_mb", ["0"], 0),
        ("mcp_fault", ["http_status=503 nth=1"], "http_status=503 nth=1"),
        ("mcp_faults", [""], ""),
        ("mcp_max_body_kb", 64, 64),
    ],
)
def test_good_values_parse_as_mitmproxy_would(name: str, given: object, value: object) -> None:
    assert options.parse(name, given) == value


def test_unknown_name_names_the_nearest_option() -> None:
    assert options.startup_problem({"mcp_fautls": ["x"]}) == (
        "mcp_fautls is not an option of mcp-layers; did you mean mcp_faults?"
    )
    far = options.startup_problem({"mcp_zzz": ["1"]})
    assert far is not None and far.startswith("mcp_zzz is not an option of mcp-layers; the options")
    assert "mcp_record_dir" in far


def test_startup_problem_ignores_other_addons_and_accepts_good_values() -> None:
    assert options.startup_problem({"other_addon_flag": ["maybe"], "mcp_fault_seed": ["7"]}) is None
    assert options.startup_problem({"mcp_fault_seed": ["7"], "mcp_record_bodies": ["no"]}) == (
        "mcp_record_bodies must be true or false, not 'no'; "
        "write --set mcp_record_bodies=true or --set mcp_record_bodies=false"
    )


@pytest.mark.parametrize(
    ("name", "given", "message"),
    [
        ("mcp_otlp_endpoint", ["localhost:4318"], "must be an http(s) URL"),
        ("mcp_otlp_endpoint", ["ftp://collector"], "must be an http(s) URL"),
        ("mcp_otlp_headers", ["authorization"], "name=value pairs"),
        ("mcp_otlp_headers", ["bad name=1"], "name=value pairs"),
    ],
)
def test_bad_otlp_settings_are_refused(name: str, given: object, message: str) -> None:
    with pytest.raises(
        options.OptionValueError, match=message.replace("(", r"\(").replace(")", r"\)")
    ):
        options.parse(name, given)


def test_otlp_settings_parse() -> None:
    from mcp_layers_core.otel_config import endpoint_base, parse_headers

    assert options.parse("mcp_otlp_endpoint", [""]) == ""  # off
    assert endpoint_base("http://c:4318/v1/traces") == "http://c:4318"
    assert endpoint_base("https://c/otlp/") == "https://c/otlp"
    assert parse_headers("Authorization=Bearer%20x, x-scope-orgid=team") == {
        "authorization": "Bearer x",
        "x-scope-orgid": "team",
    }


REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def test_the_readme_options_table_is_the_one_generated_from_the_specs() -> None:
    text = README.read_text(encoding="utf-8")
    assert options.with_table(text) == text, "run: python -m mcp_layers_core.options"
    start = text.index(options.TABLE_START)
    table = text[start : text.index(options.TABLE_END, start)]
    assert [line.split("`")[1] for line in table.splitlines()[3:]] == list(options.SPECS)


@pytest.mark.parametrize("name", list(options.SPECS))
def test_each_default_and_example_is_a_good_value(name: str) -> None:
    """The default is of the option's type and passes its checks; the example a refusal
    message offers (`e.g. --set name=example`) is accepted as typed."""
    spec = options.SPECS[name]
    assert type(spec.default) is options.TYPES[spec.kind]
    options.check(name, spec.default)
    options.parse(name, [spec.example.strip("'")])
    assert spec.help and spec.meaning and "\n" not in spec.help + spec.meaning


def test_every_option_row_elsewhere_in_the_docs_names_an_option_and_its_default() -> None:
    """A topic's own table (docs/otel.md) may say more of an option, not another name or
    another default."""
    rows = [
        (path.name, line.split("|")[1:3])
        for path in sorted((REPO / "docs").glob("*.md"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if re.match(r"\| `mcp_[a-z_]+` \|", line)
    ]
    assert rows, "the scan found no options table"
    for doc, (name, default) in rows:
        name = name.strip().strip("`")
        assert name in options.SPECS, f"{doc}: {name} is not an option"
        shown = options.markdown_table().split(f"| `{name}` | ")[1].split(" |")[0]
        assert default.strip().startswith(shown), f"{doc}: {name} defaults to {shown}"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:s3cret@127.0.0.1:4318/v1/traces?token=x", "http://127.0.0.1:4318"),
        ("https://collector.example", "https://collector.example"),
        ("http://[::1]:4318", "http://[::1]:4318"),
        ("http://host:notaport", "(an endpoint that is not a URL)"),
    ],
)
def test_an_endpoint_is_shown_without_what_may_be_secret(url: str, shown: str) -> None:
    assert mcp_layers_startup.shown_endpoint(url) == shown
