"""The addons' `mcp_*` options, declared once: for each its type, default, help, the
README's line, a value that works, and the checks on its value. Everything else is
derived from `SPECS`: the adapters' `loader.add_option` calls (`mcp_layers_startup`),
strict parsing of what a user typed, the checks, and the README's options table
(`python -m mcp_layers_core.options` rewrites it; a test checks it is current).

mitmproxy holds a script's `--set` values until the script declares its options, and
then parses them where a failure is lost (the proxy runs on, recording nothing). So the
adapter hands the raw strings here first and refuses to start on the first message; each
failure is a one-line message that says what to write instead.
Pure: no mitmproxy; no I/O but `main`'s, which rewrites the README.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from . import faults, limits
from .otel_config import OtlpConfigError, endpoint_base, parse_headers

PREFIX = "mcp_"
MAX_SCENARIO_CHARS = 200

Kind = Literal["bool", "int", "str"]
Value = bool | int | str
#: The addon that declares an option (`mcp_layers.py` loads both).
Addon = Literal["recorder", "faults"]
#: A check on a parsed value: (name, value, example) -> what is wrong, in one line that
#: starts with the name and says what to write, or None.
Check = Callable[[str, object, str], str | None]

#: The Python type mitmproxy's `loader.add_option` takes for each kind.
TYPES: Final[Mapping[Kind, type]] = {"bool": bool, "int": int, "str": str}


@dataclass(frozen=True, slots=True)
class Spec:
    """One option, all that is said of it."""

    kind: Kind
    default: Value
    help: str  # mitmproxy's help: `mitmdump --options`, mitmweb's option editor
    meaning: str  # the README's options table (Markdown)
    example: str  # a value that works, for "e.g. --set name=example"
    addon: Addon = "recorder"
    check: Check | None = None


# -- the checks ----------------------------------------------------------------------------


def _at_least(low: int, what: str) -> Check:
    """A whole number no lower than `low`; `what` says which, e.g. "a positive number"."""

    def check(name: str, value: object, example: str) -> str | None:
        if _int(value) < low:
            return f"{name} must be {what}, not {value}; e.g. --set {name}={example}"
        return None

    return check


def _label(name: str, value: object, example: str) -> str | None:
    if len(str(value)) > MAX_SCENARIO_CHARS or not str(value).isprintable():
        return (
            f"{name} must be printable text of at most {MAX_SCENARIO_CHARS} characters, "
            f"e.g. --set {name}={example}"
        )
    return None


def _directory(name: str, value: object, example: str) -> str | None:
    if not str(value).strip():
        return f"{name} is empty; name a directory, e.g. --set {name}=recordings"
    return None


def _otlp_endpoint(name: str, value: object, example: str) -> str | None:
    if str(value).strip():
        try:
            endpoint_base(str(value))
        except OtlpConfigError as e:
            return str(e)
    return None


def _otlp_headers(name: str, value: object, example: str) -> str | None:
    try:
        parse_headers(str(value))
    except OtlpConfigError as e:
        return str(e)
    return None


_KIB = _at_least(1, "a positive number of KiB")
_OFF_OR_MORE = _at_least(0, "0 (off) or a positive number")

#: Every option the addons declare, in the order of mitmproxy's `--options` and the README.
SPECS: Final[dict[str, Spec]] = {
    "mcp_record_dir": Spec(
        "str",
        "recordings",
        "Directory for the JSONL recordings; one file per proxy run, named by its UTC start time.",
        "where the JSONL files go (created `0700`, files `0600`)",
        "./recordings",
        check=_directory,
    ),
    "mcp_scenario": Spec(
        "str",
        "",
        "A label copied into every record's `scenario` field (a fault preset, a test name).",
        "a label copied into every record (`scenario`)",
        "errors.http_status_sequence",
        check=_label,
    ),
    "mcp_max_body_kb": Spec(
        "int",
        limits.MAX_BODY_BYTES // 1024,
        "Largest JSON body (KiB) the addon parses; larger answers pass through and are "
        "recorded as UNINSPECTED.",
        "largest JSON body parsed; larger answers pass through, recorded `UNINSPECTED`",
        str(limits.MAX_BODY_BYTES // 1024),
        check=_KIB,
    ),
    "mcp_max_event_kb": Spec(
        "int",
        limits.MAX_EVENT_BYTES // 1024,
        "Largest SSE event (KiB) the addon buffers; a larger event passes through "
        "unparsed and is noted.",
        "largest SSE event buffered; a larger one passes through unparsed and is noted",
        str(limits.MAX_EVENT_BYTES // 1024),
        check=_KIB,
    ),
    "mcp_record_max_mb": Spec(
        "int",
        0,
        "Rotate the recording to a numbered part once it reaches this many MiB "
        "(0: never); a record is never split.",
        "rotate to `mcp-<start>-002.jsonl`, … past this size (0: never); a record is never split",
        "100",
        check=_at_least(0, "0 (no rotation) or a number of MiB"),
    ),
    "mcp_retain_mb": Spec(
        "int",
        0,
        "Keep at most this many MiB of this addon's recording files in mcp_record_dir, "
        "deleting the oldest (0: off). Parts rotate at a tenth of it unless "
        "mcp_record_max_mb says otherwise.",
        "keep at most this many MiB of this addon's own recording files, oldest deleted "
        "first (0: off; see below)",
        "10000",
        check=_OFF_OR_MORE,
    ),
    "mcp_retain_days": Spec(
        "int",
        0,
        "Delete this addon's recording files older than this many days (0: off).",
        "delete this addon's own recording files older than this many days (0: off)",
        "14",
        check=_OFF_OR_MORE,
    ),
    "mcp_max_buffered_mb": Spec(
        "int",
        limits.MAX_BUFFERED_BYTES // 1024 // 1024,
        "All SSE streams together buffer at most this many MiB of unfinished events; "
        "past it the event that grows is dropped unparsed and noted.",
        "all SSE streams together buffer at most this much of unfinished events; past it "
        "the event that grows is dropped unparsed (note `sse_event_over_budget`)",
        str(limits.MAX_BUFFERED_BYTES // 1024 // 1024),
        check=_at_least(1, "a positive number of MiB"),
    ),
    "mcp_max_sessions": Spec(
        "int",
        limits.MAX_SESSIONS,
        "Sessions remembered; past it the least recently seen is forgotten, and its "
        "session_end (evicted) written.",
        "sessions remembered; past it the least recently seen is forgotten and its "
        "`session_end` (`evicted`) written",
        str(limits.MAX_SESSIONS),
        check=_at_least(1, "a positive number of sessions"),
    ),
    "mcp_session_idle_s": Spec(
        "int",
        int(limits.SESSION_IDLE_S),
        "A session with no traffic for this many seconds ends (session_end idle); 0: never.",
        "a session with no traffic this long ends (`session_end`, `idle`); 0: never",
        str(int(limits.SESSION_IDLE_S)),
        check=_OFF_OR_MORE,
    ),
    "mcp_record_bodies": Spec(
        "bool",
        False,
        "Also write each request and its answer, redacted (secret-named members blanked, "
        "token shapes scrubbed, strings cut), for deeper debugging.",
        "also write each request and its answer, redacted (secret-named members blanked, "
        "token shapes scrubbed, strings cut)",
        "true",
    ),
    "mcp_raw_session_ids": Spec(
        "bool",
        False,
        "Write Mcp-Session-Id values as they are instead of a stable hash "
        "(they can be credentials). An id beginning 'c-' is hashed all the same: "
        "'c-' marks a client's stand-in session.",
        "write `Mcp-Session-Id` values as they are instead of a stable hash (an id "
        "beginning `c-` is hashed all the same: `c-` marks a client's stand-in)",
        "true",
    ),
    "mcp_flow_comments": Spec(
        "bool",
        True,
        "Put each record's verdict on its flow as mitmproxy's flow comment and marker "
        "(shown by mitmweb, kept in saved flows); the traffic is never touched.",
        "put each record's verdict on its flow as mitmproxy's comment and marker "
        "([docs/mitmproxy.md](docs/mitmproxy.md))",
        "false",
    ),
    "mcp_otlp_endpoint": Spec(
        "str",
        "",
        "Also send every exchange as an OpenTelemetry span (and the MCP metrics) to this "
        "OTLP/HTTP collector, e.g. http://127.0.0.1:4318, in the background (needs "
        "`pip install 'mcp-layers[otel]'`; docs/otel.md). Empty: off.",
        "also send every exchange as an OpenTelemetry span to this OTLP/HTTP collector "
        "([docs/otel.md](docs/otel.md))",
        "http://127.0.0.1:4318",
        check=_otlp_endpoint,
    ),
    "mcp_otlp_headers": Spec(
        "str",
        "",
        "Headers for the OTLP collector, `name=value,name2=value2` (values URL-encoded), "
        "e.g. authorization=Bearer%20TOKEN. Never logged.",
        "headers for it (`authorization=Bearer%20TOKEN,…`), never logged",
        "'authorization=Bearer%20TOKEN'",
        check=_otlp_headers,
    ),
    "mcp_faults": Spec(
        "str",
        "",
        "Inject faults: a preset name (" + ", ".join(faults.PRESETS) + ") or a JSON rules "
        "file; see docs/faults.md.",
        "a fault preset name or a JSON rules file ([docs/faults.md](docs/faults.md))",
        "errors.http_status_sequence",
        addon="faults",
    ),
    "mcp_fault": Spec(
        "str",
        "",
        "Inject one fault, written inline, e.g. 'http_status=503,200 retry_after=2'.",
        "one fault rule, inline",
        "'http_status=503 nth=1'",
        addon="faults",
    ),
    "mcp_fault_seed": Spec(
        "int",
        0,
        "Seed of the fault rules' probability draws.",
        "seed of the rules' `probability` draws",
        "42",
        addon="faults",
    ),
}

#: The options each addon declares.
FAULT_OPTIONS: Final = frozenset(n for n, s in SPECS.items() if s.addon == "faults")
RECORDER_OPTIONS: Final = frozenset(n for n, s in SPECS.items() if s.addon == "recorder")

_INT = re.compile(r"-?[0-9]+")


class OptionValueError(ValueError):
    """One line: the option, what was wrong, and what to write."""


def unknown_name(name: str) -> str:
    """The message for a `mcp_*` name the addon does not have, with the nearest one."""
    near = difflib.get_close_matches(name, SPECS, n=1, cutoff=0.6)
    hint = f"did you mean {near[0]}?" if near else "the options are " + ", ".join(SPECS)
    return f"{name} is not an option of mcp-layers; {hint}"


def parse(name: str, given: Sequence[str] | object) -> Value:
    """The value of `name` from what the user gave: the strings of its `--set`s (one
    expected), or an already-typed value (a mitmproxy config.yaml). Raises
    OptionValueError; the value is also checked (`check`)."""
    spec = SPECS[name]
    if isinstance(given, (list, tuple)):
        if len(given) > 1:
            shown = ", ".join(repr(v) for v in given)
            raise OptionValueError(f"{name} is given {len(given)} times ({shown}); give it once")
        value = _from_text(name, spec, given[0] if given else None)
    else:
        value = _typed(name, spec, given)
    check(name, value)
    return value


def check(name: str, value: object) -> None:
    """The checks on a parsed value (also run when an option changes at run time)."""
    spec = SPECS.get(name)
    if spec is not None and spec.check is not None:
        problem = spec.check(name, value, spec.example)
        if problem is not None:
            raise OptionValueError(problem)


def startup_problem(given: Mapping[str, object]) -> str | None:
    """The first problem among the `mcp_*` entries of what mitmproxy holds for the addon
    (name -> the strings of its `--set`s, or a typed value), or None if all are good.
    Names without the prefix belong to other addons and are not looked at."""
    for name in sorted(given):
        if not name.startswith(PREFIX):
            continue
        if name not in SPECS:
            return unknown_name(name)
        try:
            parse(name, given[name])
        except OptionValueError as e:
            return str(e)
    return None


def _from_text(name: str, spec: Spec, text: str | None) -> Value:
    if spec.kind == "bool":
        # `--set name` alone means true, as everywhere in mitmproxy.
        if text in (None, "", "true"):
            return True
        if text == "false":
            return False
        raise OptionValueError(
            f"{name} must be true or false, not {text!r}; "
            f"write --set {name}=true or --set {name}=false"
        )
    if spec.kind == "int":
        if text is None or not _INT.fullmatch(text):
            raise OptionValueError(
                f"{name} must be a whole number, not {text or 'nothing'!r}; "
                f"e.g. --set {name}={spec.example}"
            )
        return int(text)
    if text is None:
        raise OptionValueError(f"{name} needs a value, e.g. --set {name}={spec.example}")
    return text


def _typed(name: str, spec: Spec, value: object) -> Value:
    wanted = TYPES[spec.kind]
    # bool is an int in Python; a config file's `true` is no number of KiB.
    if isinstance(value, wanted) and not (spec.kind == "int" and isinstance(value, bool)):
        return value  # type: ignore[return-value]
    raise OptionValueError(
        f"{name} must be {_what(spec.kind)}, not {value!r}; e.g. --set {name}={spec.example}"
    )


def _what(kind: Kind) -> str:
    return {"bool": "true or false", "int": "a whole number", "str": "text"}[kind]


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


# -- the README's table -------------------------------------------------------------------

#: The README region this module writes, between these two lines.
TABLE_START: Final = "<!-- generated: options (python -m mcp_layers_core.options) -->"
TABLE_END: Final = "<!-- end generated -->"


def markdown_table() -> str:
    """The README's options table: every option, its default and what it does."""
    rows = ["| option | default | meaning |", "|---|---|---|"]
    rows += [f"| `{n}` | {_shown(s.default)} | {s.meaning} |" for n, s in SPECS.items()]
    return "\n".join(rows)


def _shown(default: Value) -> str:
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, str):
        return f"`{default}`" if default else "empty"
    return str(default)


def with_table(text: str) -> str:
    """`text` (the README) with its generated options table replaced by the current one."""
    start, end = text.find(TABLE_START), text.find(TABLE_END, text.find(TABLE_START))
    if start < 0 or end < 0:
        raise ValueError(f"no region between {TABLE_START!r} and {TABLE_END!r}")
    return text[: start + len(TABLE_START)] + "\n" + markdown_table() + "\n" + text[end:]


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite the README's options table, or (`--check`) exit 1 if it is stale."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--readme", type=Path, default=Path("README.md"))
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = args.readme.read_text(encoding="utf-8")
    current = with_table(text)
    if current == text:
        return 0
    if args.check:
        print(f"{args.readme}: the options table is stale", file=sys.stderr)
        return 1
    args.readme.write_text(current, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
