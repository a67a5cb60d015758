"""``python -m mcp_layers_lab``: run the client lab and write the retry matrix.

    python -m mcp_layers_lab --all                       # every client, fault and script
    python -m mcp_layers_lab --clients py-sdk,ts-sdk --faults none,session_404
    python -m mcp_layers_lab --rebuild lab/out/<stamp>   # the matrix again, from the runs
    python -m mcp_layers_lab --list

Writes ``lab/out/<UTC stamp>/`` (runs, MATRIX.md, runs.md, compare.md) and, with --all
(or --publish FILE), the matrix to lab/MATRIX.md. Exit status: 0; 1 when a run broke a
rule (an outbound connect, a harness error, a client that printed other results than the
model received); 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

from mcp_layers_analysis.errors import AnalysisError, InputError

from . import clients as clients_mod
from . import matrix, presets
from .run import CLIENT_TIMEOUT_S, SCRIPTS, LabError, Plan, load_results, run_lab

LAB = Path(__file__).resolve().parent
#: In a checkout the lab writes beside itself (lab/out, lab/MATRIX.md); installed with
#: pip, under the current directory instead of inside site-packages.
IN_CHECKOUT = (LAB.parent / "pyproject.toml").is_file()


def _home() -> Path:
    return LAB if IN_CHECKOUT else Path.cwd() / "mcp-layers-lab"


ENVIRONMENT = "environment.json"


def _names(text: str | None, known: list[str], what: str) -> tuple[str, ...]:
    if text is None:
        return tuple(known)
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)}; {what}s are {', '.join(known)}")
    return names


def environment(isolation: str) -> dict[str, str]:
    from mcp_layers_demo.server import RETRY_INTERVAL_MS

    node = shutil.which("node")
    node_version = "absent"
    if node:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
        node_version = done.stdout.strip()
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "mitmproxy": version("mitmproxy"),
        "MCP server": (
            f"bundled demo server on mcp {version('mcp')}, resumable (event ids, "
            f"retry: {RETRY_INTERVAL_MS} ms)"
        ),
        "Node": node_version,
        "Python": platform.python_version(),
        "isolation": isolation,
    }


def write_outputs(out_dir: Path, publish: Path | None) -> int:
    """MATRIX.md, runs.md and compare.md from the runs under ``out_dir``; the exit status."""
    results = load_results(out_dir)
    if not results:
        print(f"no runs under {out_dir}", file=sys.stderr)
        return 2
    env = json.loads((out_dir / ENVIRONMENT).read_text(encoding="utf-8"))
    date = env.pop("date", None)
    cells = matrix.build_cells(results)
    text = matrix.render(cells, env, date)
    (out_dir / "MATRIX.md").write_text(text, encoding="utf-8")
    (out_dir / "runs.md").write_text(matrix.runs_table(cells), encoding="utf-8")
    _compare(out_dir)
    html = out_dir / "MATRIX.html"
    try:
        matrix.write_html(out_dir / "runs", html)
    except (AnalysisError, InputError) as exc:
        print(f"MATRIX.html not written: {exc}", file=sys.stderr)
    print(f"matrix: {out_dir / 'MATRIX.md'}")
    verdicts = _verdicts(out_dir, env, date)
    if publish is not None:
        publish.write_text(text, encoding="utf-8")
        print(f"published: {publish}")
        if verdicts is not None:
            beside = publish.with_name(VERDICTS)
            beside.write_text(verdicts, encoding="utf-8")
            print(f"published: {beside}")
        if html.exists():
            shutil.copyfile(html, publish.with_suffix(".html"))
            print(f"published: {publish.with_suffix('.html')}")
    broken = [c for c in cells if c.broken]
    for c in broken:
        print(f"FAILED {c.run.client} {c.run.scenario}: {'; '.join(c.notes)}", file=sys.stderr)
    return 1 if broken else 0


VERDICTS = "VERDICTS.md"


def _verdicts(out_dir: Path, env: dict[str, str], date: str | None) -> str | None:
    """`mcp-layers verdicts` over the runs, as VERDICTS.md beside the matrix (None when
    the command is not installed or failed)."""
    exe = Path(sys.executable).with_name("mcp-layers")
    if not exe.exists():
        return None
    cmd = [str(exe), "verdicts", str(out_dir / "runs"), "--format", "markdown", "--no-progress"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"mcp-layers verdicts failed: {exc}", file=sys.stderr)
        return None
    # 0: no client FAILed; 3 (VERDICT_FAILED): one did, the table is written either way.
    if done.returncode not in (0, 3) or not done.stdout.strip():
        print(f"mcp-layers verdicts: exit {done.returncode}\n{done.stderr}", file=sys.stderr)
        return None
    as_json = subprocess.run(
        [*cmd[:-2], "json", "--no-progress"], capture_output=True, text=True, timeout=300
    )
    rows = json.loads(as_json.stdout) if as_json.stdout.strip() else []
    setup = ", ".join(f"{k} {v}" for k, v in env.items())
    text = (
        "# Spec verdicts per client\n\n"
        f"Run {date or '(undated)'}; {setup}.\n\n"
        "Each client of the lab against every fault of the matrix (lab/MATRIX.md), judged by "
        "`mcp-layers verdicts` from the traffic it actually sent: `PASS`, `FAIL` (a MUST "
        "broken), `WARNING` (a SHOULD missed), `UNDECIDABLE` or `NOT_EXERCISED` per "
        "requirement, with the rule (spec version, section, MUST/SHOULD) "
        "and the evidence (record ids and times in that run's recording). The rules are in "
        "docs/cli.md (`verdicts`); what each middlebox fault expects is in docs/faults.md.\n\n"
        + verdict_pivot(rows)
        + "\n## Evidence\n\n"
        + done.stdout
    )
    (out_dir / VERDICTS).write_text(text, encoding="utf-8")
    print(f"verdicts: {out_dir / VERDICTS}")
    return text


def verdict_pivot(rows: list[dict[str, str]]) -> str:
    """A check per row, a client per column: the verdicts at a glance (checks no client
    met are left out)."""
    clients = list(dict.fromkeys(r["client"] for r in rows))
    checks = list(dict.fromkeys(r["check"] for r in rows))
    got = {(r["client"], r["check"]): r["verdict"] for r in rows}
    level = {r["check"]: r["level"] for r in rows}
    met = [c for c in checks if any(got.get((x, c)) != "NOT_EXERCISED" for x in clients)]
    lines = [
        "| check | level | " + " | ".join(clients) + " |",
        "|---|---|" + "---|" * len(clients),
    ]
    for check in met:
        cells = [got.get((x, check), "").replace("NOT_EXERCISED", "—") for x in clients]
        lines.append(f"| `{check}` | {level[check]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n— : not exercised in these runs.\n"


def _compare(out_dir: Path) -> None:
    """`mcp-layers compare --by client --by scenario` over the runs, kept beside the matrix."""
    exe = Path(sys.executable).with_name("mcp-layers")
    if not exe.exists():
        return
    cmd = [
        str(exe),
        "compare",
        str(out_dir / "runs"),
        "--by",
        "client",
        "--by",
        "scenario",
        "--format",
        "markdown",
        "--no-progress",
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        (out_dir / "compare.md").write_text(f"mcp-layers compare failed: {exc}\n")
        return
    text = done.stdout if done.returncode == 0 else f"exit {done.returncode}\n{done.stderr}"
    (out_dir / "compare.md").write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcp_layers_lab",
        description="Run MCP clients against injected faults and write the retry matrix.",
    )
    parser.add_argument(
        "--all", action="store_true", help="every client, fault and script; publishes lab/MATRIX.md"
    )
    parser.add_argument("--clients", help="comma-separated (default: py-sdk,ts-sdk)")
    parser.add_argument("--faults", help="comma-separated (default: all)")
    parser.add_argument(
        "--scripts", help=f"comma-separated of {', '.join(SCRIPTS)} (default: both)"
    )
    parser.add_argument("--out", type=Path, help="output folder (default: lab/out/<UTC stamp>)")
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="where npm clients are installed (default: ~/.cache/mcp-layers/lab)",
    )
    parser.add_argument(
        "--isolation",
        choices=["auto", "netns", "none"],
        default="auto",
        help="network namespace per run (auto: when the kernel allows it)",
    )
    parser.add_argument(
        "--timeout", type=float, default=CLIENT_TIMEOUT_S, help="seconds a client may run"
    )
    parser.add_argument(
        "--publish",
        type=Path,
        default=None,
        help="also write the matrix here (default with --all: lab/MATRIX.md)",
    )
    parser.add_argument(
        "--rebuild",
        type=Path,
        metavar="OUT",
        help="only write the matrix again from the runs in OUT",
    )
    parser.add_argument(
        "--addon",
        type=Path,
        default=None,
        help="another build of the addon script (default: addon/mcp_layers.py)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs at a time, each in its own namespace (default 1: timings stay quiet)",
    )
    parser.add_argument(
        "--replay",
        type=Path,
        metavar="OUT",
        help="run each client against `mcp-layers replay` of its recording in the earlier "
        "lab output OUT instead of the live server and fault (docs/replay.md)",
    )
    parser.add_argument(
        "--transport",
        choices=["http", "stdio"],
        default="http",
        help="stdio: each client starts the bundled server as a command behind `mcp-layers "
        "wrap` (clients and faults that support it; docs/stdio.md)",
    )
    parser.add_argument("--list", action="store_true", help="list clients and faults")
    args = parser.parse_args(argv)

    if args.list:
        for c in clients_mod.CLIENTS:
            where = f"{c.package.replace('`', '')} {c.version}"
            print(f"client {c.name:20} {where}{'' if c.agent else '  (SDK reference)'}")
        for f in presets.FAULTS:
            print(f"fault  {f.name:20} {f.describe()}")
        return 0
    if args.rebuild is not None:
        return write_outputs(args.rebuild, args.publish)

    all_clients = [c.name for c in clients_mod.CLIENTS]
    all_faults = [f.name for f in presets.FAULTS]
    if args.all:
        plan = Plan(tuple(all_clients), tuple(all_faults), SCRIPTS)
    else:
        plan = Plan(
            _names(args.clients or "py-sdk,ts-sdk", all_clients, "client"),
            _names(args.faults, all_faults, "fault"),
            _names(args.scripts, list(SCRIPTS), "script"),
        )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out_dir = args.out or _home() / "out" / stamp
    out_dir.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    try:
        results = run_lab(
            plan,
            out_dir,
            args.cache or clients_mod.default_cache(),
            args.isolation,
            args.timeout,
            addon=args.addon,
            jobs=max(1, args.jobs),
            replay=args.replay,
            stdio=args.transport == "stdio",
        )
    except (LabError, clients_mod.InstallError) as exc:
        print(f"lab: {exc}", file=sys.stderr)
        return 2
    isolation = "network namespace" if results and results[0].netns else "none"
    if results and results[0].strace:
        isolation += " + strace connect check"
    env = environment(isolation)
    if args.addon is not None:
        env["addon"] = f"{args.addon} (not the repository's)"
    if args.transport == "stdio":
        env["MCP server"] = "bundled demo server over stdio, behind mcp-layers wrap"
    if args.replay is not None:
        env["MCP server"] = f"mcp-layers replay of the recordings in {args.replay}"
    (out_dir / ENVIRONMENT).write_text(json.dumps(env, indent=2) + "\n")
    print(f"{len(results)} runs in {time.monotonic() - began:.0f} s")
    publish = args.publish or ((_home() / "MATRIX.md") if args.all else None)
    return write_outputs(out_dir, publish)


if __name__ == "__main__":
    sys.exit(main())
