"""What `pip install mcp-layers` gets: the wheel built from this checkout.

It carries the product (the addon, the offline command, the demo and the lab: commands
users run) and no test support (`mcp_layers_support` is a distribution of its own,
support/pyproject.toml, installed beside the project for development only). Every module
in it imports only the standard library, other modules of the wheel and what the wheel
declares (its dependencies and its extras, but not the `test` extra). And on a Python
older than 3.12 pip refuses it with a last line that names 3.12.

The wheel is built once for the module (a few seconds: pip builds it from a copy of the
checkout's files, so nothing is written into the work tree, without build isolation when
setuptools is installed, as the `test` extra does).
"""

from __future__ import annotations

import ast
import email.parser
import importlib.metadata
import importlib.util
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
#: Import names of the test support; none may be in the wheel.
TEST_SUPPORT = ("mcp_layers_support",)
#: Extras whose requirements a shipped module may not need.
DEV_EXTRAS = frozenset({"test"})
BUILD_TIMEOUT_S = 300.0
#: Imports the product makes only when the module is there, declared nowhere on purpose.
OPTIONAL = {
    # The lab's fake model decodes a zstd body (Codex may compress) only if it can
    # (pyproject's [tool.mypy] override says the same).
    "zstandard",
}
#: Shipped scripts that run in another interpreter: the lab's framework drivers, each run
#: by the virtualenv the lab installs for its client (lab/clients.py pins what they
#: import), never imported by the product.
ELSEWHERE = frozenset(f"mcp_layers_lab/{name}_agent.py" for name in ("ax", "langgraph", "mcp_use"))


