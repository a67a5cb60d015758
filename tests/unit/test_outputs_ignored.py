"""Everything the demo, the lab and the benchmarks write into the checkout is git-ignored,
and what is meant to be committed (the lab's published matrix) is tracked and not.

The paths come from the code's own constants (the demo's RECORD_ROOT, the lab's home
folder and published files, the benchmarks' OUT, the npm folders, the addon's default
record folder), plus every `--json FILE` the benchmarks' README tells a reader to type.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from mcp_layers_core.options import SPECS
from mcp_layers_demo import __main__ as demo_main
from mcp_layers_demo import npm
from mcp_layers_lab import __main__ as lab_main
from mcp_layers_lab import run as lab_run
from mcp_layers_support import node_peers

REPO = Path(__file__).resolve().parents[2]
STAMP = "20260101T000000Z"
RECORDING = f"mcp-{STAMP}.jsonl"

pytestmark = pytest.mark.skipif(
    not (REPO / ".git").exists() or shutil.which("git") is None, reason="not a git checkout"
)


def _script(name: str) -> ModuleType:
    """A benchmark script as a module (they are scripts, not a package)."""
    path = REPO / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def _default(option: str) -> str:
    found = SPECS[option].default
    assert isinstance(found, str)
    return found


def outputs() -> list[Path]:
    """Files the demo, the lab and the benchmarks write in the checkout (as `make demo`,
    `make lab` and `make bench` run them: from the repository's root)."""
    demo_dir = REPO / demo_main.RECORD_ROOT / f"demo-{STAMP}"
    lab_out = lab_main._home() / "out" / STAMP
    run_dir = lab_out / "runs" / "py-sdk" / lab_run.scenario_name("none", lab_run.SCRIPTS[0])
    bench_out = Path(_script("analysis_bench").OUT)
    paths = [
        # make demo: the recordings and their report; the TS client's npm install
        demo_dir / RECORDING,
        demo_dir / "report.html",
        npm.TS_CLIENT_DIR / "node_modules" / npm.STAMP_NAME,
        # the tests' Node peers (installed by the tests and the lab's SDK test)
        node_peers.MODULES / npm.STAMP_NAME,
        # make lab: one run's folder and what the lab writes beside the runs
        run_dir / lab_run.RUN_FILE,
        run_dir / lab_run.MODEL_LOG,
        run_dir / RECORDING,
        run_dir / "client.out",
        run_dir / "worker.log",
        lab_out / lab_main.ENVIRONMENT,
        lab_out / "MATRIX.md",
        lab_out / "MATRIX.html",
        lab_out / "runs.md",
        lab_out / "compare.md",
        lab_out / lab_main.VERDICTS,
        # make bench: the synthetic recordings
        bench_out / "bench-1000-seed1-00000000.jsonl",
        # the addon's default record folder (mitmdump started in the checkout)
        REPO / _default("mcp_record_dir") / RECORDING,
    ]
    # What benchmarks/README.md tells a reader to write with --json, from the root.
    readme = (REPO / "benchmarks" / "README.md").read_text(encoding="utf-8")
    paths += [REPO / p for p in re.findall(r"--json\s+(\S+)", readme)]
    return paths


def published() -> list[Path]:
    """What `make lab` (`--all`) writes to be committed."""
    matrix = lab_main._home() / "MATRIX.md"
    return [matrix, matrix.with_suffix(".html"), matrix.with_name(lab_main.VERDICTS)]


def _ignored(path: Path) -> bool:
    """Would git ignore this file (whether or not it exists)?"""
    done = subprocess.run(
        ["git", "check-ignore", "--quiet", "--no-index", str(path.relative_to(REPO))],
        cwd=REPO,
        capture_output=True,
        timeout=30,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0


def test_every_output_is_ignored() -> None:
    paths = outputs()
    assert len(paths) > 15
    for path in paths:
        assert path.resolve().is_relative_to(REPO), path
    not_ignored = [str(p.relative_to(REPO)) for p in paths if not _ignored(p)]
    assert not not_ignored, "written by the demo, the lab or the benchmarks, not git-ignored"


def test_the_published_matrix_stays_tracked() -> None:
    for path in published():
        rel = str(path.relative_to(REPO))
        assert not _ignored(path), rel
        tracked = subprocess.run(
            ["git", "ls-files", "--error-unmatch", rel], cwd=REPO, capture_output=True, timeout=30
        )
        assert tracked.returncode == 0, f"{rel} is not tracked"


def test_the_check_sees_what_it_looks_for() -> None:
    assert not _ignored(REPO / "README.md")
    assert _ignored(REPO / "recordings" / RECORDING)
