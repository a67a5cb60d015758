"""Orchestration: one run per client × fault × script, each in its own worker process.

A run (``run_one``) starts, all on 127.0.0.1: the bundled MCP server (resumable: event
ids, ``retry:``, redelivery after ``Last-Event-ID``), the fake model API
(a thread), ``mitmdump`` with the addon, the fault and ``mcp_scenario``; then the client,
headless, with an isolated HOME and a timeout; then stops everything in ``finally``. The
run folder keeps the recording (``mcp-*.jsonl``), the model's log (``model.log``), the
client's stdout/stderr, the processes' logs and ``run.json`` (what happened).

Network isolation (docs/lab.md, "Network"): where the kernel allows it (root, or user
namespaces), the worker moves itself into a new network namespace whose only interface
is loopback before it starts anything, so nothing a client does can leave the machine.
Where ``strace`` is there, the client runs under ``strace -f -e trace=connect`` and any
connect to an address that is not loopback is a violation: the run says so, and the lab
ends with a failure. Third-party agents are not run without the namespace unless the
caller says so (``isolation="none"``).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from mcp_layers_core import faults, stdio_faults
from mcp_layers_demo import procs

from . import clients as clients_mod
from . import presets
from .fake_model import FakeModel

SCRIPTS: Final = ("once", "again_after_error")
#: A client that has not finished by then is killed (its run says "timeout").
CLIENT_TIMEOUT_S: Final = 120.0
#: After the client exits: time for the proxy to finish writing the last exchange.
SETTLE_S: Final = 0.5
#: The worker's own start-up and shutdown, on top of the client's timeout.
WORKER_OVERHEAD_S: Final = 120.0
KILL_GRACE_S: Final = 5.0
RUN_FILE: Final = "run.json"
#: What makes a run replayable (docs/replay.md).
RECORD_BODIES: Final = "mcp_record_bodies=true"
MODEL_LOG: Final = "model.log"


def scenario_name(fault: str, script: str) -> str:
    """The recording's scenario label: the fault, marked when the model calls again."""
    return fault if script == "once" else f"{fault}+again"


@dataclass
class RunSpec:
    client: str
    fault: str
    script: str
    run_dir: str
    prefix: str | None
    netns: bool
    strace: str | None
    timeout_s: float = CLIENT_TIMEOUT_S
    addon: str | None = None  #: another build of the addon script (default: the repo's)
    #: A recording to serve with `mcp-layers replay` instead of the live server and fault.
    replay: str | None = None
    #: The client starts the bundled server as a command, behind `mcp-layers wrap`.
    stdio: bool = False

    @property
    def scenario(self) -> str:
        return scenario_name(self.fault, self.script)


@dataclass
class RunResult:
    client: str
    version: str
    fault: str
    script: str
    scenario: str
    run_dir: str
    exit_code: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    netns: bool = False
    strace: bool = False
    #: non-loopback addresses the client tried to connect to (host:port)
    violations: list[str] = field(default_factory=list)
    #: requests the fake model could not answer (a client speaking something unexpected)
    unhandled: list[str] = field(default_factory=list)
    #: warnings the addon logged (a fault that failed to act is reported here, not guessed)
    addon_errors: list[str] = field(default_factory=list)
    error: str | None = None  #: the harness failed (the run says nothing about the client)
    started: str = ""
    #: The recording this run was served from by `mcp-layers replay` (no fault of its own).
    replayed: str | None = None
    #: Processes the client left running when it exited, stopped by the lab by PID
    #: (``PID command``): a daemon its entry names (Cline's hub), or any other process that
    #: still had the run's HOME.
    leftovers: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> RunResult:
        data = json.loads(path.read_text(encoding="utf-8"))
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")


# ------------------------------------------------------------------ isolation


def netns_available() -> bool:
    """Whether a process may get a network namespace of its own (tried in a child)."""
    probe = "import os; os.unshare(os.CLONE_NEWNET)"
    try:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def strace_path() -> str | None:
    """strace, if it is there and can trace connects here (ptrace may be forbidden)."""
    path = shutil.which("strace")
    if path is None:
        return None
    cmd = [path, "-f", "-qq", "--seccomp-bpf", "-e", "trace=connect", "-o", os.devnull, "true"]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return path if done.returncode == 0 else None


def enter_netns() -> None:
    """Move this process into a new network namespace and bring its loopback up.

    Must run before any thread or child is started: children inherit the namespace.
    """
    os.unshare(os.CLONE_NEWNET)
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        # struct ifreq: 16 bytes of name, then a union whose first member is the flags.
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up))


