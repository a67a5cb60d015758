"""Who may import what: the product imports nothing from the tests, and nothing edits
`sys.path` (everything shared is an installed package, `mcp_layers_support` for test
support).

The scan reads the source (AST), so a lazy import inside a function counts as much as one
at the top.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"

#: The product packages, by their folder.
PRODUCT = {
    "mcp_layers_core": REPO / "addon" / "mcp_layers_core",
    "mcp_layers_analysis": REPO / "analysis",
    "mcp_layers_demo": REPO / "demo",
    "mcp_layers_lab": REPO / "lab",
}
#: Packages that ship without the test support: all of them (the wheel does not carry it;
#: tests/unit/test_wheel_contents.py checks the built wheel itself).
NO_SUPPORT = tuple(sorted(PRODUCT))
#: Files that may still edit `sys.path` (relative to the repo); none needs to.
SYS_PATH_ALLOWED: frozenset[str] = frozenset()
#: Folders the scan never enters (installed or generated code).
SKIP_DIRS = {".venv", "node_modules", "build", ".git", "__pycache__", ".cache", "out"}


def python_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*.py")):
        if not SKIP_DIRS & set(path.relative_to(root).parts[:-1]):
            yield path


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """(line, dotted module) of every absolute import in a file."""
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def names_in_tests() -> set[str]:
    """Every top-level name a module under tests/ can be imported by (pytest puts each
    test folder on the path, so `hardening_kit` or `wire` would resolve there)."""
    names = {"tests"}
    for path in python_files(TESTS):
        names.add(path.stem)
    for folder in TESTS.rglob("*"):
        if folder.is_dir() and not SKIP_DIRS & set(folder.relative_to(TESTS).parts):
            names.add(folder.name)
    return names


def sys_path_edits(path: Path) -> Iterator[int]:
    """Lines where a file changes `sys.path`: assigns to it (or to a slice of it), or calls
    one of its mutating methods, or `site.addsitedir`."""

    def is_sys_path(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "path"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        )

    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                base = target.value if isinstance(target, ast.Subscript) else target
                if is_sys_path(base):
                    yield node.lineno
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner, method = node.func.value, node.func.attr
            mutates = is_sys_path(owner) and method not in ("index", "count", "copy")
            adds_site = (
                isinstance(owner, ast.Name) and owner.id == "site" and method == "addsitedir"
            )
            if mutates or adds_site:
                yield node.lineno


@pytest.mark.parametrize("package", sorted(PRODUCT))
def test_product_imports_nothing_from_tests(package: str) -> None:
    forbidden = names_in_tests()
    found = [
        f"{path.relative_to(REPO)}:{line} imports {module}"
        for path in python_files(PRODUCT[package])
        for line, module in imported_modules(path)
        if module.split(".")[0] in forbidden
    ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("package", NO_SUPPORT)
def test_product_does_not_need_the_test_support(package: str) -> None:
    found = [
        f"{path.relative_to(REPO)}:{line} imports {module}"
        for path in python_files(PRODUCT[package])
        for line, module in imported_modules(path)
        if module.split(".")[0] == "mcp_layers_support"
    ]
    assert not found, "\n".join(found)


def test_support_imports_nothing_from_tests() -> None:
    forbidden = names_in_tests()
    found = [
        f"{path.relative_to(REPO)}:{line} imports {module}"
        for path in python_files(REPO / "support")
        for line, module in imported_modules(path)
        if module.split(".")[0] in forbidden
    ]
    assert not found, "\n".join(found)


def test_nothing_edits_sys_path() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line}"
        for path in python_files(REPO)
        if str(path.relative_to(REPO)) not in SYS_PATH_ALLOWED
        for line in sys_path_edits(path)
    ]
    assert not found, "sys.path edited at:\n" + "\n".join(found)


def test_the_scans_see_what_they_look_for(tmp_path: Path) -> None:
    """The detectors are not vacuous: each catches the forms it exists for."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import sys, site\n"
        "sys.path.insert(0, 'x')\n"
        "sys.path[:0] = ['y']\n"
        "sys.path = ['z']\n"
        "sys.path += ['w']\n"
        "site.addsitedir('v')\n"
        "sys.path.index('u')\n"
        "def f():\n"
        "    from hardening_kit import figures\n"
        "    import tests.e2e.conftest\n"
    )
    assert sorted(sys_path_edits(sample)) == [2, 3, 4, 5, 6]
    modules = [m for _, m in imported_modules(sample)]
    assert {"hardening_kit", "tests.e2e.conftest"} <= set(modules)
    assert {"hardening_kit", "tests", "client_run", "wire"} <= names_in_tests()