def _source_files() -> list[str]:
    """The checkout's files as git sees them (tracked, and new ones not ignored)."""
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout: the wheel is built from the checkout's files")
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    return [name for name in out.decode().split("\0") if name]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in _source_files():
        path = REPO / name
        if path.is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, src / name)
    dist = tmp_path_factory.mktemp("dist")
    # The test extra brings setuptools: no isolated build environment to install first.
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", *isolation]
    built = subprocess.run(
        [*pip, "-w", str(dist), str(src)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = dist.glob("mcp_layers-*.whl")
    return found


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def _top_level(name: str) -> str | None:
    """The import name a file of the wheel belongs to (None for its .dist-info)."""
    first = name.split("/", 1)[0]
    if first.endswith(".dist-info") or first.endswith(".data"):
        return None
    return first.removesuffix(".py")


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        (meta,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(z.read(meta).decode())


def _declared(wheel: Path) -> set[str]:
    """Import names the wheel may use: its requirements (every extra but the
    development ones) and, through the installed distributions, theirs."""
    by_dist: dict[str, set[str]] = {}
    for module, dists in importlib.metadata.packages_distributions().items():
        for d in dists:
            by_dist.setdefault(_norm(d), set()).add(module)
    todo: list[str] = []
    for line in _metadata(wheel).get_all("Requires-Dist") or []:
        req = Requirement(line)
        extra = re.search(r'extra\s*==\s*"([^"]+)"', str(req.marker or ""))
        if extra is None or extra.group(1) not in DEV_EXTRAS:
            todo.append(_norm(req.name))
    seen: set[str] = set()
    while todo:
        dist = todo.pop()
        if dist in seen or dist == "mcp-layers":
            continue
        seen.add(dist)
        try:
            requires = importlib.metadata.requires(dist) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for line in requires:
            req = Requirement(line)
            if "extra" not in str(req.marker or ""):
                todo.append(_norm(req.name))
    return {module for dist in seen for module in by_dist.get(dist, ())}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _guarded(tree: ast.AST) -> set[int]:
    """Lines of imports inside `try: … except ImportError` (optional at run time)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
            for h in node.handlers
        ):
            for inner in node.body:
                for sub in ast.walk(inner):
                    if isinstance(sub, ast.Import | ast.ImportFrom):
                        lines.add(sub.lineno)
    return lines


def _imports(source: bytes, filename: str) -> Iterator[tuple[int, str]]:
    tree = ast.parse(source, filename=filename)
    optional = _guarded(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and node.lineno in optional:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def test_the_wheel_carries_the_product_and_no_test_support(wheel: Path) -> None:
    names = _names(wheel)
    tops = {t for n in names if (t := _top_level(n))}
    assert {"mcp_layers", "mcp_layers_core", "mcp_layers_analysis"} <= tops
    # The demo and the lab are commands users run: they ship, with their Node client.
    assert {"mcp_layers_demo", "mcp_layers_lab"} <= tops
    assert "mcp_layers_demo/node/client.mjs" in names
    assert "mcp_layers_demo/procs.py" in names
    # The grouped matrix page's assets (lab/MATRIX.html), read at run time.
    assert {"mcp_layers_lab/matrix_page.css", "mcp_layers_lab/matrix_page.js"} <= set(names)
    # The lab's agent drivers, run from the package (Node ones are data, not modules).
    drivers = ("ts_agent.mjs", "vercel_agent.mjs", "ax_agent.mjs", "openai_agents_agent.mjs")
    assert {f"mcp_layers_lab/{d}" for d in drivers} <= set(names)
    assert set(names) >= ELSEWHERE
    assert not tops & set(TEST_SUPPORT), sorted(n for n in names if _top_level(n) in TEST_SUPPORT)
    for name in names:
        parts = name.split("/")
        assert "node_modules" not in parts, name
        assert parts[0] not in ("tests", "support", "benchmarks", "recordings"), name


def test_every_shipped_module_imports_only_the_product_and_what_it_declares(
    wheel: Path,
) -> None:
    names = _names(wheel)
    allowed = (
        set(sys.stdlib_module_names)
        | {t for n in names if (t := _top_level(n))}
        | _declared(wheel)
        | OPTIONAL
    )
    # The test support is installed here, but no requirement of the wheel brings it.
    assert not allowed & set(TEST_SUPPORT)
    bad: list[str] = []
    with zipfile.ZipFile(wheel) as z:
        for name in names:
            if not name.endswith(".py") or name in ELSEWHERE:
                continue
            for line, module in _imports(z.read(name), name):
                if module.split(".")[0] not in allowed:
                    bad.append(f"{name}:{line} imports {module}")
    assert not bad, "imports of what the wheel neither carries nor declares:\n" + "\n".join(bad)


def test_the_import_scan_sees_what_it_looks_for() -> None:
    source = (
        b"import os\n"
        b"from mcp_layers_support import procs\n"
        b"def f():\n"
        b"    import hypothesis.strategies\n"
        b"try:\n"
        b"    import zstandard\n"
        b"except ImportError:\n"
        b"    zstandard = None\n"
        b"from . import sibling\n"
    )
    found = [m for _, m in _imports(source, "x.py")]
    assert found == ["os", "mcp_layers_support", "hypothesis.strategies"]


def _python311() -> str | None:
    for candidate in ("python3.11", "/usr/bin/python3.11", "/usr/bin/python3"):
        path = shutil.which(candidate)
        if path is None:
            continue
        probe = subprocess.run(
            [path, "-c", "import sys, pip; print(sys.version_info[:2] == (3, 11))"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if probe.returncode == 0 and probe.stdout.strip() == "True":
            return path
    return None


def test_pip_on_python_311_refuses_it_naming_312(wheel: Path, tmp_path: Path) -> None:
    python = _python311()
    if python is None:
        pytest.skip("no Python 3.11 with pip on this machine")
    done = subprocess.run(
        [python, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PIP_NO_CACHE_DIR": "1"},
    )
    assert done.returncode != 0, done.stdout + done.stderr
    last = (done.stdout + done.stderr).strip().splitlines()[-1]
    assert "3.12" in last, last
    assert "mcp-layers" in last, last


def test_the_readme_install_line_says_it_needs_312() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "needs Python ≥ 3.12" in readme
