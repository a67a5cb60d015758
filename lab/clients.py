"""The lab's clients: one declarative entry each.

An entry says which pinned package the client is (npm, installed once into the cache, or
the Python SDK of this environment), which model API it speaks, and how to launch it for
one run: the config files it reads (written under an isolated HOME) and the command line
and environment. Adding a client is adding one entry to CLIENTS (docs/lab.md shows how).

Every launch gets a minimal environment (never the caller's): a real API key or proxy
setting in the caller's environment must not reach a client, and every URL a client is
given points at 127.0.0.1.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from mcp_layers_demo.npm import TS_CLIENT_DIR

LAB: Final = Path(__file__).resolve().parent
REPO: Final = LAB.parent
PROMPT: Final = "Call the echo tool with text hello"
#: A placeholder the clients insist on; the fake model never checks it.
DUMMY_KEY: Final = "lab-dummy-key"
#: The MCP server's name in every client config: tools show as mcp__echo__echo and so on.
SERVER_NAME: Final = "echo"
NPM_TIMEOUT_S: Final = 900.0


class InstallError(RuntimeError):
    """A client could not be installed or found; the message says what to do."""


@dataclass(frozen=True)
class Setup:
    """What an entry is given to set itself up for one run."""

    home: Path  #: an empty folder that stands in for HOME (deleted after the run)
    work: Path  #: the working directory (empty)
    mcp_url: str  #: the proxy's MCP endpoint
    model_url: str  #: the fake model API, without a path
    prefix: Path | None  #: where the npm package is installed (node_modules inside)
    logs: Path  #: the run's folder, for extra logs the client can write
    prompt: str = PROMPT
    #: A stdio run (`--transport stdio`): the server's command, the wrapper first; the
    #: client starts it instead of connecting to `mcp_url`.
    mcp_command: tuple[str, ...] = ()


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    #: JSON files in which the client notes the PID of a daemon it leaves running after it
    #: exits (key "pid"): the lab stops each by that PID once the client is done. A daemon
    #: detaches into a session of its own, out of reach of the client's process group.
    daemons: tuple[Path, ...] = ()


@dataclass(frozen=True)
class Client:
    name: str  #: the lab's name for it (`--clients`)
    version: str  #: the pinned version
    #: `name@version` the client sends in `initialize` (how records name it)
    client_info: str
    api: str  #: the model API it speaks: anthropic, responses, chat or gemini
    launch: Callable[[Setup], Launch]
    npm: str | None = None  #: the npm package, pinned to `version`
    #: the PyPI package, pinned to `version`, installed into a virtualenv of its own
    pypi: str | None = None
    #: more pinned packages installed beside it (`name@1.2.3` for npm, `name==1.2.3` for
    #: PyPI): a framework driven by a script of the lab's needs its providers and peers
    extra: tuple[str, ...] = ()
    #: how its telemetry is switched off, or why it has none (docs/lab.md, per client)
    telemetry: str | None = None
    #: another entry whose install it runs (the same package, driven another way)
    shares: str | None = None
    #: a third-party agent (big download; run only on demand, isolated from the network)
    agent: bool = True
    #: a folder whose node_modules may already hold the pinned package (saves a download)
    reuse: Path | None = None
    #: a name lookup the client makes whatever it is told (why, for the matrix): connects to
    #: a DNS server (port 53) are then listed as known, not a broken run; any other outbound
    #: connect still is. The namespace stops the lookup either way.
    known_lookup: str | None = None
    #: It can be configured with a server it starts as a command (`--transport stdio`).
    stdio: bool = False

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def install_label(self) -> str:
        """The cache folder's name: an entry that shares another's install uses its folder."""
        return f"{self.shares or self.name}@{self.version}"

    @property
    def package(self) -> str:
        """Where the pinned package comes from, for the matrix and ``--list``."""
        if self.npm is not None:
            return f"npm `{self.npm}`"
        return f"PyPI `{self.pypi or 'mcp'}`"


# ------------------------------------------------------------------ environment


def base_env(home: Path) -> dict[str, str]:
    """The environment every client starts from: PATH, a locale, and the isolated HOME."""
    tmp = home / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        # Loopback never goes through a proxy, whatever a library's defaults are.
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        # npm-style registries (opencode's Bun fetches plugin metadata at times) point at a
        # dead loopback port: the fetch fails at once instead of reaching for the internet.
        "NPM_CONFIG_REGISTRY": "http://127.0.0.1:9/",
        "npm_config_registry": "http://127.0.0.1:9/",
        "BUN_CONFIG_REGISTRY": "http://127.0.0.1:9/",
        "npm_config_update_notifier": "false",
    }


def _bin(setup: Setup, *parts: str) -> str:
    assert setup.prefix is not None
    return str(setup.prefix.joinpath("node_modules", *parts))


def _venv_bin(setup: Setup, name: str) -> str:
    assert setup.prefix is not None
    return str(setup.prefix / "bin" / name)


def _write_json(path: Path, obj: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------ the entries


def _claude(s: Setup) -> Launch:
    server: dict[str, object] = {"type": "http", "url": s.mcp_url}
    if s.mcp_command:
        server = {"type": "stdio", "command": s.mcp_command[0], "args": list(s.mcp_command[1:])}
    config = _write_json(s.home / "mcp.json", {"mcpServers": {SERVER_NAME: server}})
    argv = [
        _bin(s, ".bin", "claude"),
        "-p",
        s.prompt,
        "--mcp-config",
        str(config),
        "--strict-mcp-config",
        # Without it the tool is denied in -p mode; --dangerously-skip-permissions would need
        # IS_SANDBOX=1 as root.
        "--allowedTools",
        f"mcp__{SERVER_NAME}__echo",
        "--output-format",
        "stream-json",
        "--verbose",
        "--debug-file",
        str(s.logs / "claude-debug.log"),
    ]
    env = {
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "ANTHROPIC_BASE_URL": s.model_url,
        "ANTHROPIC_API_KEY": DUMMY_KEY,
    }
    if s.mcp_command:
        # -p asks the model before a slow-starting stdio server is connected unless told
        # to wait for it (the bundled server over stdio takes a second or two).
        env["MCP_CONNECTION_NONBLOCKING"] = "0"
    return Launch(argv, env)


def _codex_server(s: Setup) -> str:
    """The `[mcp_servers.NAME]` table's body: a URL, or a command (TOML strings written as
    JSON strings, whose escapes TOML's basic strings share)."""
    if not s.mcp_command:
        return f'url = "{s.mcp_url}"'
    command, *args = s.mcp_command
    # `required`: exec waits for the server's start (a Python server over stdio takes a
    # second or two) instead of asking the model before its tools are known.
    return (
        f"command = {json.dumps(command)}\nargs = {json.dumps(args)}\n"
        "required = true\nstartup_timeout_sec = 60"
    )


