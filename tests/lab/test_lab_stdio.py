"""`--transport stdio`: the clients that can start a server as a command are given the
bundled server over stdio behind `mcp-layers wrap` (which records), in their own config
format; faults the wrapper cannot apply over stdio are refused before anything starts."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from mcp_layers_lab import clients, presets
from mcp_layers_lab.run import LabError, Plan, run_lab, runs_on_stdio, wrapped_server


def setup(tmp_path: Path, command: tuple[str, ...]) -> clients.Setup:
    home = tmp_path / "home"
    home.mkdir()
    return clients.Setup(
        home=home, work=tmp_path, mcp_url="http://127.0.0.1:1/mcp",
        model_url="http://127.0.0.1:2", prefix=tmp_path, logs=tmp_path, mcp_command=command,
    )  # fmt: skip


COMMAND = ("/venv/bin/mcp-layers", "wrap", "--record-dir", "/tmp/r x", "--", "python", "-m", "s")


def test_claude_code_gets_a_stdio_server_entry_and_waits_for_it(tmp_path: Path) -> None:
    launch = clients.client("claude-code").launch(setup(tmp_path, COMMAND))
    config = json.loads((tmp_path / "home" / "mcp.json").read_text())
    (entry,) = config["mcpServers"].values()
    assert entry == {"type": "stdio", "command": COMMAND[0], "args": list(COMMAND[1:])}
    assert launch.env["MCP_CONNECTION_NONBLOCKING"] == "0"


def test_codex_gets_a_required_command_in_its_toml(tmp_path: Path) -> None:
    clients.client("codex").launch(setup(tmp_path, COMMAND))
    config = tomllib.loads((tmp_path / "home" / ".codex" / "config.toml").read_text())
    (server,) = config["mcp_servers"].values()
    assert [server["command"], *server["args"]] == list(COMMAND)
    assert server["required"] is True and "url" not in server


def test_over_http_the_configs_are_unchanged(tmp_path: Path) -> None:
    clients.client("codex").launch(setup(tmp_path, ()))
    config = tomllib.loads((tmp_path / "home" / ".codex" / "config.toml").read_text())
    assert list(config["mcp_servers"].values()) == [{"url": "http://127.0.0.1:1/mcp"}]


def test_the_wrapped_server_carries_the_fault_as_the_wrapper_takes_it(tmp_path: Path) -> None:
    command = wrapped_server(tmp_path, "tool_error", presets.fault("tool_error"))
    assert command[1:3] == ("wrap", "--record-dir") and "--faults" in command
    assert command[command.index("--faults") + 1] == "errors.tool_error"
    dash = command.index("--")
    assert command[dash + 1 :][1:] == ("-m", "mcp_layers_demo.server", "--stdio")
    plain = wrapped_server(tmp_path, "none", presets.fault("none"))
    assert "--fault" not in plain and plain[plain.index("--faults") + 1] == "none"


@pytest.mark.parametrize(
    ("clients_", "faults"), [(("py-sdk",), ("none",)), (("codex",), ("tools_call_503",))]
)
def test_what_stdio_cannot_run_is_refused_before_anything_starts(
    tmp_path: Path, clients_: tuple[str, ...], faults: tuple[str, ...]
) -> None:
    with pytest.raises(LabError, match="--transport stdio runs claude-code, codex"):
        run_lab(Plan(clients_, faults), tmp_path, tmp_path, "none", stdio=True)
    assert not (tmp_path / "runs").exists()
    stdio = {f.name for f in presets.FAULTS if runs_on_stdio(f)}
    assert {"none", "tool_error", "jsonrpc_error"} <= stdio  # what the docs say it ran
    assert not stdio & {"tools_call_503", "session_404", "stream_cut", "get_405"}
