"""The agent frameworks in the lab (issue 31): each entry is complete, pinned and offline.

A framework is driven by a script of the lab's (lab/*_agent.*) with the framework's own
MCP client and agent loop, so its entry carries more than a CLI's: extra pinned packages
(providers, peers), a driver file, and a note on its telemetry. These checks need no
download; the end-to-end test at the bottom runs Ax for Python (standard library only,
4 MB) when its virtualenv is already in the lab's cache.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from mcp_layers_lab import clients

#: The frameworks added by issue 31, in the order they were added.
FRAMEWORKS = (
    "vercel-ai",
    "ax-ts",
    "ax-py",
    "ax-ts-modern",
    "ax-py-modern",
    "langchain-mcp",
    "mcp-use",
    "openai-agents-js",
)
EXACT = re.compile(r"\d+\.\d+\.\d+")


def _setup(tmp_path: Path) -> clients.Setup:
    home = tmp_path / "home"
    home.mkdir()
    prefix = tmp_path / "prefix"
    (prefix / "node_modules").mkdir(parents=True)
    return clients.Setup(
        home=home,
        work=tmp_path,
        mcp_url="http://127.0.0.1:1111/mcp",
        model_url="http://127.0.0.1:2222",
        prefix=prefix,
        logs=tmp_path,
    )


def test_the_frameworks_are_in_the_client_list() -> None:
    names = [c.name for c in clients.CLIENTS]
    assert set(FRAMEWORKS) <= set(names)
    # --all runs every entry: all of them are agents (third-party code, isolated).
    assert all(clients.client(n).agent for n in FRAMEWORKS)


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_a_framework_entry_is_pinned_and_says_how_its_telemetry_is_off(name: str) -> None:
    c = clients.client(name)
    assert EXACT.fullmatch(c.version), c.version
    assert (c.npm is None) != (c.pypi is None), "one registry, npm or PyPI"
    sep = "@" if c.npm else "=="
    for pin in c.extra:
        package, version = clients._split_pin(pin, sep)
        assert package and EXACT.fullmatch(version), pin
    if c.shares is not None:
        # Another entry's install, driven another way: the same package and pins.
        base = clients.client(c.shares)
        assert (c.npm, c.pypi, c.version, c.extra) == (
            base.npm,
            base.pypi,
            base.version,
            base.extra,
        )
        assert c.install_label == base.install_label
        assert c.telemetry == f"as {base.name}"
    else:
        assert c.telemetry and len(c.telemetry) > 20


def test_a_pin_without_a_version_is_refused() -> None:
    with pytest.raises(ValueError):
        clients._split_pin("zod", "@")
    assert clients._split_pin("@ai-sdk/mcp@1.0.102", "@") == ("@ai-sdk/mcp", "1.0.102")
    assert clients._split_pin("langgraph==1.2.24", "==") == ("langgraph", "1.2.24")


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_a_framework_launch_runs_its_driver_at_loopback(name: str, tmp_path: Path) -> None:
    c = clients.client(name)
    s = _setup(tmp_path)
    launch = c.launch(s)
    # The driver is the lab's own file, given both URLs and the prompt.
    script = next(Path(a) for a in launch.argv if a.endswith((".mjs", ".py")))
    assert script.is_file() and script.name.endswith("_agent" + script.suffix)
    assert launch.argv[-3:] == [s.mcp_url, s.model_url, s.prompt]
    if c.npm is not None:
        # Copied where its bare imports resolve: beside a link to the pinned install.
        assert script.parent / "node_modules" == s.home / "driver" / "node_modules"
        assert (script.parent / "node_modules").resolve() == s.prefix / "node_modules"  # type: ignore[operator]
    else:
        assert launch.argv[0] == str(s.prefix / "bin" / "python")  # type: ignore[operator]
    if name.startswith("ax-"):
        # Pinned to an era: the session era, so that session faults reach it, or the
        # stateless one (what Ax picks by itself against the lab's server).
        assert launch.env["LAB_AX_ERA"] == ("modern" if name.endswith("-modern") else "legacy")
    telemetry_env = {
        "langchain-mcp": {"LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false"},
        "openai-agents-js": {"OPENAI_AGENTS_DISABLE_TRACING": "1"},
        "mcp-use": {"MCP_USE_ANONYMIZED_TELEMETRY": "false"},
    }
    assert telemetry_env.get(name, {}).items() <= launch.env.items()


def test_an_npm_framework_is_complete_only_with_every_extra(tmp_path: Path) -> None:
    c = clients.client("vercel-ai")
    assert c.npm is not None and c.extra

    def put(package: str, version: str) -> None:
        folder = tmp_path / "node_modules" / package
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "package.json").write_text(json.dumps({"version": version}))

    put(c.npm, c.version)
    assert not clients._npm_complete(c, tmp_path)
    for pin in c.extra:
        put(*clients._split_pin(pin, "@"))
    assert clients._npm_complete(c, tmp_path)
    put(*clients._split_pin(c.extra[0], "@")[:1], "0.0.1")
    assert not clients._npm_complete(c, tmp_path)


# ------------------------------------------------------------------ end to end (Ax Python)

#: Ax for Python is standard library only (4 MB): quick to install, quick to run (~1 s).
E2E_CLIENTS = ("ax-py", "ax-py-modern")
E2E_FAULTS = ("none", "session_404")


@pytest.fixture(scope="module")
def ax_py_lab(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    from mcp_layers_lab import matrix
    from mcp_layers_lab.run import LabError, Plan, run_lab

    try:
        clients.install(clients.client("ax-py"), clients.default_cache(), log=lambda _l: None)
    except clients.InstallError as exc:
        pytest.skip(f"Ax for Python cannot be installed here: {exc}")
    out = tmp_path_factory.mktemp("lab")
    try:
        results = run_lab(
            Plan(E2E_CLIENTS, E2E_FAULTS),
            out,
            clients.default_cache(),
            "auto",
            60.0,
            log=lambda _line: None,
        )
    except LabError as exc:  # no network namespace here: agents are not run without one
        pytest.skip(str(exc))
    return {(r.client, r.scenario): matrix.build_cell(r) for r in results}


def _protocols(cell: Any) -> set[str]:
    from mcp_layers_lab import matrix

    records = matrix.read_records(Path(cell.run.run_dir))
    return {str(r.get("protocolVersion")) for r in records if r.get("kind") == "request"}


@pytest.mark.e2e
def test_ax_python_runs_offline_in_both_eras(ax_py_lab: dict[tuple[str, str], Any]) -> None:
    for cell in ax_py_lab.values():
        assert cell.run.error is None and not cell.run.timed_out, cell.run
        assert cell.run.violations == [] and not cell.broken, (cell.run, cell.notes)
    assert ax_py_lab["ax-py", "none"].model == ["ok"]
    assert ax_py_lab["ax-py-modern", "none"].model == ["ok"]
    # Pinned eras, seen on the wire: a session (2025-11-25), or none (2026-07-28).
    assert _protocols(ax_py_lab["ax-py", "none"]) == {"2025-11-25"}
    assert _protocols(ax_py_lab["ax-py-modern", "none"]) == {"2026-07-28"}


@pytest.mark.e2e
def test_ax_python_hands_a_session_404_to_the_model(
    ax_py_lab: dict[tuple[str, str], Any],
) -> None:
    # It neither re-initialises nor retries: the error is the tool's result.
    cell = ax_py_lab["ax-py", "session_404"]
    assert cell.fired and not cell.reinit and cell.retried == "no"
    assert cell.model == ["error"] and cell.printed == ["error"]


# ------------------------------------------------------------------ the era in the matrix


def _cell(client: str, fault: str, protocols: list[str]) -> Any:
    from mcp_layers_lab import matrix
    from mcp_layers_lab.run import RunResult

    run = RunResult(client, "1.0.0", fault, "once", fault, "/nonexistent")
    return matrix.Cell(run, protocols=protocols)


def test_the_matrix_shows_each_clients_era() -> None:
    from mcp_layers_lab import matrix

    cells = [
        _cell("ax-ts", "none", ["2025-11-25"]),
        _cell("ax-ts-modern", "none", ["2026-07-28"]),
        _cell("ax-py", "none", []),  # nothing reached the server: no era to show
    ]
    text = matrix.render(cells, {}, "2026-12-02")
    assert "| client | version | speaks | MCP protocol (era) |" in text
    assert "| ax-ts | 24.0.21 (npm `@ax-llm/ax`) | chat model API | 2025-11-25 (sessions) |" in text
    assert "| chat model API | 2026-07-28 (stateless) |" in text
    assert "| ax-py | 25.4.6 (PyPI `axllm`) | chat model API | — |" in text
    # One era per client: the cells need not repeat it.
    assert "| `none` | ax-ts | no |" in text


def test_a_client_that_changed_era_between_runs_has_it_in_every_cell() -> None:
    from mcp_layers_lab import matrix

    cells = [_cell("ax-ts", "none", ["2025-11-25"]), _cell("ax-ts", "tool_error", ["2026-07-28"])]
    text = matrix.render(cells, {}, "2026-12-02")
    assert "2025-11-25 (sessions), 2026-07-28 (stateless) |" in text
    assert "| `none` | ax-ts (2025-11-25 (sessions)) |" in text
    assert "| `tool_error` | ax-ts (2026-07-28 (stateless)) |" in text


def test_a_stack_traces_line_number_is_no_status() -> None:
    from mcp_layers_lab import matrix

    # What mcp-use hands the model after a 503 (the Python SDK 1.x saw the stream close).
    text = (
        '{"error": "RuntimeError", "details": "Tool call \'echo\' failed due to connection '
        'loss: Connection closed", "stack": "Traceback (most recent call last):\\n  File '
        '\\"/x/mcp_use/client/connectors/base.py\\", line 469, in call_tool'
    )
    assert matrix.hint(text) == "connection"
    assert matrix.hint("Error POSTing to endpoint (HTTP 503), line 12") == "503"


def test_the_python_sdk_runs_in_both_eras(tmp_path: Path) -> None:
    legacy = clients.client("py-sdk").launch(_setup(tmp_path))
    (tmp_path / "b").mkdir()
    modern = clients.client("py-sdk-modern").launch(_setup(tmp_path / "b"))
    assert "--mode" not in legacy.argv  # the SDK agent's default: legacy, a session
    assert modern.argv[-2:] == ["--mode", "auto"]  # the SDK's choice: 2026-07-28 here
    assert modern.argv[:-2] == [a.replace("/b/", "/") for a in legacy.argv]


def test_fast_agent_runs_in_both_eras(tmp_path: Path) -> None:
    base, legacy = clients.client("fast-agent"), clients.client("fast-agent-legacy")
    assert legacy.shares == "fast-agent" and legacy.install_label == base.install_label
    assert (legacy.pypi, legacy.version) == (base.pypi, base.version)
    launch = legacy.launch(_setup(tmp_path))
    # Left to `auto` it speaks 2026-07-28 against the lab's server; this pins sessions.
    assert launch.argv[-2:] == ["--mcp-protocol", "legacy"]
    (tmp_path / "b").mkdir()
    assert "--mcp-protocol" not in base.launch(_setup(tmp_path / "b")).argv


# ------------------------------------------------------------------ the CLIs in Bun binaries

#: Coding-agent CLIs added by issue 31, each a Bun binary with the TS SDK 1.x inside.
CLIS = {
    # name: (package, version, the files its launch writes under HOME)
    "cline": (
        "cline",
        "3.0.65",
        (
            ".cline/data/settings/providers.json",
            ".cline/data/settings/cline_mcp_settings.json",
            ".cline/data/settings/global-settings.json",
            ".cline/data/cache/feature-flags.json",
        ),
    ),
    "droid": (
        "@factory/cli-linux-x64",
        "0.225.2",
        (".factory/settings.json", ".factory/mcp.json"),
    ),
}


def _written(home: Path) -> dict[str, Any]:
    return {
        str(p.relative_to(home)): json.loads(p.read_text(encoding="utf-8"))
        for p in sorted(home.rglob("*.json"))
    }


@pytest.mark.parametrize("name", sorted(CLIS))
def test_a_cli_entry_is_pinned_and_says_how_its_telemetry_is_off(name: str) -> None:
    c = clients.client(name)
    package, version, _ = CLIS[name]
    assert (c.npm, c.version) == (package, version) and c.pypi is None and not c.extra
    assert c.agent and c.api == "chat" and c.known_lookup is None
    # Droid: the wrapper package `@factory/cli` pins a binary version that was never
    # published; the binary's own package is the pin.
    assert c.npm != "@factory/cli"
    assert c.telemetry and len(c.telemetry) > 40


@pytest.mark.parametrize("name", sorted(CLIS))
def test_a_cli_launch_writes_its_config_under_home_at_loopback(name: str, tmp_path: Path) -> None:
    s = _setup(tmp_path)
    launch = clients.client(name).launch(s)
    written = _written(s.home)
    # Only what the entry says, all of it under the run's HOME (never the user's ~/.cline
    # or ~/.factory); the command reads it from there (HOME is the run's).
    assert sorted(written) == sorted(CLIS[name][2])
    text = json.dumps(written) + " ".join(launch.argv) + json.dumps(launch.env)
    urls = set(re.findall(r"https?://[^\s\"']+", text))
    assert urls <= {s.mcp_url, f"{s.model_url}/v1", "http://127.0.0.1:9"}, urls
    assert s.mcp_url in text and f"{s.model_url}/v1" in text
    assert launch.argv[0].startswith(str(s.prefix / "node_modules"))  # type: ignore[operator]
    assert launch.argv[-1] == s.prompt and str(s.work) in launch.argv


def test_cline_is_pointed_at_the_fake_model_and_its_telemetry_is_off(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    launch = clients.client("cline").launch(s)
    settings = s.home / ".cline" / "data" / "settings"
    providers = json.loads((settings / "providers.json").read_text())
    # Without `updatedAt` Cline takes the file as invalid and falls back to its own API.
    entry = providers["providers"][providers["lastUsedProvider"]]
    assert entry["settings"]["provider"] == "openai-compatible" and entry["updatedAt"]
    mcp = json.loads((settings / "cline_mcp_settings.json").read_text())
    assert mcp["mcpServers"]["echo"]["transport"] == {"type": "streamableHttp", "url": s.mcp_url}
    assert json.loads((settings / "global-settings.json").read_text())["telemetryOptOut"] is True
    assert launch.env["CLINE_NO_AUTO_UPDATE"] == "1"
    # Its feature-flag cache is fresh (written now), so it does not ask PostHog for flags.
    flags = json.loads((s.home / ".cline/data/cache/feature-flags.json").read_text())
    assert abs(flags["updatedAt"] / 1000 - time.time()) < 60 and flags["userId"] is None
    # The hub daemon it leaves behind notes its PID there: the lab stops it by that PID.
    assert launch.daemons == (s.home / ".cline/data/locks/hub/production.json",)


def test_droid_uses_a_custom_model_and_is_air_gapped(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    launch = clients.client("droid").launch(s)
    settings = json.loads((s.home / ".factory" / "settings.json").read_text())
    (model,) = settings["customModels"]
    assert model["provider"] == "generic-chat-completion-api"
    assert launch.argv[launch.argv.index("-m") + 1] == f"custom:{model['model']}"
    assert {"exec", "--skip-permissions-unsafe"} <= set(launch.argv)
    mcp = json.loads((s.home / ".factory" / "mcp.json").read_text())
    assert mcp["mcpServers"]["echo"] == {"type": "http", "url": s.mcp_url}
    assert {
        "FACTORY_AIRGAP_ENABLED": "true",
        "FACTORY_TELEMETRY_INGEST_BASE_URL": "http://127.0.0.1:9",
        "FACTORY_DROID_AUTO_UPDATE_ENABLED": "false",
    }.items() <= launch.env.items()
    assert launch.daemons == ()


# ------------------------------------------------------------------ nothing outlives a run

#: A client that leaves a daemon behind, as Cline does: it starts a child in a session of
#: its own (out of reach of the client's process group), notes its PID, and exits.
DAEMONIZING = """
import json, os, subprocess, sys, time
time.sleep(1)  # a client that takes a while: the lab must not take it for gone meanwhile
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                         start_new_session=True)
with open(sys.argv[1], "w") as f:
    json.dump({"pid": child.pid}, f)