def _codex(s: Setup) -> Launch:
    return _codex_with(s, websocket=False)


def _codex_ws(s: Setup) -> Launch:
    """Codex with its model over WebSocket (`supports_websockets`: the transport it uses
    with a ChatGPT sign-in), each turn a `response.create` message on one connection."""
    return _codex_with(s, websocket=True)


def _codex_with(s: Setup, *, websocket: bool) -> Launch:
    codex_home = s.home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f"""model = "gpt-5.1-codex"
model_provider = "lab"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.lab]
name = "lab"
base_url = "{s.model_url}/v1"
wire_api = "responses"
env_key = "LAB_API_KEY"
# The lab is about MCP retries: the model connection must not add its own.
request_max_retries = 0
stream_max_retries = 0
supports_websockets = {"true" if websocket else "false"}

[mcp_servers.{SERVER_NAME}]
{_codex_server(s)}

[analytics]
enabled = false

[features]
# Without these, start-up syncs curated plugins from github.com and chatgpt.com.
plugins = false
remote_plugin = false
apps = false
""",
        encoding="utf-8",
    )
    argv = [
        _bin(s, ".bin", "codex"),
        "exec",
        "--skip-git-repo-check",
        "--ephemeral",
        "--json",
        "--dangerously-bypass-approvals-and-sandbox",
        s.prompt,
    ]
    env = {
        "CODEX_HOME": str(codex_home),
        "LAB_API_KEY": DUMMY_KEY,
        # Its MCP client logs each retry decision at debug level (stderr).
        "RUST_LOG": "codex_rmcp_client=debug,rmcp=debug",
    }
    return Launch(argv, env)


