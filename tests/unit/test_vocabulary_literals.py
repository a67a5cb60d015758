"""No product module compares a record term written as a string literal (issue 26).

The record's vocabulary (`Kind`, `Layer`, `Outcome`, `RetryOrigin`, `EndReason`,
`StreamEnd`, `NoteCode`, and the session prefixes) is defined once, in
`mcp_layers_core.record`. Code compares the enum members (`kind == Kind.STREAM`), and SQL
takes its terms from `mcp_layers_analysis.terms` (`kind = {sql(Kind.STREAM)}`), so that a
renamed or removed term fails where it is named instead of quietly matching nothing.

The scan reads the source (AST) of every module under `ROOTS` and reports:

- a comparison (`==`, `!=`, `in`, `not in`, a `match` case) of a value with a string
  literal that is a term; a literal on the left of `in` only when it cannot be a member
  name (`"error" in message` asks for a key, `"proxy_shutdown" in notes` for a term);
- a term as the argument of `.startswith`/`.endswith`/`.removeprefix`/`.removesuffix`,
  the session prefixes `c-` and `s-` included; and any test of a session against
  `STAND_IN_PREFIX` in code or SQL: whether a session is issued is
  `record.is_issued_session`'s to say (`terms.issued_session` in SQL);
- a tuple, list or set literal of two or more terms of one vocabulary (a list of kinds
  written out, to be compared later);
- in a string that reads as SQL, a quoted term: `kind = 'request'`, `IN ('eof', …)`,
  `LIKE 'not_ended%'`, `starts_with(session, 'c-')`.

Dictionary keys (`record["kind"]`), messages and docstrings are not comparisons and pass.
A literal that only looks like a term (the lab model's `"error"` verdict) is listed in
`ALLOWED`, with the reason.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Final, NamedTuple

import pytest
from mcp_layers_core.record import (
    STAND_IN_PREFIX,
    EndReason,
    Kind,
    Layer,
    NoteCode,
    Outcome,
    RetryOrigin,
    StreamEnd,
)

REPO = Path(__file__).resolve().parents[2]

#: What the scan reads (folders or files, relative to the repository).
ROOTS: Final = ("addon", "analysis", "lab")

#: The modules that define the vocabulary, and the one that spells it in SQL.
VOCABULARY_MODULES: Final = frozenset({"addon/mcp_layers_core/record.py", "analysis/terms.py"})

#: (file, the comparison as `ast.unparse` writes it) -> why its literal is no record term.
ALLOWED: Final[dict[tuple[str, str], str]] = {
    ("lab/fake_model.py", "last.verdict == 'error'"): (
        "the fake model's verdict on a tool result (`ok`/`error`), not `sse.end`"
    ),
    ("lab/matrix.py", "last == 'none'"): (
        "what a client printed when it had no tool result, not a retry origin"
    ),
    ("lab/run.py", "isolation != 'none'"): "the `--isolation none` choice, not a retry origin",
    ("addon/mcp_layers_core/faults/plan.py", "kind == 'result_and_error'"): (
        "the malformed-answer fault a rule injects, not the note code of the same name"
    ),
}

SKIP_DIRS: Final = frozenset({"__pycache__", "node_modules", ".venv", "build"})

#: Note codes that are plain words code uses for other things too (a JSON-RPC batch, the
#: addon's `batch` error report): not scanned.
_AMBIGUOUS_NOTES: Final = frozenset({NoteCode.BATCH, NoteCode.SUBSCRIPTION})

VOCABULARIES: Final[tuple[type[StrEnum], ...]] = (
    Kind,
    Layer,
    Outcome,
    RetryOrigin,
    EndReason,
    StreamEnd,
    NoteCode,
)


def _terms() -> dict[str, str]:
    terms: dict[str, str] = {}
    for vocabulary in VOCABULARIES:
        for member in vocabulary:
            if member in _AMBIGUOUS_NOTES:
                continue
            terms.setdefault(member.value, f"{vocabulary.__name__}.{member.name}")
    return terms


#: Every term, by value: what it is (`Kind.REQUEST`).
TERMS: Final = _terms()

#: The prefixes a record's `session` begins with: the stand-in's, and the hash's.
SESSION_PREFIXES: Final = {STAND_IN_PREFIX: "STAND_IN_PREFIX", "s-": "the hashed session prefix"}

#: What a test of a session against the stand-in's prefix is to be: the one decision.
ISSUED: Final = "record.is_issued_session (terms.issued_session in SQL)"


def _names_stand_in(node: ast.expr) -> bool:
    """Is `node` the name `STAND_IN_PREFIX` (bare or as an attribute)?"""
    return (isinstance(node, ast.Name) and node.id == "STAND_IN_PREFIX") or (
        isinstance(node, ast.Attribute) and node.attr == "STAND_IN_PREFIX"
    )


#: A term that is a plain lower-case word (`request`, `error`, `none`) may be a member
#: name too: on the left of `in` it is taken for one.
_WORD = re.compile(r"^[a-z]+$")

#: A string that holds SQL (keywords as the queries write them, upper case).
_SQL = re.compile(r"\b(?:SELECT|WHERE|WHEN|THEN|FILTER|AND|OR|IN|LIKE|CASE)\b")
#: A quoted SQL string: a term, maybe as a LIKE pattern, maybe with a note's detail.
_SQL_STRING = re.compile(r"'%?([A-Za-z0-9_-]+)(?::[^']*)?%?'")

_PREFIX_CALLS: Final = frozenset({"startswith", "endswith", "removeprefix", "removesuffix"})


class Finding(NamedTuple):
    path: str
    line: int
    term: str  # what the literal is (`Kind.REQUEST`)
    code: str  # the comparison, or the SQL around the literal

    def __str__(self) -> str:
        if self.term == ISSUED:
            return f"{self.path}:{self.line}: decide it with {ISSUED}: {self.code}"
        return f"{self.path}:{self.line}: {self.term} spelt as a literal in: {self.code}"


def _term_of(value: object, *, prefixes: bool = False) -> str | None:
    if not isinstance(value, str):
        return None
    if prefixes and value in SESSION_PREFIXES:
        return SESSION_PREFIXES[value]
    return TERMS.get(value)


def _literals(node: ast.expr) -> Iterator[ast.Constant]:
    """String literals a comparison operand is, or holds as a container literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        for element in node.elts:
            yield from _literals(element)
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"frozenset", "set", "tuple"}
        and len(node.args) == 1
    ):
        yield from _literals(node.args[0])


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants of a module, its classes and functions."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
        ):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _sql_text(node: ast.Constant | ast.JoinedStr) -> str:
    """The text of a string literal; an f-string's placeholders as `{}`."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    return "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)


def scan_source(source: str, path: str = "<snippet>") -> list[Finding]:
    """Every place `source` spells a record term as a literal where it compares or
    queries it (see the module's docstring)."""
    tree = ast.parse(source, filename=path)
    docstrings = _docstrings(tree)
    found: list[Finding] = []

    def add(node: ast.AST, term: str, code: str) -> None:
        found.append(Finding(path, getattr(node, "lineno", 0), term, code))

    inside_fstring: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            inside_fstring.update(id(v) for v in node.values)

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            left = node.left
            for op, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, ast.In | ast.NotIn):
                    # The container's terms; the left's only if it cannot be a member name.
                    held = [] if isinstance(right, ast.Constant) else list(_literals(right))
                    if isinstance(left, ast.Constant) and not _WORD.match(str(left.value)):
                        held.append(left)
                    for literal in held:
                        if (term := _term_of(literal.value, prefixes=True)) is not None:
                            add(node, term, ast.unparse(node))
                elif isinstance(op, ast.Eq | ast.NotEq | ast.Is | ast.IsNot):
                    for side in (left, right):
                        for literal in _literals(side):
                            if (term := _term_of(literal.value, prefixes=True)) is not None:
                                add(node, term, ast.unparse(node))
                left = right
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _PREFIX_CALLS
        ):
            for arg in node.args:
                for literal in _literals(arg):
                    if (term := _term_of(literal.value, prefixes=True)) is not None:
                        add(node, term, ast.unparse(node))
                if _names_stand_in(arg):
                    add(node, ISSUED, ast.unparse(node))
        elif isinstance(node, ast.MatchValue):
            for literal in _literals(node.value):
                if (term := _term_of(literal.value, prefixes=True)) is not None:
                    add(node, term, f"case {ast.unparse(node.value)}")
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            by_vocabulary: dict[str, int] = {}
            for element in node.elts:
                if isinstance(element, ast.Constant):
                    term = _term_of(element.value)
                    if term is not None:
                        vocabulary = term.split(".")[0]
                        by_vocabulary[vocabulary] = by_vocabulary.get(vocabulary, 0) + 1
            for vocabulary, n in by_vocabulary.items():
                if n >= 2:
                    add(node, f"{n} {vocabulary} terms", ast.unparse(node)[:120])

        if (
            isinstance(node, ast.Constant | ast.JoinedStr)
            and id(node) not in docstrings
            and id(node) not in inside_fstring
            and (isinstance(node, ast.JoinedStr) or isinstance(node.value, str))
        ):
            text = _sql_text(node)
            if not _SQL.search(text):
                continue
            if isinstance(node, ast.JoinedStr) and any(
                isinstance(v, ast.FormattedValue) and _names_stand_in(v.value) for v in node.values
            ):
                add(node, ISSUED, " ".join(text.split())[:120])
            for m in _SQL_STRING.finditer(text):
                value = m.group(1)
                term = _term_of(value, prefixes=True)
                if term is None:
                    continue
                around = text[max(0, m.start() - 40) : m.end() + 20]
                add(node, term, " ".join(around.split()))
    return found


