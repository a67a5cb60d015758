"""A bad `mcp_*` option while clients connect: a real mitmdump refuses it (one line, exit
2, no traceback) and no client gets an answer from the half-started proxy.

mitmproxy 12 listens before it imports a `-s` script, so a client that connects during
start-up reaches the port before the addon can refuse (docs/mitmproxy.md, *A bad option
at start-up*). Before the fix such a client got served by a proxy that never ran, and
mitmproxy printed a traceback per request (its TLS addon had no certificates yet).

Each case hammers the port from a few threads, from before mitmdump starts until it
exits: connect, send one MCP POST, read until the connection ends. The control case (a
good option) shows that the same clients do see answers when the proxy runs.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mcp_layers_demo import procs

CLIENTS = 4
#: Every wait is bounded: a client gives up after this many connection attempts (one per
#: ~2 ms while nothing listens), and the run after `RUN_TIMEOUT_S`.
MAX_ATTEMPTS = 20_000
RUN_TIMEOUT_S = 60.0
READ_TIMEOUT_S = 5.0

BODY = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'
POST = (
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Accept: application/json, text/event-stream\r\n"
    + f"Content-Length: {len(BODY)}\r\n\r\n".encode()
    + BODY
)


@dataclass
class Seen:
    """What the clients saw: per connection the proxy accepted, the bytes it sent back."""

    answers: list[bytes] = field(default_factory=list)
    refused: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def accepted(self) -> int:
        return len(self.answers)


def client(port: int, seen: Seen, stop: threading.Event) -> None:
    for _ in range(MAX_ATTEMPTS):
        if stop.is_set():
            return
        try:
            sock = socket.create_connection((procs.HOST, port), timeout=1.0)
        except OSError:
            with seen.lock:
                seen.refused += 1
            time.sleep(0.002)
            continue
        with sock:
            data = b""
            try:
                sock.sendall(POST)
                sock.settimeout(READ_TIMEOUT_S)
                while chunk := sock.recv(65536):
                    data += chunk
                    if b"\r\n\r\n" in data:  # a status line and headers: an answer
                        break
            except OSError:  # reset: the proxy went away without a word
                pass
        with seen.lock:
            seen.answers.append(data)


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seen: Seen


def run_while_hammered(tmp_path: Path, sets: list[str], good: bool = False) -> Run:
    """Start mitmdump with `sets` while `CLIENTS` threads connect to its port; a good
    run is stopped once a client got an answer."""
    port = procs.free_port()
    cmd = procs.mitmdump_cmd(
        upstream_port=procs.free_port(),  # nothing listens there: the answer is a 502
        listen_port=port,
        # A case of its own sets the directory (twice would be refused for that).
        record_dir=None if any(s.startswith("mcp_record_dir=") for s in sets) else tmp_path / "rec",
        extra_sets=sets,
    )
    seen, stop = Seen(), threading.Event()
    threads = [threading.Thread(target=client, args=(port, seen, stop)) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        if good:
            deadline = time.monotonic() + RUN_TIMEOUT_S
            while time.monotonic() < deadline and not any(seen.answers):
                time.sleep(0.05)
            # The clients stop first: mitmproxy 12 prints a traceback for each connection
            # still open when it is stopped, which is not what this test is about.
            stop.set()
            for t in threads:
                t.join(timeout=RUN_TIMEOUT_S)
            procs.stop(proc)
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            procs.stop(proc)
        stop.set()
        for t in threads:
            t.join(timeout=RUN_TIMEOUT_S)
    return Run(proc.returncode, stdout, stderr, seen)


BAD = [
    ("mcp_faults=nonexistent", "mcp_faults: 'nonexistent' is neither a preset nor a file"),
    ("mcp_fault=http_status=abc", "mcp_fault 'http_status=abc': \"status\" must be a status"),
    ("mcp_record_dir={file}/rec", "mcp_record_dir: cannot create"),
    ("mcp_record_bodies=maybe", "mcp_record_bodies must be true or false"),
]


@pytest.mark.parametrize(("option", "message"), BAD, ids=[c[0].split("=")[0] for c in BAD])
def test_a_bad_option_is_refused_and_no_connecting_client_is_served(
    tmp_path: Path, option: str, message: str
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory\n")
    sets = [option.format(file=a_file)]
    run = run_while_hammered(tmp_path, sets)
    output = run.stdout + run.stderr
    assert run.returncode == 2, output
    refusal = [line for line in run.stderr.splitlines() if "mcp-layers:" in line]
    assert len(refusal) == 1 and refusal[0].startswith("mitmdump: mcp-layers: "), output
    assert message in refusal[0]
    assert "Traceback" not in output and "Error logged during startup" not in output, output
    assert "listening at" not in output, output
    # The clients reached the port while mitmdump started (the race did happen: should
    # a later mitmproxy import scripts before it listens, this fails, and
    # docs/mitmproxy.md is to be rewritten) and each connection ended without a byte:
    # no answer from a proxy that never ran.
    assert run.seen.accepted() >= 1, f"no client connected in time ({run.seen.refused} refused)"
    assert all(answer == b"" for answer in run.seen.answers), run.seen.answers[:3]
    assert not list((tmp_path / "rec").glob("*.jsonl"))


def test_with_good_options_the_same_clients_are_answered(tmp_path: Path) -> None:
    """The control: the hammering clients do see answers once the proxy runs (a 502:
    nothing listens upstream), so the empty answers above are the refusal's doing."""
    run = run_while_hammered(tmp_path, ["mcp_faults=errors.rate_limited"], good=True)
    output = run.stdout + run.stderr
    answered = [a for a in run.seen.answers if a]
    assert answered and all(a.startswith(b"HTTP/1.1 ") for a in answered), output
    assert "mcp-layers: recording to" in output and "Traceback" not in output, output