_CONNECT = re.compile(
    r"connect\(\d+, \{sa_family=AF_INET6?, sin6?_port=htons\((\d+)\).*?"
    r'(?:inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)")'
)


def outbound(trace: Path) -> list[str]:
    """Non-loopback addresses (``host:port``) in an strace connect log, each once."""
    seen: dict[str, None] = {}
    if not trace.exists():
        return []
    with trace.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            m = _CONNECT.search(line)
            if m is None:
                continue
            port, v4, v6 = m.groups()
            addr = ipaddress.ip_address(v4 or v6)
            if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
                addr = addr.ipv4_mapped
            if addr.is_loopback:
                continue
            seen[f"[{addr}]:{port}" if addr.version == 6 else f"{addr}:{port}"] = None
    return list(seen)


_ADDON_WARNING = re.compile(r"mcp-layers: (.*)$")


def addon_warnings(log: Path) -> list[str]:
    """The addon's own warnings in a mitmdump log, each once (timestamps dropped)."""
    seen: dict[str, None] = {}
    if log.exists():
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            m = _ADDON_WARNING.search(line)
            if m:
                seen[m.group(1).strip()[:300]] = None
    return list(seen)


# ------------------------------------------------------------------ one run (in the worker)


def _kill_group(pgid: int, sig: int) -> None:
    # The client was started in a session of its own: its group holds only what it started.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (an exited child its parent has not reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    # The state follows the command name, which is in parentheses and may hold spaces.
    return stat[stat.rfind(")") + 2 :][:1] not in ("Z", "X", "")


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:200]


def _has_home(pid: int, home: Path) -> bool:
    """`pid` runs with `home` as its HOME: the client or something it started (every launch
    gets a fresh HOME of its own, so no other process has it)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"HOME={home}".encode() in environ.split(b"\0")


def _stop_pid(pid: int) -> None:
    """SIGTERM, then SIGKILL after KILL_GRACE_S: by PID, so nothing else is touched."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
        deadline = time.monotonic() + KILL_GRACE_S
        while time.monotonic() < deadline:
            if not _alive(pid):
                return
            time.sleep(0.05)


def stop_leftovers(daemons: tuple[Path, ...], home: Path, spare: int) -> list[str]:
    """Stop what the client left running (``PID command`` each), by PID.

    First the daemons the entry names (a JSON file with its "pid", checked to carry the
    run's HOME, so a stale file never names someone else's process), then any process still
    running with the run's HOME. `spare` is the lab's own child (strace, which has that
    HOME too and ends by itself once its last tracee is gone).
    """
    pids: dict[int, None] = {}
    for record in daemons:
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            data = json.loads(record.read_text(encoding="utf-8"))
            pids[int(data.get("pid"))] = None
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            pids[int(entry.name)] = None
    stopped = []
    for pid in pids:
        if pid in (spare, os.getpid()) or not _alive(pid) or not _has_home(pid, home):
            continue
        stopped.append(f"{pid} {_command(pid)}")
        _stop_pid(pid)
    return stopped


def _traced_child(strace_pid: int) -> int | None:
    """The client under strace: the direct child of strace that runs another program
    (None until it has started). strace forks short-lived children of its own at start-up
    (its seccomp-bpf check), which still run strace's command line."""
    path = Path(f"/proc/{strace_pid}/task/{strace_pid}/children")
    try:
        children = [int(c) for c in path.read_text(encoding="ascii").split()]
    except (OSError, ValueError):
        return None
    own = _command(strace_pid)
    for child in children:
        command = _command(child)
        if command not in (own, "?", "") and _alive(child):
            return child
    return None


