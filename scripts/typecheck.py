"""Run ``mypy`` (configured in pyproject.toml's ``[tool.mypy]``) on the project's packages.

mypy finds a module by the name of its folder, but most packages live in folders named
otherwise (``analysis/`` is ``mcp_layers_analysis``: pyproject's ``package-dir``), and the
editable install maps them with an import hook that mypy does not run. So this builds a
tree of links named as the packages are imported (build/mypy-path, on ``mypy_path``),
runs mypy, and rewrites the paths it prints back to the files in the work tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINKS = ROOT / "build" / "mypy-path"


#: The project and the test support (support/: a distribution of its own, not shipped).
PYPROJECTS = (ROOT / "pyproject.toml", ROOT / "support" / "pyproject.toml")


def package_dirs() -> dict[str, str]:
    """Top-level package name -> its folder, relative to the root, from the pyproject.toml
    files (a folder there is relative to its own pyproject.toml)."""
    out: dict[str, str] = {}
    for pyproject in PYPROJECTS:
        with pyproject.open("rb") as f:
            config = tomllib.load(f)
        mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
        base = pyproject.parent
        # "" is the folder of top-level modules (the addon scripts): already on mypy_path.
        for name, folder in mapping.items():
            if name and "." not in name:
                out[name] = (base / folder).resolve().relative_to(ROOT).as_posix()
    return out


def make_links(packages: dict[str, str]) -> None:
    """One link per package whose folder is not already named for it."""
    LINKS.mkdir(parents=True, exist_ok=True)
    for old in LINKS.iterdir():
        old.unlink()
    for name, folder in packages.items():
        if Path(folder).name != name:
            (LINKS / name).symlink_to(os.path.relpath(ROOT / folder, LINKS))


def main() -> int:
    packages = package_dirs()
    make_links(packages)
    run = subprocess.run(
        [sys.executable, "-m", "mypy", *sys.argv[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    prefix = f"{LINKS.relative_to(ROOT)}/"
    out = run.stdout
    for name, folder in packages.items():
        out = out.replace(f"{prefix}{name}/", f"{Path(folder).as_posix()}/")
    sys.stdout.write(out)
    sys.stderr.write(run.stderr)
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
