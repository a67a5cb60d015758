"""The addon's `mcp_*` options: their names, strict parsing of what a user typed, and the
checks on their values, each failure a one-line message that says what to write instead.

mitmproxy holds a script's `--set` values until the script declares its options, and
then parses them where a failure is lost (the proxy runs on, recording nothing). So the
adapter hands the raw strings here first and refuses to start on the first message.
Pure: no mitmproxy, no I/O.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from . import limits
from .otel_config import OtlpConfigError, endpoint_base, parse_headers

PREFIX = "mcp_"
MAX_SCENARIO_CHARS = 200

Kind = Literal["bool", "int", "str"]


@dataclass(frozen=True, slots=True)
class Spec:
    kind: Kind
    example: str  # a value that works, for "e.g. --set name=example"


#: Every option the addon declares (the adapter test checks the two lists agree).
SPECS: dict[str, Spec] = {
    "mcp_record_dir": Spec("str", "./recordings"),
    "mcp_scenario": Spec("str", "errors.http_status_sequence"),
    "mcp_max_body_kb": Spec("int", str(limits.MAX_BODY_BYTES // 1024)),
    "mcp_max_event_kb": Spec("int", str(limits.MAX_EVENT_BYTES // 1024)),
    "mcp_record_max_mb": Spec("int", "100"),
    "mcp_retain_mb": Spec("int", "10000"),
    "mcp_retain_days": Spec("int", "14"),
    "mcp_max_buffered_mb": Spec("int", str(limits.MAX_BUFFERED_BYTES // 1024 // 1024)),
    "mcp_max_sessions": Spec("int", str(limits.MAX_SESSIONS)),
    "mcp_session_idle_s": Spec("int", str(int(limits.SESSION_IDLE_S))),
    "mcp_record_bodies": Spec("bool", "true"),
    "mcp_raw_session_ids": Spec("bool", "true"),
    "mcp_flow_comments": Spec("bool", "false"),
    "mcp_otlp_endpoint": Spec("str", "http://127.0.0.1:4318"),
    "mcp_otlp_headers": Spec("str", "'authorization=Bearer%20TOKEN'"),
    "mcp_faults": Spec("str", "errors.http_status_sequence"),
    "mcp_fault": Spec("str", "'http_status=503 nth=1'"),
    "mcp_fault_seed": Spec("int", "42"),
}

#: The options each addon declares.
FAULT_OPTIONS: frozenset[str] = frozenset({"mcp_faults", "mcp_fault", "mcp_fault_seed"})
RECORDER_OPTIONS: frozenset[str] = frozenset(SPECS) - FAULT_OPTIONS

_INT = re.compile(r"-?[0-9]+")


class OptionValueError(ValueError):
    """One line: the option, what was wrong, and what to write."""


def unknown_name(name: str) -> str:
    """The message for a `mcp_*` name the addon does not have, with the nearest one."""
    near = difflib.get_close_matches(name, SPECS, n=1, cutoff=0.6)
    hint = f"did you mean {near[0]}?" if near else "the options are " + ", ".join(SPECS)
    return f"{name} is not an option of mcp-layers; {hint}"


def parse(name: str, given: Sequence[str] | object) -> bool | int | str:
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
    if name in ("mcp_max_body_kb", "mcp_max_event_kb") and _int(value) <= 0:
        raise OptionValueError(
            f"{name} must be a positive number of KiB, not {value}; "
            f"e.g. --set {name}={SPECS[name].example}"
        )
    if name in ("mcp_max_buffered_mb", "mcp_max_sessions") and _int(value) <= 0:
        unit = "MiB" if name.endswith("_mb") else "sessions"
        raise OptionValueError(
            f"{name} must be a positive number of {unit}, not {value}; "
            f"e.g. --set {name}={SPECS[name].example}"
        )
    if name in ("mcp_retain_mb", "mcp_retain_days", "mcp_session_idle_s") and _int(value) < 0:
        raise OptionValueError(
            f"{name} must be 0 (off) or a positive number, not {value}; "
            f"e.g. --set {name}={SPECS[name].example}"
        )
    if name == "mcp_record_max_mb" and _int(value) < 0:
        raise OptionValueError(
            f"mcp_record_max_mb must be 0 (no rotation) or a number of MiB, not {value}; "
            "e.g. --set mcp_record_max_mb=100"
        )
    if name == "mcp_scenario" and (
        len(str(value)) > MAX_SCENARIO_CHARS or not str(value).isprintable()
    ):
        raise OptionValueError(
            f"mcp_scenario must be printable text of at most {MAX_SCENARIO_CHARS} characters, "
            "e.g. --set mcp_scenario=errors.http_status_sequence"
        )
    if name == "mcp_otlp_endpoint" and str(value).strip():
        try:
            endpoint_base(str(value))
        except OtlpConfigError as e:
            raise OptionValueError(str(e)) from None
    if name == "mcp_otlp_headers":
        try:
            parse_headers(str(value))
        except OtlpConfigError as e:
            raise OptionValueError(str(e)) from None
    if name == "mcp_record_dir" and not str(value).strip():
        raise OptionValueError(
            "mcp_record_dir is empty; name a directory, e.g. --set mcp_record_dir=recordings"
        )


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


def _from_text(name: str, spec: Spec, text: str | None) -> bool | int | str:
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


def _typed(name: str, spec: Spec, value: object) -> bool | int | str:
    wanted = {"bool": bool, "int": int, "str": str}[spec.kind]
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