def run_client(
    launch: clients_mod.Launch,
    env: dict[str, str],
    cwd: Path,
    run_dir: Path,
    timeout_s: float,
    strace: str | None,
    leftovers: list[str] | None = None,
) -> tuple[int | None, bool]:
    """Run the client to its end or its timeout; (exit code, timed out).

    Once the client has exited, what it left running is stopped by PID (`stop_leftovers`)
    and noted in `leftovers`. Under strace that must happen while waiting: strace follows
    a detached daemon too, and would wait for it to end.
    """
    home = Path(env["HOME"])
    noted = leftovers if leftovers is not None else []
    argv = list(launch.argv)
    if strace is not None:
        trace = run_dir / "connect.trace"
        argv = [
            strace,
            "-f",
            "-qq",
            "--seccomp-bpf",
            "-e",
            "trace=connect",
            "-e",
            "signal=none",
            "-o",
            str(trace),
            "--",
            *argv,
        ]
    with (run_dir / "client.out").open("wb") as out, (run_dir / "client.err").open("wb") as err:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        try:
            try:
                return _wait_client(proc, launch, home, timeout_s, strace, noted), False
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=KILL_GRACE_S)
                except subprocess.TimeoutExpired:
                    _kill_group(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=KILL_GRACE_S)
                return proc.returncode, True
        finally:
            # Whatever the client left behind in its group (helpers, a server it spawned).
            _kill_group(proc.pid, signal.SIGKILL)
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=KILL_GRACE_S)
            # And what left the group: a daemon in a session of its own.
            noted += stop_leftovers(launch.daemons, home, proc.pid)


#: How often the lab looks whether a traced client has exited.
POLL_S: Final = 0.1


