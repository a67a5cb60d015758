"""The lab's faults: each one a scenario name and the addon settings that make it happen.

Where the addon has a preset for the failure (addon/mcp_layers_core/faults/parse.py,
docs/faults.md) the lab uses it by name, so the lab and the documented presets cannot
drift apart. The per-method 503s have no preset (the `errors.unavailable` preset fails
all three methods at once, for ever: a server that is down); they are inline rules that
fail the first call of their method in the run, so the record shows whether the client
retried and whether the retry got through. `counter=global` is "once per run": every run
has its own mitmdump and one client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mcp_layers_core.faults.parse import preset as preset_rules
from mcp_layers_core.faults.rules import IdleCut


@dataclass(frozen=True)
class Fault:
    name: str  #: the scenario label (`mcp_scenario`) and the matrix row
    what: str  #: one line for the matrix legend
    preset: str | None = None  #: `--set mcp_faults=<preset>`
    rule: str | None = None  #: `--set mcp_fault=<inline rule>`
    #: the JSON-RPC method the fault hits (its attempts are counted); None: nothing is hit
    method: str | None = "tools/call"
    #: the first tools/call fails in a way the model can see: worth a model-driven re-issue run
    reaches_model: bool = True
    #: methods the fault must fail every time (a success there means the fault misfired)
    always: tuple[str, ...] = ()
    #: the fault acts on an SSE answer only (a JSON answer leaves it nothing to cut)
    sse: bool = False
    #: seconds the fake model holds its answer after the tool result: the client's MCP
    #: session sits idle meanwhile, which an idle-stream fault needs (agents finish in ~1 s)
    model_hold_s: float = 0.0
    #: the fault acts on the client's standby GET stream (none opened: nothing to act on)
    get_stream: bool = False

    @property
    def idle_ms(self) -> int | None:
        """How long a stream must sit silent before this fault acts on it (an `idle_cut`
        rule's wait), from the preset's own rules; None: it does not wait for silence."""
        if self.preset is None:
            return None
        waits = [
            r.action.after_ms for r in preset_rules(self.preset) if isinstance(r.action, IdleCut)
        ]
        return max(waits) if waits else None

    def sets(self) -> list[str]:
        """The mitmdump `--set` values (without the scenario label)."""
        out = []
        if self.preset is not None:
            out.append(f"mcp_faults={self.preset}")
        if self.rule is not None:
            out.append(f"mcp_fault={self.rule}")
        return out

    def describe(self) -> str:
        parts = []
        if self.preset is not None:
            parts.append(f"preset `{self.preset}`")
        if self.rule is not None:
            parts.append(f"rule `{self.rule}`")
        return ", ".join(parts) or "no rule"


FAULTS: Final[tuple[Fault, ...]] = (
    Fault("none", "no fault", preset="none", method="tools/call", reaches_model=False),
    Fault(
        "initialize_503",
        "the first `initialize` answered 503",
        rule="http_status=503 method=initialize nth=1 counter=global name=lab.initialize_503",
        method="initialize",
        reaches_model=False,
    ),
    Fault(
        "tools_list_503",
        "the first `tools/list` answered 503",
        rule="http_status=503 method=tools/list nth=1 counter=global name=lab.tools_list_503",
        method="tools/list",
        reaches_model=False,
    ),
    Fault(
        "tools_call_503",
        "the first `tools/call` answered 503",
        preset="errors.http_status_sequence",
    ),
    Fault(
        "tools_call_429",
        "the first `tools/call` answered 429 with `Retry-After: 2`",
        preset="errors.rate_limited",
    ),
    Fault(
        "connection_dropped",
        "the first `tools/call`'s connection closed without an answer",
        preset="errors.connection_dropped",
    ),
    Fault(
        "jsonrpc_error",
        "the first `tools/call` answered HTTP 200 with JSON-RPC -32603",
        preset="errors.jsonrpc_error",
    ),
    Fault(
        "tool_error",
        "the first `tools/call` answered `isError: true`",
        preset="errors.tool_error",
    ),
    Fault(
        "session_404",
        "the first `tools/call` answered 404 (session expired), and every later request of "
        "that session",
        preset="errors.session_expired",
    ),
    Fault(
        "stream_cut",
        "the first `tools/call`'s SSE answer cut just before the result (the server "
        "redelivers it to a client that resumes with `Last-Event-ID`)",
        preset="errors.stream_cut",
        sse=True,
    ),
    Fault(
        "unavailable",
        "every `initialize`, `tools/list` and `tools/call` answered 503 (server down)",
        preset="errors.unavailable",
        method="initialize",
        reaches_model=False,
        always=("initialize", "tools/list", "tools/call"),
    ),
    # Hangs (issue 28): `mcp-layers hangs` must name who was waited on in each.
    Fault(
        "tools_call_hang",
        "the first `tools/call` never answered (held 10 min at the proxy: past the run's timeout)",
        rule="delay=600000 method=tools/call nth=1 counter=global name=lab.tools_call_hang",
        reaches_model=False,
    ),
    Fault(
        "model_hang",
        "the model holds its answer after the tool result for 25 s (a stalled model API)",
        preset="none",  # no rule at the proxy: the fake model stalls
        method=None,
        reaches_model=False,
        model_hold_s=25.0,
    ),
    # What real middleboxes do (docs/faults.md, "Middlebox presets"); `mcp-layers verdicts`
    # judges each client's answer to them in lab/VERDICTS.md.
    Fault(
        "get_405",
        "every GET event stream answered 405 (a gateway that forwards only POSTs)",
        preset="middlebox.get_405",
        method=None,
        reaches_model=False,
        get_stream=True,
    ),
    Fault(
        "idle_cut",
        "the standby GET stream's connection closed after 3 s of silence (a CDN's idle "
        "timeout); the model holds its answer 8 s meanwhile",
        preset="middlebox.idle_cut",
        method=None,
        reaches_model=False,
        model_hold_s=8.0,
        get_stream=True,
    ),
    Fault(
        "graceful_close",
        "the standby GET stream ended cleanly after 3 s of silence; the model holds its "
        "answer 8 s meanwhile",
        preset="middlebox.graceful_close",
        method=None,
        reaches_model=False,
        model_hold_s=8.0,
        get_stream=True,
    ),
    Fault(
        "resume_refused",
        "the first `tools/call`'s SSE answer cut before the result; a `Last-Event-ID` "
        "resumption answered 404",
        preset="middlebox.resume_refused",
        sse=True,
    ),
    Fault(
        "tools_call_429_date",
        "the first `tools/call` answered 429 with `Retry-After` as an HTTP date 3 s ahead",
        preset="middlebox.rate_limited_date",
    ),
    Fault(
        "tools_call_503_retry_after",
        "the first `tools/call` answered 503 with `Retry-After: 2`",
        preset="middlebox.unavailable_retry_after",
    ),
)

BY_NAME: Final[dict[str, Fault]] = {f.name: f for f in FAULTS}


def fault(name: str) -> Fault:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown fault {name!r}; faults are {', '.join(BY_NAME)}") from None