def python_files(root: Path) -> Iterator[Path]:
    if root.is_file():
        yield root
        return
    for path in sorted(root.rglob("*.py")):
        if not SKIP_DIRS & set(path.relative_to(root).parts[:-1]):
            yield path


def scan_root(root: str) -> list[Finding]:
    found: list[Finding] = []
    for path in python_files(REPO / root):
        rel = path.relative_to(REPO).as_posix()
        if rel in VOCABULARY_MODULES:
            continue
        found += scan_source(path.read_text(encoding="utf-8"), rel)
    return found


@pytest.mark.parametrize("root", ROOTS)
def test_no_record_term_is_compared_as_a_literal(root: str) -> None:
    found = [f for f in scan_root(root) if (f.path, f.code) not in ALLOWED]
    assert not found, "use the record's enums (SQL: `terms`):\n" + "\n".join(map(str, found))


def test_every_allowance_is_still_needed() -> None:
    """An allowance whose comparison is gone (or has changed) goes too."""
    seen = {(f.path, f.code) for root in ROOTS for f in scan_root(root)}
    stale = [key for key in ALLOWED if key not in seen]
    assert not stale, f"no longer found, remove from ALLOWED: {stale}"


def test_every_root_exists() -> None:
    missing = [root for root in ROOTS if not (REPO / root).exists()]
    assert not missing