def _wait_client(
    proc: subprocess.Popen[bytes],
    launch: clients_mod.Launch,
    home: Path,
    timeout_s: float,
    strace: str | None,
    noted: list[str],
) -> int:
    """The client's exit code; raises TimeoutExpired after `timeout_s`."""
    if strace is None:
        return proc.wait(timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    client: int | None = None
    while True:
        try:
            return proc.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
        client = client or _traced_child(proc.pid)
        if client is not None and not _alive(client):
            # The client is done, but strace still follows what it left running.
            noted += stop_leftovers(launch.daemons, home, proc.pid)
            return proc.wait(timeout=KILL_GRACE_S)


def start_replay(recording: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """`mcp-layers replay RECORDING` on `port`, waited for (stopped again on failure)."""
    cmd = [sys.executable, "-m", "mcp_layers_analysis.replay", str(recording)]
    proc = procs.start([*cmd, "--port", str(port), "--strict"], log)
    try:
        procs.wait_for_port(port, proc, what="the replay", log=log)
    except BaseException:
        procs.stop(proc)
        raise
    return proc


def runs_on_stdio(fault: presets.Fault) -> bool:
    """Can `mcp-layers wrap` apply `fault` on a pipe? The wrapper's own check decides
    (`stdio_faults.check`), so the lab never keeps a second list of what stdio can do."""
    try:
        rules = [] if fault.preset is None else faults.preset(fault.preset)
        if fault.rule is not None:
            rules.append(faults.parse_inline(fault.rule))
        stdio_faults.check(rules)
    except faults.FaultRuleError:
        return False
    return True


def wrapped_server(run_dir: Path, scenario: str, fault: presets.Fault) -> tuple[str, ...]:
    """The bundled server over stdio behind `mcp-layers wrap`, recording into `run_dir`
    with `fault`'s rules (the wrapper's options: `--faults PRESET`, `--fault RULE`)."""
    wrap = [str(Path(sys.executable).with_name("mcp-layers")), "wrap"]
    wrap += ["--record-dir", str(run_dir), "--scenario", scenario, "--name", "lab"]
    for setting in fault.sets():
        name, value = setting.split("=", 1)
        wrap += ["--faults" if name == "mcp_faults" else "--fault", value]
    return (*wrap, "--", sys.executable, "-m", "mcp_layers_demo.server", "--stdio")


def recording_of(run_dir: Path) -> Path:
    """The one recording a lab run wrote."""
    found = sorted(run_dir.glob("mcp-*.jsonl"))
    if len(found) != 1:
        raise LabError(f"{run_dir} holds {len(found)} recordings, not one: cannot replay it")
    return found[0]


def run_one(spec: RunSpec) -> RunResult:
    """One client × fault × script, start to finish; every process is stopped at the end."""
    client = clients_mod.client(spec.client)
    fault = presets.fault(spec.fault)
    run_dir = Path(spec.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    result = RunResult(
        client.name,
        client.version,
        fault.name,
        spec.script,
        spec.scenario,
        str(run_dir),
        netns=spec.netns,
        strace=spec.strace is not None,
        started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        replayed=spec.replay,
    )
    scratch = Path(tempfile.mkdtemp(prefix="mcp-lab-"))
    server = proxy = None
    fake: FakeModel | None = None
    try:
        server_port, proxy_port = procs.free_port(), procs.free_port()
        fake = FakeModel(spec.script, run_dir / MODEL_LOG, hold_s=fault.model_hold_s).start()
        # The client reaches the model through the same mitmdump as the MCP server, so the
        # recording holds both halves of each turn (model_turn records; docs/model-turns.md).
        model_url = fake.url
        model_port = procs.free_port()
        command: tuple[str, ...] = ()
        if spec.stdio:
            # The client starts the server itself, through the wrapper, which records.
            command = wrapped_server(run_dir, spec.scenario, fault)
        else:
            # Resumable (docs/lab.md): every SSE event carries an id, a POST's stream
            # opens with `retry:`, and a cut stream can be resumed with `Last-Event-ID`.
            if spec.replay is None:
                server = procs.start_server(server_port, run_dir / "server.log", resumable=True)
            else:
                server = start_replay(Path(spec.replay), server_port, run_dir / "replay.log")
            proxy = procs.start_mitmdump(
                server_port,
                proxy_port,
                run_dir / "mitmdump.log",
                addon=Path(spec.addon) if spec.addon else procs.ADDON,
                record_dir=run_dir,
                scenario=spec.scenario,
                # Bodies always, so that every run can be replayed (`--replay`); a replayed
                # run has no fault of its own: the recording holds what the fault did.
                extra_sets=[*(fault.sets() if spec.replay is None else ()), RECORD_BODIES],
                extra_modes=[f"reverse:{fake.url}@{model_port}"],
            )
            model_url = f"http://{procs.HOST}:{model_port}"
        setup = clients_mod.Setup(
            home=scratch / "home",
            work=scratch / "work",
            mcp_url=f"http://{procs.HOST}:{proxy_port}{procs.MCP_PATH}",
            model_url=model_url,
            prefix=Path(spec.prefix) if spec.prefix else None,
            logs=run_dir,
            mcp_command=command,
        )
        setup.home.mkdir()
        setup.work.mkdir()
        launch = client.launch(setup)
        env = clients_mod.base_env(setup.home) | launch.env
        (run_dir / "command.txt").write_text(" ".join(launch.argv) + "\n", encoding="utf-8")
        began = time.monotonic()
        result.exit_code, result.timed_out = run_client(
            launch, env, setup.work, run_dir, spec.timeout_s, spec.strace, result.leftovers
        )
        result.seconds = round(time.monotonic() - began, 2)
        time.sleep(SETTLE_S)
    except Exception as exc:  # the harness failed: say so in the run, do not guess
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        if proxy is not None:
            procs.stop(proxy)  # SIGTERM: the addon writes what is still open
        if server is not None:
            procs.stop(server)
        if fake is not None:
            fake.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    result.violations = outbound(run_dir / "connect.trace")
    result.addon_errors = addon_warnings(run_dir / "mitmdump.log")
    if fake is not None:
        result.unhandled = sorted(
            {
                f"{e.get('api')} {e.get('path')}"
                for e in fake.log.entries
                if e.get("api") in ("unhandled", "unreadable")
            }
        )
    result.save(run_dir / RUN_FILE)
    return result


def worker_main(argv: list[str]) -> int:
    """``python -m mcp_layers_lab.run SPEC.json``: one run, in its own namespace if asked."""
    spec = RunSpec(**json.loads(Path(argv[0]).read_text(encoding="utf-8")))

    def terminate(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)  # unwinds through run_one's finally: stops everything

    signal.signal(signal.SIGTERM, terminate)
    if spec.netns:
        enter_netns()
    run_one(spec)
    return 0


# ------------------------------------------------------------------ the lab (the parent)


@dataclass(frozen=True)
class Plan:
    clients: tuple[str, ...]
    faults: tuple[str, ...]
    scripts: tuple[str, ...] = ("once",)

    def runs(self) -> Iterator[tuple[str, str, str]]:
        for c in self.clients:
            for f in self.faults:
                for s in self.scripts:
                    # A second model call needs an error the model sees on the first.
                    if s == "once" or presets.fault(f).reaches_model:
                        yield c, f, s


class LabError(RuntimeError):
    """The lab cannot run as asked; the message says why and what to do."""


def resolve_isolation(isolation: str, plan: Plan) -> tuple[bool, str | None]:
    """(use a network namespace, strace path) for ``isolation`` auto|netns|none."""
    netns = False
    if isolation in ("auto", "netns"):
        netns = netns_available()
        if isolation == "netns" and not netns:
            raise LabError("no network namespace can be made here (needs root or user namespaces)")
    agents = [c for c in plan.clients if clients_mod.client(c).agent]
    if agents and not netns and isolation != "none":
        raise LabError(
            f"{', '.join(agents)} would run without a network namespace (none can be made "
            "here); run as root, or pass --isolation none to run them unisolated"
        )
    return netns, strace_path()


def run_lab(
    plan: Plan,
    out_dir: Path,
    cache: Path,
    isolation: str = "auto",
    timeout_s: float = CLIENT_TIMEOUT_S,
    log: Callable[[str], None] = print,
    addon: Path | None = None,
    jobs: int = 1,
    replay: Path | None = None,
    stdio: bool = False,
) -> list[RunResult]:
    """Every run of ``plan`` into ``out_dir/runs/<client>/<scenario>/``, ``jobs`` at a time;
    with ``replay`` (an earlier lab output folder), each against the replay of its
    recording there instead of the live server and fault."""
    if stdio:
        refused = [c for c in plan.clients if not clients_mod.client(c).stdio]
        refused += [f for f in plan.faults if not runs_on_stdio(presets.fault(f))]
        if refused or replay is not None:
            able = ", ".join(c.name for c in clients_mod.CLIENTS if c.stdio)
            fit = ", ".join(f.name for f in presets.FAULTS if runs_on_stdio(f))
            raise LabError(
                f"--transport stdio runs {able}"
                f" with the faults {fit} (not --replay); "
                f"not: {', '.join(refused) or '--replay'}"
            )
    netns, strace = resolve_isolation(isolation, plan)
    log(
        f"isolation: {'network namespace' if netns else 'none'}; "
        f"connect tracing: {'strace' if strace else 'unavailable'}"
    )
    prefixes = {c: clients_mod.install(clients_mod.client(c), cache, log) for c in plan.clients}
    specs = []
    for c, f, s in plan.runs():
        run_dir = out_dir / "runs" / c / scenario_name(f, s)
        recorded = (
            None
            if replay is None
            else recording_of(replay / "runs" / c / scenario_name(f, s)).resolve()
        )
        if run_dir.exists():
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True)
        p = prefixes[c]
        specs.append(
            RunSpec(
                c,
                f,
                s,
                str(run_dir),
                str(p) if p else None,
                netns,
                strace,
                timeout_s,
                str(addon) if addon else None,
                None if recorded is None else str(recorded),
                stdio,
            )
        )

    def one(spec: RunSpec) -> RunResult:
        r = _spawn(spec)
        status = "timeout" if r.timed_out else f"exit {r.exit_code}"
        extra = f"  HARNESS ERROR {r.error}" if r.error else ""
        if r.violations:
            extra += f"  OUTBOUND {' '.join(r.violations)}"
        log(f"{r.client:12} {r.scenario:26} {status:8} {r.seconds:6.1f} s{extra}")
        return r

    if jobs <= 1:
        return [one(spec) for spec in specs]
    # Each run is a worker of its own (its own namespace, ports, HOME): runs of one client
    # share nothing but the read-only install, so they may overlap. Results keep plan order.
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, specs))