def _gemini(s: Setup) -> Launch:
    _write_json(
        s.home / ".gemini" / "settings.json",
        {
            "security": {
                "auth": {"selectedType": "gemini-api-key"},
                "folderTrust": {"enabled": False},
            },
            # trust: no confirmation prompt; --yolo would turn the Docker sandbox on.
            "mcpServers": {SERVER_NAME: {"httpUrl": s.mcp_url, "trust": True}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        },
    )
    argv = [_bin(s, ".bin", "gemini"), "-p", s.prompt, "--output-format", "stream-json"]
    env = {
        "GEMINI_CLI_HOME": str(s.home),
        "GEMINI_API_KEY": DUMMY_KEY,
        # A plain-http base URL is accepted for localhost only.
        "GOOGLE_GEMINI_BASE_URL": s.model_url,
        "GEMINI_SANDBOX": "false",
        "GEMINI_TELEMETRY_ENABLED": "false",
    }
    return Launch(argv, env)


#: What opencode and its fork Kilo Code switch off, each under its own prefix.
_OPENCODE_OFF = ("MODELS_FETCH", "AUTOUPDATE", "SHARE", "LSP_DOWNLOAD", "DEFAULT_PLUGINS")


def _opencode_like(
    s: Setup, config_name: str, binary: str, prefix: str, extra: dict[str, object]
) -> Launch:
    """opencode and the forks that kept its config schema and flags."""
    config = _write_json(
        s.home / config_name,
        {
            **extra,
            "model": "anthropic/claude-sonnet-4-5",
            "provider": {
                "anthropic": {"options": {"baseURL": f"{s.model_url}/v1", "apiKey": DUMMY_KEY}}
            },
            "mcp": {
                SERVER_NAME: {"type": "remote", "url": s.mcp_url, "enabled": True, "oauth": False}
            },
            "autoupdate": False,
            "share": "disabled",
            "permission": {"*": "allow"},
        },
    )
    argv = [_bin(s, ".bin", binary), "run", "--format", "json", "--print-logs", s.prompt]
    env = {f"{prefix}_CONFIG": str(config)}
    env.update({f"{prefix}_DISABLE_{what}": "1" for what in _OPENCODE_OFF})
    return Launch(argv, env)


def _opencode(s: Setup) -> Launch:
    return _opencode_like(
        s, "opencode.json", "opencode", "OPENCODE", {"$schema": "https://opencode.ai/config.json"}
    )


def _qwen(s: Setup) -> Launch:
    # A Gemini CLI fork: the same settings layout under ~/.qwen, the OpenAI provider by env.
    _write_json(
        s.home / ".qwen" / "settings.json",
        {
            "security": {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": False}},
            "model": {"name": "lab-model"},
            "mcpServers": {SERVER_NAME: {"httpUrl": s.mcp_url, "trust": True}},
            # Else MCP tools hide behind tool_search/tool_call and the model never sees echo.
            "tools": {"toolSearch": {"enabled": False}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        },
    )
    argv = [_bin(s, ".bin", "qwen"), "-p", s.prompt, "--output-format", "stream-json"]
    env = {
        "OPENAI_API_KEY": DUMMY_KEY,
        "OPENAI_BASE_URL": f"{s.model_url}/v1",
        "OPENAI_MODEL": "lab-model",
        "QWEN_SANDBOX": "false",
        "QWEN_TELEMETRY_ENABLED": "false",
    }
    return Launch(argv, env)


def _copilot(s: Setup) -> Launch:
    config = _write_json(
        s.home / "mcp.json",
        {"mcpServers": {SERVER_NAME: {"type": "http", "url": s.mcp_url, "tools": ["*"]}}},
    )
    argv = [
        _bin(s, ".bin", "copilot"),
        "-p",
        s.prompt,
        "--additional-mcp-config",
        f"@{config}",
        "--disable-builtin-mcps",
        "--allow-all-tools",
        "--disable-client-telemetry",
        "--no-auto-update",
        "--output-format",
        "json",
    ]
    env = {
        "COPILOT_HOME": str(s.home / ".copilot"),
        # BYOK in offline mode: no GitHub login, telemetry, web tools or update check.
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_BASE_URL": f"{s.model_url}/v1",
        "COPILOT_PROVIDER_TYPE": "openai",
        "COPILOT_PROVIDER_API_KEY": DUMMY_KEY,
        "COPILOT_MODEL": "gpt-4.1",
        "COPILOT_AUTO_UPDATE": "false",
    }
    return Launch(argv, env)


def _continue(s: Setup) -> Launch:
    cdir = s.home / ".continue"
    # JSON is YAML: the config file needs no YAML writer.
    config = _write_json(
        cdir / "config.yaml",
        {
            "name": "lab",
            "version": "0.0.1",
            "schema": "v1",
            "models": [
                {
                    "name": "lab",
                    "provider": "openai",
                    "model": "gpt-4.1",
                    "apiBase": f"{s.model_url}/v1",
                    "apiKey": DUMMY_KEY,
                    "roles": ["chat"],
                }
            ],
            "mcpServers": [{"name": SERVER_NAME, "type": "streamable-http", "url": s.mcp_url}],
        },
    )
    # The update check reads this switch from the global context.
    _write_json(cdir / "index" / "globalContext.json", {"autoUpdateCli": False})
    argv = [
        _bin(s, ".bin", "cn"),
        "-p",
        s.prompt,
        "--config",
        str(config),
        "--auto",
        "--format",
        "json",
    ]
    env = {
        "CONTINUE_GLOBAL_DIR": str(cdir),
        "CONTINUE_CLI_ENABLE_TELEMETRY": "0",
        "CONTINUE_METRICS_ENABLED": "0",
    }
    return Launch(argv, env)


def _kilocode(s: Setup) -> Launch:
    # An opencode fork: the same config schema and flags, its own KILO_ switches.
    launch = _opencode_like(s, "kilo.json", "kilo", "KILO", {})
    launch.env["KILO_TELEMETRY_LEVEL"] = "off"
    for what in ("SESSION_INGEST", "PRESENCE", "CODEBASE_INDEXING", "CLAUDE_CODE"):
        launch.env[f"KILO_DISABLE_{what}"] = "1"
    return launch


def _fast_agent(s: Setup) -> Launch:
    argv = [
        _venv_bin(s, "fast-agent"),
        "go",
        "--no-home",
        "--url",
        s.mcp_url,
        # The generic provider is OpenAI Chat Completions at any base URL.
        "--model",
        "generic.gpt-4.1",
        "--base-url",
        f"{s.model_url}/v1",
        "--no-shell",
        "--message",
        s.prompt,
    ]
    env = {"GENERIC_API_KEY": DUMMY_KEY, "GENERIC_BASE_URL": f"{s.model_url}/v1"}
    return Launch(argv, env)


def _fast_agent_legacy(s: Setup) -> Launch:
    # Left to `auto` it picks 2026-07-28 against the lab's server; this pins the session era.
    launch = _fast_agent(s)
    return Launch([*launch.argv, "--mcp-protocol", "legacy"], launch.env)


def _py_sdk(s: Setup) -> Launch:
    argv = [
        sys.executable,
        "-m",
        "mcp_layers_lab.sdk_agent",
        "--mcp",
        s.mcp_url,
        "--model",
        s.model_url,
        "--prompt",
        s.prompt,
    ]
    # The agent is this project's own code; keep an import path the caller set.
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    return Launch(argv, env)


def _py_sdk_modern(s: Setup) -> Launch:
    # The SDK's own choice (`auto`): 2026-07-28, stateless, against the lab's server.
    launch = _py_sdk(s)
    return Launch([*launch.argv, "--mode", "auto"], launch.env)


def _ts_sdk(s: Setup) -> Launch:
    node = shutil.which("node") or "node"
    argv = [node, str(LAB / "ts_agent.mjs"), s.mcp_url, s.model_url, s.prompt]
    env = {"LAB_TS_SDK": _bin(s, "@modelcontextprotocol", "sdk")}
    return Launch(argv, env)


def _node_driver(s: Setup, script: str) -> str:
    """The lab's driver script for an npm framework, where its imports resolve.

    Node resolves a bare import from the importing file's folder, not from the working
    directory or NODE_PATH, so the script is copied into the run's HOME next to a
    `node_modules` link to the pinned install.
    """
    assert s.prefix is not None
    folder = s.home / "driver"
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "node_modules"
    if not link.is_symlink():
        link.symlink_to(s.prefix / "node_modules", target_is_directory=True)
    return str(shutil.copy(LAB / script, folder / script))


def _vercel_ai(s: Setup) -> Launch:
    node = shutil.which("node") or "node"
    return Launch([node, _node_driver(s, "vercel_agent.mjs"), s.mcp_url, s.model_url, s.prompt])


#: Ax speaks both protocol eras; the lab pins one per entry (LAB_AX_ERA, read by its
#: drivers): `legacy` is 2025-11-25 with a session, so that session faults reach it;
#: `modern` is 2026-07-28, stateless (what Ax's `auto` picks against the lab's server).
AX_ERA: Final = "legacy"
AX_MODERN_ERA: Final = "modern"


def _ax_ts(s: Setup, era: str = AX_ERA) -> Launch:
    node = shutil.which("node") or "node"
    argv = [node, _node_driver(s, "ax_agent.mjs"), s.mcp_url, s.model_url, s.prompt]
    return Launch(argv, {"LAB_AX_ERA": era})


def _ax_py(s: Setup, era: str = AX_ERA) -> Launch:
    argv = [_venv_bin(s, "python"), str(LAB / "ax_agent.py"), s.mcp_url, s.model_url, s.prompt]
    return Launch(argv, {"LAB_AX_ERA": era})


def _ax_ts_modern(s: Setup) -> Launch:
    return _ax_ts(s, AX_MODERN_ERA)


def _ax_py_modern(s: Setup) -> Launch:
    return _ax_py(s, AX_MODERN_ERA)


def _langchain_mcp(s: Setup) -> Launch:
    argv = [
        _venv_bin(s, "python"),
        str(LAB / "langgraph_agent.py"),
        s.mcp_url,
        s.model_url,
        s.prompt,
    ]
    # LangSmith tracing is off unless asked for; said so anyway, for any default to come.
    return Launch(argv, {"LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false"})


def _mcp_use(s: Setup) -> Launch:
    argv = [_venv_bin(s, "python"), str(LAB / "mcp_use_agent.py"), s.mcp_url, s.model_url, s.prompt]
    # PostHog and Scarf telemetry are on unless this says otherwise.
    return Launch(argv, {"MCP_USE_ANONYMIZED_TELEMETRY": "false"})


def _openai_agents_js(s: Setup) -> Launch:
    node = shutil.which("node") or "node"
    argv = [node, _node_driver(s, "openai_agents_agent.mjs"), s.mcp_url, s.model_url, s.prompt]
    # Traces go to api.openai.com unless switched off (the driver also calls
    # setTracingDisabled).
    return Launch(argv, {"OPENAI_AGENTS_DISABLE_TRACING": "1"})


#: The model name the CLIs below are given for the fake model (it answers any name).
LAB_MODEL: Final = "lab-model"


def _cline(s: Setup) -> Launch:
    # What `cline auth -p openai -k KEY -m MODEL -b URL` and `cline mcp add echo --transport
    # streamable-http URL --yes` write (the provider becomes openai-compatible), written
    # directly: the same files, no extra run of the CLI.
    settings = s.home / ".cline" / "data" / "settings"
    _write_json(
        settings / "providers.json",
        {
            "version": 1,
            "lastUsedProvider": "openai-compatible",
            "modes": {},
            "providers": {
                "openai-compatible": {
                    "settings": {
                        "provider": "openai-compatible",
                        "apiKey": DUMMY_KEY,
                        "model": LAB_MODEL,
                        "baseUrl": f"{s.model_url}/v1",
                    },
                    # Required: without it the file is taken as invalid and replaced by
                    # the default provider (Cline's own API, api.cline.bot).
                    "updatedAt": "2026-12-02T00:00:00.000Z",
                    "tokenSource": "manual",
                }
            },
        },
    )
    _write_json(
        settings / "cline_mcp_settings.json",
        {"mcpServers": {SERVER_NAME: {"transport": {"type": "streamableHttp", "url": s.mcp_url}}}},
    )
    # Its OpenTelemetry export (otel.cline.bot) is on unless opted out here; the CLI's own
    # update check is off here and by CLINE_NO_AUTO_UPDATE.
    _write_json(
        settings / "global-settings.json", {"telemetryOptOut": True, "autoUpdateEnabled": False}
    )
    # Its feature flags come from PostHog (data.cline.bot), and there is no switch for it;
    # a cache it wrote itself this very moment is fresh, so it asks for none.
    _write_json(
        s.home / ".cline" / "data" / "cache" / "feature-flags.json",
        {
            "version": 2,
            "updatedAt": int(time.time() * 1000),
            "userId": None,
            "flagsPayload": {"featureFlags": {}, "featureFlagPayloads": {}},
        },
    )
    # A prompt runs the task headless in act mode with auto-approve on (the default).
    argv = [_bin(s, ".bin", "cline"), "--json", "--cwd", str(s.work), s.prompt]
    env = {
        # Else it checks npm for a newer CLI at start-up and may install it.
        "CLINE_NO_AUTO_UPDATE": "1",
    }
    # After the task it starts a hub daemon (`cline --cline-hub-daemon`, setsid) for the
    # next run and notes its PID here; nothing else would stop it.
    hub = s.home / ".cline" / "data" / "locks" / "hub" / "production.json"
    return Launch(argv, env, daemons=(hub,))


def _droid(s: Setup) -> Launch:
    factory = s.home / ".factory"
    # Bring your own key: a custom model at the fake model, no Factory login.
    _write_json(
        factory / "settings.json",
        {
            "customModels": [
                {
                    "model": LAB_MODEL,
                    "displayName": "lab",
                    "baseUrl": f"{s.model_url}/v1",
                    "apiKey": DUMMY_KEY,
                    "provider": "generic-chat-completion-api",
                    "maxOutputTokens": 4096,
                }
            ],
        },
    )
    # Its MCP tools reach the model as `echo___echo`, deferred behind ToolSearch (the fake
    # model loads it first: lab/fake_model.py).
    _write_json(
        factory / "mcp.json", {"mcpServers": {SERVER_NAME: {"type": "http", "url": s.mcp_url}}}
    )
    argv = [
        _bin(s, "@factory", "cli-linux-x64", "bin", "droid"),
        "exec",
        # Headless exec is read-only unless told; an MCP tool needs the permission too.
        "--skip-permissions-unsafe",
        "-m",
        f"custom:{LAB_MODEL}",
        "-o",
        "json",
        "--cwd",
        str(s.work),
        s.prompt,
    ]
    env = {
        # Air-gapped: no calls to Factory's API (api.factory.ai) nor to its OpenTelemetry
        # collector (both looked up without it, none with it).
        "FACTORY_AIRGAP_ENABLED": "true",
        # And should a telemetry client start anyway: its base URL is a dead loopback port.
        "FACTORY_TELEMETRY_INGEST_BASE_URL": "http://127.0.0.1:9",
        "FACTORY_DROID_AUTO_UPDATE_ENABLED": "false",
        "FACTORY_OTEL_ENABLED": "false",
        # No system keyring (D-Bus) for credentials it does not need with a custom model.
        "FACTORY_DISABLE_KEYRING": "1",
    }
    return Launch(argv, env)


PY_SDK_VERSION: Final = "2.3.0"
TS_SDK_VERSION: Final = "1.32.2"

CLIENTS: Final[tuple[Client, ...]] = (
    Client(
        "claude-code",
        "2.1.197",
        "claude-code@2.1.197",
        "anthropic",
        _claude,
        npm="@anthropic-ai/claude-code",
        stdio=True,
    ),
    Client(
        "codex",
        "0.171.0",
        "codex-mcp-client@0.171.0",
        "responses",
        _codex,
        npm="@openai/codex",
        stdio=True,
    ),
    Client(
        "codex-ws",
        "0.171.0",
        "codex-mcp-client@0.171.0",
        "responses",
        _codex_ws,
        npm="@openai/codex",
        shares="codex",
    ),
    Client(
        "gemini-cli",
        "0.61.0",
        "gemini-cli-mcp-client@0.61.0",
        "gemini",
        _gemini,
        npm="@google/gemini-cli",
    ),
    Client("opencode", "1.18.33", "opencode@1.18.33", "anthropic", _opencode, npm="opencode-ai"),
    Client("copilot", "1.0.102", "copilot-cli@1.0.102", "chat", _copilot, npm="@github/copilot"),
    Client(
        "continue",
        "1.5.47",
        "continue-cli-client@1.0.0",
        "chat",
        _continue,
        npm="@continuedev/cli",
        known_lookup="a version check of api.continue.dev at start-up, hard-coded, with no "
        "switch (CONTINUE_API_BASE does not move it)",
    ),
    Client(
        "kilocode",
        "7.7.7",
        "kilo@7.7.7",
        "anthropic",
        _kilocode,
        npm="@kilocode/cli",
        known_lookup="a name lookup at start-up that none of its KILO_ switches (telemetry, "
        "models fetch, updates, share, session ingest, presence) turns off; the host is not "
        "known (a Bun binary: no lookup hook)",
    ),
    Client(
        "fast-agent",
        "0.10.48",
        "fast-agent-mcp@0.10.48",
        "chat",
        _fast_agent,
        pypi="fast-agent-mcp",
    ),
    Client(
        "fast-agent-legacy",
        "0.10.48",
        "fast-agent-mcp@0.10.48",
        "chat",
        _fast_agent_legacy,
        pypi="fast-agent-mcp",
        shares="fast-agent",
    ),
    Client(
        "qwen-code",
        "0.24.4",
        "qwen-cli-mcp-client-echo@0.0.1",
        "chat",
        _qwen,
        npm="@qwen-code/qwen-code",
    ),
    Client(
        "py-sdk",
        PY_SDK_VERSION,
        f"lab-py-sdk@{PY_SDK_VERSION}",
        "anthropic",
        _py_sdk,
        agent=False,
    ),
    Client(
        "py-sdk-modern",
        PY_SDK_VERSION,
        f"lab-py-sdk@{PY_SDK_VERSION}",
        "anthropic",
        _py_sdk_modern,
        agent=False,
    ),
    Client(
        "ts-sdk",
        TS_SDK_VERSION,
        f"lab-ts-sdk@{TS_SDK_VERSION}",
        "anthropic",
        _ts_sdk,
        npm="@modelcontextprotocol/sdk",
        agent=False,
        # The demo's TypeScript client pins the same SDK version (`make demo` and the
        # end-to-end tests install it there).
        reuse=TS_CLIENT_DIR,
    ),
    # Agent frameworks with MCP transport code of their own (issue 31), each driven by a
    # small script of the lab's (lab/*_agent.*) through its own agent loop.
    Client(
        "vercel-ai",
        "6.0.326",
        "ai-sdk-mcp-client@1.0.0",
        "chat",
        _vercel_ai,
        npm="ai",
        # ai@7 and @ai-sdk/mcp@2 need Node 22; these are the newest for Node 20.
        extra=("@ai-sdk/mcp@1.0.102", "@ai-sdk/openai-compatible@2.0.92", "zod@4.1.12"),
        telemetry="none to switch off: its OpenTelemetry spans are opt-in "
        "(`experimental_telemetry`, not set) and the driver names its own provider, so the "
        "AI Gateway (`@ai-sdk/gateway`) is never called",
    ),
    Client(
        "ax-ts",
        "24.0.21",
        "AxMCPClient@1.0.0",
        "chat",
        _ax_ts,
        npm="@ax-llm/ax",
        telemetry="none to switch off: no usage reporting; its OpenTelemetry tracer and meter "
        "are opt-in (none is given)",
    ),
    Client(
        "ax-py",
        "25.4.6",
        "AxMCPClient@1.0.0",
        "chat",
        _ax_py,
        pypi="axllm",
        telemetry="none to switch off: standard library only, no usage reporting or tracer",
    ),
    # The same two in the stateless era (2026-07-28), from the same installs.
    Client(
        "ax-ts-modern",
        "24.0.21",
        "AxMCPClient@1.0.0",
        "chat",
        _ax_ts_modern,
        npm="@ax-llm/ax",
        shares="ax-ts",
        telemetry="as ax-ts",
    ),
    Client(
        "ax-py-modern",
        "25.4.6",
        "AxMCPClient@1.0.0",
        "chat",
        _ax_py_modern,
        pypi="axllm",
        shares="ax-py",
        telemetry="as ax-py",
    ),
    # New SDK lines: the Python SDK 1.x under LangChain, the TypeScript SDK v2 under OpenAI's.
    Client(
        "langchain-mcp",
        "0.3.2",
        "mcp@0.1.0",
        "chat",
        _langchain_mcp,
        pypi="langchain-mcp-adapters",
        extra=("langgraph==1.2.24", "langchain-openai==1.7.4", "mcp==1.30.0", "httpx==0.29.0"),
        telemetry="LangSmith tracing is opt-in; `LANGSMITH_TRACING=false` and "
        "`LANGCHAIN_TRACING_V2=false` say so explicitly",
    ),
    Client(
        "mcp-use",
        "1.7.1",
        "mcp-use@1.7.1",
        "chat",
        _mcp_use,
        pypi="mcp-use",
        extra=("langchain-openai==1.7.4", "mcp==1.30.0", "httpx==0.29.0"),
        telemetry="PostHog and Scarf, on by default: `MCP_USE_ANONYMIZED_TELEMETRY=false`",
    ),
    Client(
        "openai-agents-js",
        "0.20.0",
        # It sends the name of the server it was given (the driver's "echo") as its own.
        "echo@1.0.0",
        "chat",
        _openai_agents_js,
        npm="@openai/agents",
        extra=(
            "openai@7.59.0",
            "@modelcontextprotocol/client@2.4.0",
            "zod@4.1.12",
        ),
        telemetry="traces are exported to api.openai.com by default: "
        "`OPENAI_AGENTS_DISABLE_TRACING=1` and `setTracingDisabled(true)` in the driver",
    ),
    # Coding-agent CLIs in Bun binaries (issue 31), each with the TS SDK 1.x underneath.
    Client(
        "cline",
        "3.0.65",
        # Its MCP client is the SDK core's, which names itself so (version unset).
        "@cline/core@0.0.0",
        "chat",
        _cline,
        npm="cline",
        telemetry="OpenTelemetry export to otel.cline.bot and PostHog feature flags from "
        "data.cline.bot, both on by default: `telemetryOptOut: true` in its global "
        "settings, and a fresh feature-flag cache (no switch exists); `CLINE_NO_AUTO_UPDATE=1`",
    ),
    Client(
        "droid",
        "0.225.2",
        "factory-cli@0.225.2",
        "chat",
        _droid,
        # The wrapper `@factory/cli` 0.225.1 (its only version) pins a cli-linux-x64 that
        # was never published: the binary package is installed on its own.
        npm="@factory/cli-linux-x64",
        telemetry="calls to api.factory.ai and an OpenTelemetry collector by default: "
        "`FACTORY_AIRGAP_ENABLED=true` stops both; also `FACTORY_TELEMETRY_INGEST_BASE_URL` "
        "at a dead loopback port, `FACTORY_OTEL_ENABLED=false`, "
        "`FACTORY_DROID_AUTO_UPDATE_ENABLED=false`",
    ),
)

BY_NAME: Final[dict[str, Client]] = {c.name: c for c in CLIENTS}


def client(name: str) -> Client:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown client {name!r}; clients are {', '.join(BY_NAME)}") from None


# ------------------------------------------------------------------ installing


def default_cache() -> Path:
    env = os.environ.get("MCP_LAYERS_LAB_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mcp-layers" / "lab"


def _installed_version(prefix: Path, package: str) -> str | None:
    try:
        meta = json.loads((prefix / "node_modules" / package / "package.json").read_text())
    except (OSError, ValueError):
        return None
    version = meta.get("version") if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def _split_pin(pin: str, sep: str) -> tuple[str, str]:
    """`@scope/name@1.2.3` → (`@scope/name`, `1.2.3`); `name==1.2.3` likewise with `==`."""
    name, _, version = pin.rpartition(sep)
    if not name or not version:
        raise ValueError(f"{pin!r} is not pinned as name{sep}version")
    return name, version


def _npm_complete(c: Client, prefix: Path) -> bool:
    """The prefix holds the pinned package and every pinned extra, each at its version."""
    assert c.npm is not None
    pins = [(c.npm, c.version), *(_split_pin(e, "@") for e in c.extra)]
    return all(_installed_version(prefix, name) == version for name, version in pins)


def install(c: Client, cache: Path, log: Callable[[str], None] = print) -> Path | None:
    """Make sure the pinned client is there; the npm prefix it lives in (None for Python).

    npm installs once per version (``npm install --no-save --prefix <cache>/<name>@<version>``);
    a prefix that already holds the pinned version is used as it is.
    """
    if c.pypi is not None:
        return _install_pypi(c, c.pypi, cache, log)
    if c.npm is None:
        have = importlib.metadata.version("mcp")
        if have != c.version:
            raise InstallError(
                f"{c.name}: this environment has mcp {have}, the lab pins {c.version}; "
                f"install it with: pip install mcp=={c.version}"
            )
        return None
    if c.reuse is not None and _npm_complete(c, c.reuse):
        return c.reuse
    prefix = cache / c.install_label
    if _npm_complete(c, prefix):
        return prefix
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError(f"{c.name}: npm is not on PATH; install Node.js (20 or later)")
    prefix.mkdir(parents=True, exist_ok=True)
    log(f"installing {' '.join([f'{c.npm}@{c.version}', *c.extra])} into {prefix} (once)")
    env = {
        **os.environ,
        "npm_config_update_notifier": "false",
        "npm_config_fund": "false",
        "npm_config_audit": "false",
    }
    pins = [f"{c.npm}@{c.version}", *c.extra]
    try:
        prefix.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [npm, "install", "--no-save", "--prefix", str(prefix), *pins],
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT_S,
            env=env,
            # npm tells install scripts where the install was started (INIT_CWD), and some
            # write there (@ax-llm/ax puts AI-assistant "skills" in INIT_CWD/.claude): the
            # install starts in its own prefix, so nothing lands in the caller's folder.
            cwd=prefix,
        )
    except subprocess.TimeoutExpired as e:
        raise InstallError(f"{c.name}: npm install took over {NPM_TIMEOUT_S:.0f} s") from e
    if done.returncode != 0 or not _npm_complete(c, prefix):
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise InstallError(f"{c.name}: npm install failed ({done.returncode}):\n{tail}")
    return prefix


def _venv_version(prefix: Path, package: str) -> str | None:
    python = prefix / "bin" / "python"
    if not python.exists():
        return None
    probe = f"import importlib.metadata as m; print(m.version({package!r}))"
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=60)
    return done.stdout.strip() if done.returncode == 0 else None


def _install_pypi(c: Client, package: str, cache: Path, log: Callable[[str], None]) -> Path:
    """A virtualenv of the client's own (its own MCP SDK, not this environment's)."""
    prefix = cache / c.install_label
    pins = [(package, c.version), *(_split_pin(e, "==") for e in c.extra)]
    if all(_venv_version(prefix, name) == version for name, version in pins):
        return prefix
    # The interpreter this environment was made from (3.12 or later, as the project needs).
    base = getattr(sys, "_base_executable", None) or sys.executable
    log(f"installing {' '.join([f'{package}=={c.version}', *c.extra])} into {prefix} (once)")
    try:
        steps = (
            [base, "-m", "venv", "--clear", str(prefix)],
            [
                str(prefix / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                f"{package}=={c.version}",
                *c.extra,
            ],
        )
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
            if done.returncode != 0:
                tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
                raise InstallError(f"{c.name}: {' '.join(step[:4])} failed:\n{tail}")
    except subprocess.TimeoutExpired as e:
        raise InstallError(f"{c.name}: pip install took over {NPM_TIMEOUT_S:.0f} s") from e
    for name, version in pins:
        if _venv_version(prefix, name) != version:
            raise InstallError(f"{c.name}: {name} {version} is not in {prefix} after pip install")
    return prefix