# -- the scanner itself ---------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        'if record["kind"] == "request": pass',
        'ok = "SUCCESS" != outcome',
        'if kind in ("request", "stream"): pass',
        'if sse_end not in {None, "complete"}: pass',
        'if x in frozenset({"eof"}): pass',
        'if "proxy_shutdown" not in notes: pass',
        'if "TOOL_ERROR" in outcomes: pass',
        'issued = not session.startswith("c-")',
        'issued = session.startswith("s-")',
        'if note.startswith(("body_over_cap", "other")): pass',
        'match kind:\n    case "session_end": pass',
        'KINDS = ("request", "notification")',
        "Q = \"SELECT * FROM r WHERE kind = 'request'\"",
        "Q = f\"SELECT * FROM {t} WHERE sse.end IN ('eof', 'error')\"",
        "Q = \"SELECT count(*) FILTER (WHERE notes LIKE 'not_ended%') FROM r\"",
        "Q = \"SELECT * FROM r WHERE session LIKE 's-%'\"",
        "Q = \"SELECT * FROM r WHERE NOT starts_with(session, 'c-')\"",
        "Q = \"SELECT * FROM r WHERE list_contains(notes, 'body_over_cap:12')\"",
        "Q = \"SELECT CASE WHEN outcome = 'SUCCESS' THEN 1 END FROM r\"",
        # whether a session is issued is decided once
        "issued = not session.startswith(STAND_IN_PREFIX)",
        "issued = not s.startswith(record.STAND_IN_PREFIX)",
        "Q = f\"SELECT * FROM r WHERE NOT starts_with(session, '{STAND_IN_PREFIX}')\"",
    ],
)
def test_the_scan_finds_a_term_spelt_as_a_literal(source: str) -> None:
    assert scan_source(source), source


@pytest.mark.parametrize(
    "source",
    [
        'kind = record["kind"]',
        'value = record.get("outcome")',
        'if "error" in message: pass',  # a member name
        'if "request" in bodies: pass',
        'if method == "DELETE": pass',  # an HTTP method, not `EndReason.DELETE`
        "if kind == Kind.REQUEST: pass",
        'label = "request" if many else "requests"',
        'text = f"no {what} matched"',
        'KINDS = ("request",)',
        'Q = "SELECT * FROM r WHERE kind = {sql(Kind.REQUEST)}"',
        "Q = \"SELECT 'GET stream ' || id FROM r WHERE method = 'initialize'\"",
        "JS = \"window.addEventListener('error', f)\"",  # no SQL
        'def f():\n    """SQL: `WHERE kind = \'request\'`."""',  # a docstring
        'message = "the stream was cut"',
    ],
)
def test_the_scan_passes_what_is_no_comparison_of_a_term(source: str) -> None:
    assert not scan_source(source), scan_source(source)


def test_the_scan_names_the_term_and_line() -> None:
    (found,) = scan_source('x = 1\nif r.get("endReason") == "not_found": pass', "m.py")
    assert (found.path, found.line, found.term) == ("m.py", 2, "EndReason.NOT_FOUND")
    assert found.code == "r.get('endReason') == 'not_found'"
