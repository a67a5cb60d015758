"""`make bench`: every benchmark, each as ratios against a baseline measured in the same run.

    .venv/bin/python benchmarks/run.py            # the default sizes (~15 minutes)
    .venv/bin/python benchmarks/run.py --quick    # small sizes, for a look (~3 minutes)

Each benchmark is its own script (see benchmarks/README.md); this runs them one after
the other so they do not compete for the two cores.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: (script, arguments at default size, arguments with --quick)
BENCHMARKS: list[tuple[str, list[str], list[str]]] = [
    ("addon_bench.py", [], ["--requests", "300", "--reps", "1"]),
    (
        "analysis_bench.py",
        ["--records", "1000000", "4000000"],
        ["--records", "200000", "--skip-jq"],
    ),
    ("load.py", [], ["--quick"]),
    ("long_stream.py", [], ["--quick"]),
    ("stdio_bench.py", [], ["--quick"]),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a look")
    args = parser.parse_args()
    failed = []
    for script, full, quick in BENCHMARKS:
        path = HERE / script
        if not path.exists():
            continue
        command = [sys.executable, str(path), *(quick if args.quick else full)]
        print(f"\n=== {script} {' '.join(command[2:])}", flush=True)
        if subprocess.run(command).returncode != 0:
            failed.append(script)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