def _spawn(spec: RunSpec) -> RunResult:
    run_dir = Path(spec.run_dir)
    spec_file = run_dir / "spec.json"
    spec_file.write_text(json.dumps(asdict(spec), indent=2) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "mcp_layers_lab.run", str(spec_file)]
    with (run_dir / "worker.log").open("wb") as out:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=spec.timeout_s + WORKER_OVERHEAD_S)
        except subprocess.TimeoutExpired:
            # SIGTERM lets the worker stop its processes; its group is ours to end after that.
            proc.terminate()
            try:
                proc.wait(timeout=procs.STOP_TIMEOUT_S * 3)
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout=KILL_GRACE_S)
    result_file = run_dir / RUN_FILE
    if result_file.exists():
        return RunResult.load(result_file)
    tail = procs.log_tail(run_dir / "worker.log")
    client = clients_mod.client(spec.client)
    failed = RunResult(
        client.name,
        client.version,
        spec.fault,
        spec.script,
        spec.scenario,
        str(run_dir),
        error=f"the worker wrote no {RUN_FILE}: {tail}",
    )
    failed.save(result_file)
    return failed


def load_results(out_dir: Path) -> list[RunResult]:
    """The runs recorded under ``out_dir`` (in client, then scenario order)."""
    return [RunResult.load(p) for p in sorted((out_dir / "runs").glob(f"*/*/{RUN_FILE}"))]


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