print("LAB-DONE results=ok")
"""


@pytest.mark.parametrize("traced", [False, True])
def test_a_daemon_the_client_leaves_is_stopped_by_its_pid(tmp_path: Path, traced: bool) -> None:
    import sys

    from mcp_layers_lab import run

    strace = run.strace_path() if traced else None
    if traced and strace is None:
        pytest.skip("no strace here")
    home = tmp_path / "home"
    home.mkdir()
    record = home / "daemon.json"
    launch = clients.Launch([sys.executable, "-c", DAEMONIZING, str(record)], daemons=(record,))
    env = clients.base_env(home)
    leftovers: list[str] = []
    start = time.monotonic()
    code, timed_out = run.run_client(launch, env, tmp_path, tmp_path, 30.0, strace, leftovers)
    # Under strace too, the run ends with the client (strace would wait for the daemon).
    assert (code, timed_out) == (0, False) and 1 <= time.monotonic() - start < 15
    pid = json.loads(record.read_text())["pid"]
    assert [line.split()[0] for line in leftovers] == [str(pid)]
    assert not run._alive(pid)


def test_only_processes_with_the_runs_home_are_stopped(tmp_path: Path) -> None:
    import subprocess
    import sys

    from mcp_layers_lab import run

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    mine = subprocess.Popen(sleep, env={"HOME": str(tmp_path / "a")}, start_new_session=True)
    other = subprocess.Popen(sleep, env={"HOME": str(tmp_path / "b")}, start_new_session=True)
    try:
        # A stale record naming someone else's process stops nothing of theirs.
        record = tmp_path / "a" / "daemon.json"
        record.write_text(json.dumps({"pid": other.pid}))
        stopped = run.stop_leftovers((record,), tmp_path / "a", spare=0)
        assert [line.split()[0] for line in stopped] == [str(mine.pid)]
        assert mine.wait(timeout=10) is not None and other.poll() is None
    finally:
        other.kill()
        other.wait()
        mine.kill()
        mine.wait()


#: A stand-in for strace: a fork of its own first (strace's start-up check does that, and
#: the fork runs strace's command line), then the traced program.
STRACE_LIKE = """
import os, subprocess, sys, time
if os.fork() == 0:
    time.sleep(20)
    os._exit(0)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(20)", "client"])
time.sleep(20)
"""


def test_the_traced_client_is_the_child_that_runs_another_program(tmp_path: Path) -> None:
    import subprocess
    import sys

    from mcp_layers_lab import run

    tracer = subprocess.Popen([sys.executable, "-c", STRACE_LIKE], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        client = None
        while client is None and time.monotonic() < deadline:
            time.sleep(0.1)
            client = run._traced_child(tracer.pid)
        # Taken for the client, strace's own fork would end the run at once when it exits.
        assert client is not None and run._command(client).endswith("client")
    finally:
        run._kill_group(tracer.pid, 9)
        tracer.wait()
