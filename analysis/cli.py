"""The `mcp-layers` command: a thin layer over the engines and the figures' queries.

Each command loads the inputs into an engine's `records` table (DuckDB by default, Spark
with `--engine spark`), runs its queries, and hands `(headers, rows)` to the one
renderer. Diagnostics go to stderr, data to stdout; exit statuses are in `exitcodes`.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import functools
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, NoReturn, TextIO

import click
import orjson

# Commands import their job modules themselves: `mcp-layers --help` and a small summary
# should not pay for what they do not use.
from . import answers, inputs
from .errors import AnalysisError, InputError, NewerRecordVersion
from .exitcodes import ExitStatus
from .filters import Filters, frozen, parse_time
from .load import Engine, Report
from .render import OutputFormat, render, use_color
from .replay.command import replay as replay_command

if TYPE_CHECKING:
    from pathlib import Path

    from .bundle import Subject, Versions

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class UsageFailure(click.ClickException):
    """An error the user can fix (a bad argument, an unreadable input): exit 2."""

    exit_code = ExitStatus.USAGE_ERROR


class LocatedFailure(UsageFailure):
    """An error about one line of one input, printed as `path:lineno: message`."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(self.format_message(), err=True, file=file)


# --------------------------------------------------------------------- shared options


@dataclass(frozen=True, slots=True)
class Reading:
    """How to read and what to print: what every command's shared options say."""

    paths: tuple[str, ...]
    fmt: OutputFormat  # the renderer's format (unused when `ci_format` is set)
    filters: Filters
    jobs: int | None
    strict: bool
    lenient: bool
    progress: bool
    engine: str = "duckdb"
    spark_master: str | None = None
    #: `--format junit|sarif` (`verdicts` only): a CI system's format, not a table.
    ci_format: str | None = None
    #: Read and write the records cache (analysis/cache.py); `--no-cache` says not to.
    cache: bool = True


#: The formats only `verdicts` writes (verdict_formats.CI_FORMATS: named here so that
#: `--help` does not import the module).
CI_FORMATS = ("junit", "sarif")


class FormatChoice(click.Choice[str]):
    """`--format`: a command's formats; a CI format elsewhere is refused by name, so that
    the message says where it belongs instead of just listing the choices."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if value in CI_FORMATS and value not in self.choices:
            command = ctx.info_name if ctx is not None else "this command"
            self.fail(
                f"{value!r} is written by `mcp-layers verdicts` only, not by {command}",
                param,
                ctx,
            )
        return super().convert(value, param, ctx)


def _time_option(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return parse_time(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not an ISO-8601 date or time; try 2026-11-30 or 2026-11-30T15:02:51Z"
        ) from None


def ci_reading_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`reading_options`, with the CI formats (junit, sarif) among the formats."""
    return reading_options(fn, ci_formats=True)


def reading_options(fn: Callable[..., Any], *, ci_formats: bool = False) -> Callable[..., Any]:
    """PATHS and the options every command shares, gathered into one `reading` argument."""
    formats = [f.value for f in OutputFormat] + (list(CI_FORMATS) if ci_formats else [])
    format_help = "Output format. JSON is one array of objects."
    if ci_formats:
        format_help += " junit and sarif are for CI (docs/cli.md, Gating CI on verdicts)."
    options = [
        click.argument("paths", nargs=-1, required=True, metavar="PATH..."),
        click.option(
            "-f",
            "--format",
            "fmt",
            type=FormatChoice(formats),
            default=OutputFormat.TABLE.value,
            show_default=True,
            help=format_help,
        ),
        click.option(
            "--client",
            multiple=True,
            metavar="NAME[@VERSION]",
            help="Only this client (every version when no @VERSION). Repeatable.",
        ),
        click.option("--method", multiple=True, help="Only this JSON-RPC method. Repeatable."),
        click.option("--tool", multiple=True, help="Only calls of this tool. Repeatable."),
        click.option("--scenario", multiple=True, help="Only this scenario label. Repeatable."),
        click.option(
            "--since",
            callback=_time_option,
            metavar="TIME",
            help="Only records at or after TIME (ISO-8601, UTC unless it says).",
        ),
        click.option(
            "--until", callback=_time_option, metavar="TIME", help="Only records before TIME."
        ),
        click.option(
            "-j",
            "--jobs",
            type=click.IntRange(min=1),
            default=None,
            help="Threads the engine uses [default: the cores available].",
        ),
        click.option(
            "--engine",
            type=click.Choice(["duckdb", "spark"]),
            default="duckdb",
            show_default=True,
            help="Run the queries on embedded DuckDB, or on Apache Spark "
            "(pip install mcp-layers[spark]).",
        ),
        click.option(
            "--spark-master",
            metavar="URL",
            default=None,
            help="Spark master (local[*], spark://…) or Spark Connect (sc://…) "
            "[default: $SPARK_REMOTE, $MASTER, else local[*]].",
        ),
        click.option(
            "--strict",
            is_flag=True,
            help="Exit 2 if any line is not a record (they are skipped either way).",
        ),
        click.option(
            "--lenient",
            is_flag=True,
            help="Read an input even when most of its lines are not records "
            "(by default that exits 2: it is probably not a recording).",
        ),
        click.option(
            "--progress/--no-progress",
            default=True,
            help="A progress bar on stderr for big inputs, when it is a terminal.",
        ),
        click.option(
            "--no-cache",
            is_flag=True,
            help="Read the inputs themselves: neither read nor write the caches of answers "
            "and records (mcp-layers cache info).",
        ),
    ]

    def wrapper(**kwargs: Any) -> Any:
        fmt = kwargs.pop("fmt")
        ci_format = fmt if fmt in CI_FORMATS else None
        reading = Reading(
            paths=kwargs.pop("paths"),
            fmt=OutputFormat.JSON if ci_format else OutputFormat(fmt),
            filters=Filters(
                clients=frozen(kwargs.pop("client")),
                methods=frozen(kwargs.pop("method")),
                tools=frozen(kwargs.pop("tool")),
                scenarios=frozen(kwargs.pop("scenario")),
                since=kwargs.pop("since"),
                until=kwargs.pop("until"),
            ),
            jobs=kwargs.pop("jobs"),
            strict=kwargs.pop("strict"),
            lenient=kwargs.pop("lenient"),
            progress=kwargs.pop("progress"),
            engine=kwargs.pop("engine"),
            spark_master=kwargs.pop("spark_master"),
            ci_format=ci_format,
            cache=not kwargs.pop("no_cache"),
        )
        return fn(reading=reading, **kwargs)

    wrapper = functools.wraps(fn)(wrapper)  # keeps options already on fn (__click_params__)
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


#: What `--by` can group on (the record field each reads is in summary.DIMENSIONS).
BY_CHOICES = ("client", "version", "scenario")


def by_option(*, repeatable: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    help_text = (
        "Group by: client (name@version), version (negotiated protocol version) or scenario."
    )
    if repeatable:
        help_text += " Give it twice for one group per pair, e.g. --by client --by scenario."
    return click.option(
        "--by",
        type=click.Choice(BY_CHOICES),
        multiple=True,
        default=("client",),
        show_default=True,
        help=help_text,
    )


top_option = click.option(
    "--top",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="JSON-RPC error codes and HTTP statuses listed per group.",
)


# --------------------------------------------------------------------- reading


@contextlib.contextmanager
def loaded(
    reading: Reading, columns: tuple[str, ...] | None = None, *, shared: bool = False
) -> Iterator[tuple[Engine, Report]]:
    """An engine with the inputs as its `records` table, and what reading found.

    `columns`: what the queries read (None: everything). `shared`: several queries follow,
    so the engine reads the inputs once for all of them; otherwise the one query reads
    them in place. Bad lines are reported when the body has run (a query over the inputs
    in place is what finds them). Diagnostics go to stderr. Raises UsageFailure.
    """
    try:
        sources = inputs.expand(reading.paths)
    except InputError as exc:
        raise UsageFailure(str(exc)) from None
    if any(s.path is None for s in sources) and inputs.stdin_is_terminal():
        raise UsageFailure("'-' reads records from stdin, but nothing is piped in")
    on_disk = all(s.path is not None for s in sources)
    answers.note_read(
        reading.paths,
        [(os.path.realpath(s.path), s.name) for s in sources if s.path is not None],
        cached=reading.cache and reading.engine == "duckdb" and on_disk,
    )
    engine = open_engine(reading)
    try:
        try:
            report = engine.load(sources, columns, _warn, shared=shared)
            yield engine, report
        except NewerRecordVersion as exc:
            raise LocatedFailure(str(exc)) from None
        except AnalysisError as exc:
            raise UsageFailure(str(exc)) from None
        _judge(reading, report)
    finally:
        engine.close()


def _counted(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _bad_lines_read(bad_lines: int, records: int) -> str:
    """`1 bad line skipped (1 record read)`, in English either way."""
    return f"{_counted(bad_lines, 'bad line')} skipped ({_counted(records, 'record')} read)"


def _judge(reading: Reading, report: Report) -> None:
    """What reading found, on stderr; UsageFailure when it is too much to go on."""
    for message in report.messages:
        _warn(message)
    if report.bad_lines:
        _warn(f"mcp-layers: {_bad_lines_read(report.bad_lines, report.records)}")
        if reading.strict:
            raise UsageFailure("bad lines in the input (--strict)")
        if report.bad_lines > report.records and not reading.lenient:
            raise UsageFailure(
                f"most lines of the input are not records ({report.bad_lines} bad, "
                f"{report.records} read): is it a recording? (--lenient reads it anyway)"
            )


def open_engine(reading: Reading) -> Engine:
    if reading.engine == "spark":
        from .spark import SparkEngine

        try:
            return SparkEngine(master=reading.spark_master)
        except ImportError:
            raise UsageFailure(
                "--engine spark needs pyspark: pip install 'mcp-layers[spark]'"
            ) from None
    from .duck import DuckEngine

    return DuckEngine(threads=reading.jobs, cache=reading.cache)


def _warn(message: str) -> None:
    click.echo(message, err=True)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def nothing_matched(reading: Reading, report: Report, what: str = "record") -> NoReturn:
    if report.empty:
        _warn("mcp-layers: no records in the input")
    elif reading.filters.active:
        _warn(f"mcp-layers: no {what} matched the filters")
    else:
        _warn(f"mcp-layers: no {what} in the input")
    raise SystemExit(ExitStatus.NOTHING_MATCHED)


def write(reading: Reading, headers: Any, rows: Iterator[Any] | list[Any]) -> int:
    out = sys.stdout
    color = reading.fmt is OutputFormat.TABLE and use_color(out)
    with reader_may_leave():
        return render(headers, rows, reading.fmt, out, color=color)


@contextlib.contextmanager
def reader_may_leave() -> Iterator[None]:
    """Stop quietly, exit 0, when the reader of stdout goes away (`| head`).

    Click would exit 1 for it, which here means "nothing matched".
    """
    try:
        yield
    except BrokenPipeError:
        # Point stdout at /dev/null so Python's final flush does not complain.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(ExitStatus.OK) from None


# --------------------------------------------------------------------- commands


@click.group(name="mcp-layers", context_settings=CONTEXT)
@click.version_option(package_name="mcp-layers", prog_name="mcp-layers")
def cli() -> None:
    """Read mcp-layers recordings: where MCP calls failed, and how each client reacted.

    PATH is a recording (.jsonl or .jsonl.gz), a directory of them (searched recursively),
    a glob, or - for stdin; several are read as one. Exit status: 0 ok, 1 nothing matched,
    2 usage or input error.
    """


@cli.command(short_help="Outcomes by layer, method and tool; errors; latency.")
@reading_options
@by_option(repeatable=True)
@top_option
def summary(reading: Reading, by: tuple[str, ...], top: int) -> None:
    """Per client: calls and outcomes by layer, method and tool; errors; latency.

    Every attempt is a call here. Injected faults are counted apart from organic calls
    (origin column). Latency percentiles are within 0.5% of the exact values.

    \b
    Example:
        mcp-layers summary recordings/
        mcp-layers summary rec.jsonl --client peer-py-client --format json
    """
    from . import summary as summary_mod
    from .queries import SUMMARY_COLUMNS

    with loaded(reading, SUMMARY_COLUMNS) as (engine, report):
        rows = summary_mod.rows(engine, by, reading.filters, top=top)
        if not rows:
            report.settle()
    write(reading, summary_mod.headers(by), rows)
    if not rows:
        nothing_matched(reading, report, "request")


@cli.command(short_help="What each client retried, how, and whether it made sense.")
@reading_options
@by_option(repeatable=True)
def retries(reading: Reading, by: tuple[str, ...]) -> None:
    """Per client: which failures it retried, how, and whether that made sense.

    Shares of failed calls retried (by outcome), attempts per logical call, retry delays,
    resend/reissue/reinit, Retry-After honoured, unsafe and futile retries, sessions lost to
    a 404 and never re-initialised, input-required results continued and completed.

    \b
    Example:
        mcp-layers retries recordings/ --scenario flaky-503
        mcp-layers retries rec.jsonl --format csv > retries.csv
    """
    from . import forensics
    from . import retries as retries_mod
    from .queries import RETRY_COLUMNS
    from .verdicts import COLUMNS as AFTERMATH_COLUMNS
    from .verdicts import base

    columns = tuple(dict.fromkeys((*RETRY_COLUMNS, *AFTERMATH_COLUMNS)))
    with loaded(reading, columns, shared=True) as (engine, report):
        figs = retries_mod.all_figures(engine, by, reading.filters)
        stalls = forensics.stall_groups(engine, base(reading.filters), by)
    figs = {g: f for g, f in figs.items() if f[0].value}
    retries_mod.add_stalls(figs, stalls)
    if not figs:
        write(reading, retries_mod.headers(by), [])
        nothing_matched(reading, report, "request")
    write(reading, retries_mod.headers(by), retries_mod.rows(figs))


@cli.command(short_help="PASS/FAIL/NOT_EXERCISED per client and spec requirement.")
@ci_reading_options
def verdicts(reading: Reading) -> None:
    """Per client (name@version) and spec requirement: PASS, FAIL or NOT_EXERCISED.

    Judged from the traffic the client sent: re-initialising after a 404 and carrying on,
    Last-Event-ID on a resumption GET, the SSE retry delay, reconnecting after a graceful
    close, Retry-After, MCP-Protocol-Version, Accept, notifications/initialized, unique
    request ids, DELETE at the end. Each row names the rule (spec version, section,
    MUST/SHOULD) and the evidence (record ids and times). Exit status 3 when any FAIL
    (a MUST broken; a WARNING, a SHOULD missed, does not fail it).

    \b
    Example:
        mcp-layers verdicts recordings/
        mcp-layers verdicts lab/runs/ --format markdown
        mcp-layers verdicts rec/ --format junit > verdicts.xml
    """
    from . import verdicts as verdicts_mod

    if reading.engine != "duckdb":
        raise UsageFailure("verdicts runs on the DuckDB engine only (leave out --engine)")
    with loaded(reading, verdicts_mod.COLUMNS, shared=True) as (engine, report):
        rows = verdicts_mod.verdict_rows(engine, reading.filters)
        ci_text = None if reading.ci_format is None else _ci_text(reading, engine, rows)
    if ci_text is None:
        write(reading, verdicts_mod.HEADERS, rows)
    else:
        with reader_may_leave():
            sys.stdout.write(ci_text)
            sys.stdout.flush()
    if not rows:
        nothing_matched(reading, report, "client")
    if any(row[2] == verdicts_mod.Verdict.FAIL for row in rows):
        raise SystemExit(ExitStatus.VERDICT_FAILED)


def _ci_text(reading: Reading, engine: Engine, rows: list[list[str | None]]) -> str:
    """The verdicts as JUnit XML or SARIF (while the engine is open: SARIF looks up which
    recording holds each record its results name)."""
    from importlib.metadata import version

    from . import verdict_formats as formats
    from . import verdicts as verdicts_mod

    table = formats.parse_rows(verdicts_mod.HEADERS, rows)
    if reading.ci_format == "junit":
        text = formats.junit_xml(table, verdicts_mod.RULE)
    else:
        names = [s.path and s.name for s in inputs.expand(reading.paths)]
        places = formats.places(engine, reading.filters, table, names)
        log = formats.sarif_log(
            table, verdicts_mod.RULES, version=version("mcp-layers"), places=places
        )
        text = formats.sarif_text(log)
    return text


@cli.command(short_help="Summary and retries figures side by side, a column per client.")
@reading_options
@by_option(repeatable=True)
@top_option
def compare(reading: Reading, by: tuple[str, ...], top: int) -> None:
    """The summary and retries figures side by side, one column per client.

    With --by scenario, or --by client --by scenario, one column per scenario or per
    client and scenario: two clients (or two versions of one) on the same scenario.
    Parts of a whole are shares.

    \b
    Example:
        mcp-layers compare recordings/ --scenario flaky-503
        mcp-layers compare recordings/ --by client --by scenario --format markdown
    """
    from . import compare as compare_mod
    from .queries import RETRY_COLUMNS, SUMMARY_COLUMNS

    columns = tuple(dict.fromkeys((*SUMMARY_COLUMNS, *RETRY_COLUMNS)))
    with loaded(reading, columns, shared=True) as (engine, report):
        headers, rows = compare_mod.table(engine, by, reading.filters, top=top)
    if len(headers) == 1:
        write(reading, headers, [])
        nothing_matched(reading, report, "request")
    write(reading, headers, rows)


@cli.command(short_help="List sessions: client, length, failures, retries, how they ended.")
@reading_options
def sessions(reading: Reading) -> None:
    """List sessions: client, duration, POSTs, failures, retries, how each ended.

    Sessions are listed per input, in the order they first appear; `ended` is the
    session_end reason (delete, not_found, shutdown), or 404 when a call got one.

    \b
    Example:
        mcp-layers sessions recordings/mcp-20261130T154121Z.jsonl
        mcp-layers sessions recordings/ --client peer-ts-client --format csv
    """
    from . import sessions as sessions_mod
    from .queries import SESSION_COLUMNS

    # One query, but it reads the records twice: read once, it costs less.
    with loaded(reading, SESSION_COLUMNS, shared=True) as (engine, report):
        rows = sessions_mod.session_rows(engine, reading.filters)
    write(reading, sessions_mod.SESSION_HEADERS, rows)
    if not rows:
        nothing_matched(reading, report, "session")


def _session_argument(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not value.strip():
        raise click.BadParameter("give a session id, as `mcp-layers sessions PATH` lists them")
    return value.strip()


@cli.command(short_help="One session's timeline: every POST, with what it retried.")
@click.argument("session", callback=_session_argument)
@reading_options
def show(reading: Reading, session: str) -> None:
    """One session's timeline: every POST in order, with what it retried.

    Each row: seconds since the session's first POST, record id, method and tool, HTTP
    status(es), outcome, duration, attempt, and the attempt it retried (or the
    input-required result it continues).

    \b
    Example:
        mcp-layers show s-6f1c9a04be recordings/
    """
    from . import sessions as sessions_mod

    with loaded(reading, shared=True) as (engine, report):
        rows = sessions_mod.show_rows(engine, session, reading.filters, _warn)
        rows = sessions_mod.add_aftermath(engine, session, reading.filters, rows)
        if not rows:
            report.settle()
    if not rows:
        write(reading, sessions_mod.SHOW_HEADERS, [])
        if not report.empty:
            _warn(
                f"mcp-layers: no records of session {session} "
                "(list them with: mcp-layers sessions PATH)"
            )
            raise SystemExit(ExitStatus.NOTHING_MATCHED)
        nothing_matched(reading, report)
    write(reading, sessions_mod.SHOW_HEADERS, rows)


@cli.command(short_help="Each stall of an agent's run, and who was waited on.")
@reading_options
@click.option(
    "--min-s",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="The shortest silence that is a stall, in seconds.",
)
def hangs(reading: Reading, min_s: float) -> None:
    """Each stall: a silence of at least --min-s seconds in an input's traffic, and who
    was waited on: `model` (a model request in flight), `mcp_server` (an MCP request in
    flight without its answer; `slow` when its stream carried events), `agent` (every
    answer was in and the agent sent nothing), `none` (the model had ended its turn: the
    agent waited for its user), `unknown` (nothing in flight, and the input holds no model
    traffic). Model traffic is recorded when the model API goes through the same proxy
    (docs/model-turns.md). The filters apply to the MCP records; model turns are kept.

    \b
    Example:
        mcp-layers hangs recordings/mcp-20261202T163100Z.jsonl
        mcp-layers hangs recordings/ --min-s 30 --format json
    """
    from . import hangs as hangs_mod
    from .queries import COMMON_COLUMNS_ALL

    with loaded(reading, (*COMMON_COLUMNS_ALL, *hangs_mod.HANG_COLUMNS)) as (engine, report):
        # The inputs' names by index, as the engine numbered them (they exist: it read them).
        names = [s.name for s in inputs.expand(reading.paths)] if "-" not in reading.paths else []
        rows = hangs_mod.hang_rows(engine, reading.filters, min_s, names)
        if not rows:
            report.settle()  # while the engine is open: was there anything to look at?
    write(reading, hangs_mod.HANG_HEADERS, rows)
    if not rows:
        nothing_matched(reading, report, "stall")


@cli.command(short_help="Write one self-contained HTML page: overview, retries, sessions, compare.")
@click.option(
    "-o",
    "--output",
    "target",
    default="report.html",
    show_default=True,
    metavar="FILE",
    type=click.Path(dir_okay=False, writable=True),
    help="The HTML file to write.",
)
@click.option("--title", default="mcp-layers report", show_default=True, help="The page's title.")
@reading_options
def report(reading: Reading, target: str, title: str) -> None:
    """Write the figures of every command as one HTML page that works offline: per client
    outcomes by layer, latency and retries; sessions with a timeline each (retry chains as
    arrows, injected faults marked); client × scenario side by side as a heat map.

    Big recordings are sampled (the page says what it leaves out). --format does not apply.

    \b
    Example:
        mcp-layers report recordings/ -o report.html
        mcp-layers report recordings/ --client claude-code -o claude.html
    """
    from pathlib import Path

    from . import report as report_mod

    columns = report_mod.columns_to_read(reading.engine)
    with loaded(reading, columns, shared=True) as (engine, found):
        records = report_mod.matching(engine, reading.filters)
        if not records:
            nothing_matched(reading, found)
        size = report_mod.write(
            engine,
            reading.filters,
            Path(target),
            records=records,
            inputs=reading.paths,
            title=title,
        )
    answers.note_written(target)
    _warn(f"mcp-layers: report written to {target} ({size / 1024:.0f} KiB)")


@cli.command(
    short_help="Zip one session's or client's records, report and verdicts for a bug report."
)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--session", metavar="ID", default=None, help="The session to report.")
@click.option(
    "--client",
    metavar="NAME[@VERSION]",
    default=None,
    help="The client to report (every version when no @VERSION).",
)
@click.option(
    "-o",
    "--output",
    "target",
    required=True,
    metavar="FILE.zip",
    type=click.Path(dir_okay=False),
    help="The zip to write.",
)
@click.option("--force", is_flag=True, help="Overwrite FILE.zip if it exists.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the caches.")
def bundle(
    paths: tuple[str, ...],
    session: str | None,
    client: str | None,
    target: str,
    force: bool,
    no_cache: bool,
) -> None:
    """Write what to attach to an issue in a client's tracker, as one zip: the records of
    one session (--session) or one client (--client), as recorded; their report page;
    their verdicts and hang forensics; and SUMMARY.md to paste into the issue (client,
    server, protocol and tool versions, the failed exchanges, the spec sentence each
    failing verdict cites). It adds nothing from this machine but those versions.

    Exit status: 0 written, 1 no such session or client (the ones there are listed),
    2 no records in the input (or a usage error).

    \b
    Example:
        mcp-layers sessions recordings/
        mcp-layers bundle recordings/ --session s-c42cb85f3f -o bug.zip
        mcp-layers bundle recordings/ --client claude-code@2.1.197 -o claude.zip
    """
    import tempfile
    from pathlib import Path

    from . import bundle as bundle_mod

    if (session is None) == (client is None):
        raise click.UsageError("give one of --session ID or --client NAME[@VERSION]")
    value = (session if session is not None else client or "").strip()
    if not value:
        raise click.UsageError("--session and --client need a value")
    subject = bundle_mod.Subject("session" if session is not None else "client", value)
    out = Path(target)
    if out.exists() and not force:
        raise UsageFailure(f"{target} exists; --force overwrites it")
    with tempfile.TemporaryDirectory(prefix="mcp-layers-bundle-") as tmp:
        spooled = _spool_stdin(paths, Path(tmp))
        members = _bundle_members(spooled, subject, Path(tmp), cache=not no_cache)
        data = bundle_mod.zip_bytes(members)
    # Written beside the target, then renamed: a bundle is whole or absent.
    partial = out.with_name(f".{out.name}.partial")
    try:
        partial.write_bytes(data)
        os.replace(partial, out)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise UsageFailure(f"{target}: {exc.strerror or exc}") from None
    _warn(f"mcp-layers: bundle written to {target} ({', '.join(sorted(members))})")


def _spool_stdin(paths: tuple[str, ...], tmp: Path) -> tuple[str, ...]:
    """The paths, with `-` replaced by a file holding stdin: the records are read twice
    (by the engine, then line by line for the bundle), and stdin only once."""
    import shutil

    if inputs.STDIN not in paths:
        return paths
    if inputs.stdin_is_terminal():
        raise UsageFailure("'-' reads records from stdin, but nothing is piped in")
    spool = tmp / "stdin.jsonl"
    with open(spool, "wb") as f:
        shutil.copyfileobj(sys.stdin.buffer, f, 1024 * 1024)
    return tuple(str(spool) if p == inputs.STDIN else p for p in paths)


def _bundle_members(
    paths: tuple[str, ...], subject: Subject, tmp: Path, *, cache: bool = True
) -> dict[str, bytes]:
    """The zip's members: the records chosen from the inputs, then the figures over them."""
    from datetime import datetime

    from . import bundle as bundle_mod
    from . import forensics, queries
    from . import report as report_mod
    from . import verdicts as verdicts_mod
    from .duck import DuckEngine
    from .queries import SESSION_COLUMNS

    filters = Filters(clients=frozen([subject.value])) if subject.option == "client" else Filters()
    reading = Reading(
        paths=paths,
        fmt=OutputFormat.TABLE,
        filters=filters,
        jobs=None,
        strict=False,
        lenient=False,
        progress=False,
        # stdin, spooled into `tmp`, is read once: not worth an entry (`paths` names it).
        cache=cache and inputs.STDIN not in paths,
    )
    found: verdicts_mod.Tallies = {}
    verdict_rows: list[list[str | None]] = []
    session = subject.value if subject.option == "session" else None
    # What the verdicts, the forensics and the list of sessions read (with `session`, `id`
    # and `ts`, which pick a session's records): read once for all of them.
    columns = tuple(dict.fromkeys((*verdicts_mod.COLUMNS, *SESSION_COLUMNS)))
    with loaded(reading, columns, shared=True) as (engine, report):
        if report.records == 0:
            _warn("mcp-layers: no records in the input: nothing to bundle")
            raise SystemExit(ExitStatus.USAGE_ERROR)
        if session is not None:
            if not engine.rows(queries.session_records(session) + " LIMIT 1"):
                _unknown(engine, subject)
            # Judged on the whole recording (the client's next move after a 404 is in its
            # next session), keeping the instances about this session's records.
            found = verdicts_mod.tallies(engine, filters, session)
        else:
            if not report_mod.matching(engine, filters):
                _unknown(engine, subject)
            verdict_rows = verdicts_mod.verdict_rows(engine, filters)
        hangs = forensics.aftermaths(engine, verdicts_mod.base(filters), filters, session)
    sources = inputs.expand(paths)
    keep = bundle_mod.wanted(subject, filters.predicate())
    members = bundle_mod.record_members(
        bundle_mod.chosen_lines(sources, keep, bundle_mod.needle(subject))
    )
    for name, data in members.items():
        (tmp / name).write_bytes(data)
    names_in_order = sorted(members)
    engine_b = DuckEngine()
    try:
        engine_b.load(inputs.expand([str(tmp / n) for n in names_in_order]), None, _warn)
        facts = bundle_mod.Facts(*engine_b.rows(queries.facts())[0])
        failing_rows = engine_b.rows(queries.failing(bundle_mod.MAX_FAILING))
        page = tmp / "report.html"
        made = datetime.fromisoformat(facts.last) if facts.last else None
        report_mod.write(
            engine_b,
            Filters(),
            page,
            records=facts.records,
            inputs=names_in_order,
            title=f"mcp-layers bundle: {subject.describe()}",
            made=made,
        )
        members["report.html"] = page.read_bytes()
    finally:
        engine_b.close()
    if session is not None:
        named = sorted({client for client, _ in found}) or facts.clients or ["(unknown client)"]
        verdict_rows = verdicts_mod.judge(named, found)
    failing = [bundle_mod.Failing(*row[:8]) for row in failing_rows]
    total = int(failing_rows[0][8]) if failing_rows else 0
    members["verdicts.json"] = bundle_mod.table_text(
        verdicts_mod.HEADERS, verdict_rows, OutputFormat.JSON
    ).encode()
    members["verdicts.txt"] = bundle_mod.table_text(
        verdicts_mod.HEADERS, verdict_rows, OutputFormat.TABLE
    ).encode()
    members["hangs.json"] = bundle_mod.hangs_json(hangs)
    listed = sorted([*members, "SUMMARY.md"])
    members["SUMMARY.md"] = bundle_mod.summary_md(
        subject, facts, _versions(), failing, total, verdict_rows, hangs, listed
    ).encode()
    return members


def _versions() -> Versions:
    """mcp-layers' version and mitmproxy's (the one installed here, if any): the only
    thing a bundle takes from this machine."""
    from importlib.metadata import PackageNotFoundError, version

    from .bundle import Versions

    try:
        mitmproxy = version("mitmproxy")
    except PackageNotFoundError:
        mitmproxy = "not installed"
    return Versions(mcp_layers=version("mcp-layers"), mitmproxy=mitmproxy)


def _unknown(engine: Engine, subject: Subject) -> NoReturn:
    """No record of the session (or client) asked for: say which there are, exit 1."""
    from . import queries
    from . import sessions as sessions_mod
    from .bundle import MAX_LISTED

    if subject.option == "session":
        rows = sessions_mod.session_rows(engine, Filters())
        there = [f"  {r[0]}  {r[1] or '(unknown client)'}" for r in rows]
        what = "sessions"
    else:
        there = [f"  {name}  ({n} records)" for name, n in engine.rows(queries.clients())]
        what = "clients"
    _warn(f"mcp-layers: no records of {subject.describe()}; the {what} in the input:")
    for line in there[:MAX_LISTED]:
        _warn(line)
    if len(there) > MAX_LISTED:
        _warn(f"  … {len(there) - MAX_LISTED} more (mcp-layers sessions PATH lists them all)")
    if not there:
        _warn("  (none)")
    raise SystemExit(ExitStatus.NOTHING_MATCHED)


@cli.command(short_help="Print the figures' SQL (and the table's DDL) for a warehouse.")
@click.option(
    "--dialect",
    type=click.Choice(["duckdb", "spark", "clickhouse", "bigquery", "trino"]),
    default="duckdb",
    show_default=True,
    help="SQL dialect (translated by sqlglot).",
)
@click.argument(
    "figure",
    required=False,
    type=click.Choice(["summary", "retries", "compare", "sessions", "show"]),
)
def sql(dialect: str, figure: str | None) -> None:
    """Print the queries every figure is (default options), with the records table's DDL,
    to run them where a fleet's records already live.

    `_src` is the input a record came from and `_seq` its place in the input (`export
    --parquet` writes both); retries and sessions follow links in that order.

    \b
    Example:
        mcp-layers sql --dialect bigquery retries
    """
    from .queries import figure_queries, translate
    from .table import ddl

    with reader_may_leave():
        click.echo(f"-- the records table\n{ddl(dialect)};\n")
        for name, queries in figure_queries().items():
            if figure is not None and name != figure:
                continue
            for title, text in queries:
                click.echo(f"-- {title}\n{translate(text, dialect)};\n")


@cli.command(short_help="Run your own SQL over the records table.")
@click.argument("statement", metavar="SQL")
@reading_options
def query(reading: Reading, statement: str) -> None:
    """Run SQL (DuckDB's dialect) over the `records` table of the inputs; the columns are
    the record's fields (docs/record-format.md) plus `_src` and `_seq`.

    \b
    Example:
        mcp-layers query "SELECT client, count(*) AS n FROM records GROUP BY 1" rec.jsonl
    """
    with loaded(reading) as (engine, report):
        headers, rows = engine.table(statement)
        if not rows:
            report.settle()
    nested = reading.fmt in (OutputFormat.JSON, OutputFormat.JSONL)
    write(reading, headers, [[_cell(v, nested) for v in row] for row in rows])
    if not rows:
        nothing_matched(reading, report, "row")


def _cell(value: Any, nested: bool) -> Any:
    """A value DuckDB returned, as a cell: lists and structs stay JSON arrays and objects
    in JSON output and read as JSON text elsewhere; decimals are numbers, times ISO text."""
    value = _json_value(value)
    if nested or not isinstance(value, list | dict):
        return value
    return orjson.dumps(value).decode()


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, datetime.date | datetime.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    return str(value)  # UUID, bytes, intervals…


@cli.command(short_help="Write the records as Parquet, or as OpenTelemetry spans.")
@click.option(
    "--parquet",
    "directory",
    default=None,
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Typed Parquet under DIR, partitioned by day (day=YYYY-MM-DD/…parquet inside).",
)
@click.option(
    "--otlp-json",
    "otlp_json",
    default=None,
    metavar="OUT",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True),
    help="OTLP/JSON lines (one ExportTraceServiceRequest a line) for the Collector's "
    "otlpjsonfile receiver; `-` for stdout. Needs pip install 'mcp-layers[otel]'.",
)
@reading_options
def export(reading: Reading, directory: str | None, otlp_json: str | None) -> None:
    """Write the records in a form other tools read: typed Parquet (the record's columns,
    `_src`, `_seq`, partitioned by day) for DuckDB, Spark and the warehouses, or every
    exchange as an OpenTelemetry span by the MCP semantic conventions (the same spans the
    addon sends live; docs/otel.md). Give one of the two.

    \b
    Example:
        mcp-layers export --parquet fleet/ recordings/
        mcp-layers export --otlp-json traces.jsonl recordings/
    """
    if (directory is None) == (otlp_json is None):
        raise UsageFailure("export needs one of --parquet DIR or --otlp-json OUT")
    if directory is not None:
        _export_parquet(reading, directory)
    else:
        assert otlp_json is not None
        _export_otlp_json(otlp_json, reading.paths)


def _export_parquet(reading: Reading, directory: str) -> None:
    with loaded(reading, shared=True) as (engine, report):
        for written in engine.export_parquet(directory):
            answers.note_left(str(written))
    _warn(f"mcp-layers: {report.records} records written to {directory}")
    if not report.records:
        raise SystemExit(ExitStatus.NOTHING_MATCHED)


def _export_otlp_json(otlp_json: str, paths: tuple[str, ...]) -> None:
    try:
        from . import otel_export
    except ImportError as exc:
        raise UsageFailure(
            f"export --otlp-json needs the OpenTelemetry SDK ({exc.name} is missing); "
            "install it with pip install 'mcp-layers[otel]'"
        ) from None
    try:
        with click.open_file(otlp_json, "w", encoding="utf-8", lazy=False) as out:
            report = otel_export.export_otlp_json(list(paths), out, warn=_warn)
    except NewerRecordVersion as exc:
        raise LocatedFailure(str(exc)) from None
    except AnalysisError as exc:
        raise UsageFailure(str(exc)) from None
    except OSError as exc:
        raise UsageFailure(f"{otlp_json}: {exc.strerror or exc}") from None
    if report.bad_lines:
        _warn(f"mcp-layers: {_bad_lines_read(report.bad_lines, report.records)}")
    if not report.records:
        _warn("mcp-layers: no records in the input")
        raise SystemExit(ExitStatus.NOTHING_MATCHED)
    _warn(f"mcp-layers: {report.spans} spans from {report.records} records in {report.lines} lines")


@cli.command(short_help="Print the path of the addon script, for mitmdump -s.")
def addon() -> None:
    """Print the path of the installed addon script, to load it from any directory.

    \b
    Example:
        mitmdump -s "$(mcp-layers addon)" --listen-host 127.0.0.1 \\
            --mode reverse:https://mcp.example.com@8080 --set connection_strategy=lazy
    """
    from mcp_layers_core import script

    try:
        click.echo(script.path())
    except LookupError as exc:
        raise UsageFailure(f"{exc}; reinstall mcp-layers (pip install mcp-layers)") from None


@cli.group(short_help="The caches of answers and records: where, what they hold; clear them.")
def cache() -> None:
    """The caches under $MCP_LAYERS_CACHE_DIR (else $XDG_CACHE_HOME/mcp-layers/records,
    else ~/.cache/mcp-layers/records): a command's answer, printed again when the same
    command line is run on unchanged inputs; and each input's records, typed, in a DuckDB
    file built in the background after the first read, which any later question of the
    unchanged input reads instead. Bounded by $MCP_LAYERS_CACHE_MB (default: 2 GB, or a
    tenth of the free disk if less); the least recently used go first. --no-cache on a
    command skips both.

    \b
    Example:
        mcp-layers cache info
        mcp-layers cache clear
    """


@cache.command(name="info", short_help="Where the cache is, its entries and their size.")
def cache_info() -> None:
    """Print the cache's directory, how many entries and answers it holds, how many
    entries are being built, their total size, the bound, and when one was last used
    (oldest and newest).

    \b
    Example:
        mcp-layers cache info
    """
    from . import cache as cache_mod

    u = cache_mod.usage()

    def when(t: float | None) -> str:
        if t is None:
            return "-"
        return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    with reader_may_leave():
        click.echo(f"directory   {u.directory}")
        click.echo(f"entries     {u.entries}")
        click.echo(f"answers     {u.answers}")
        click.echo(f"building    {u.building}")
        click.echo(f"size        {u.total_bytes / 1024**2:.1f} MiB")
        click.echo(f"bound       {u.limit_bytes / 1024**2:.0f} MiB")
        click.echo(f"last used   {when(u.oldest_use)} (oldest), {when(u.newest_use)} (newest)")


@cache.command(name="clear", short_help="Remove every entry and answer of the cache.")
def cache_clear() -> None:
    """Remove every entry and answer of the cache (the next read of each input builds its
    entry again); an entry being built is left to its builder.

    \b
    Example:
        mcp-layers cache clear
    """
    from . import cache as cache_mod

    n, size = cache_mod.clear()
    _warn(
        f"mcp-layers: {_counted(n, 'entry').replace('entrys', 'entries')} removed "
        f"({size / 1024**2:.1f} MiB) from {cache_mod.directory()}"
    )


# The replay server is a command of its own module (analysis/replay/command.py).
cli.add_command(replay_command, name="replay")


@cli.command(
    short_help="Run an MCP stdio server and record its traffic (docs/stdio.md).",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def wrap(command: tuple[str, ...]) -> None:
    """Run COMMAND as an MCP stdio server, pass its bytes through and record each call.

    The console script runs `wrap` before this command group is even imported
    (analysis/launch.py: a client counts the wrapper's start-up against its server's);
    this entry lists it in --help and serves callers of the group itself. Options:
    --record-dir DIR, --name NAME, --scenario LABEL, --max-line-kb N, --fault RULE,
    --faults PRESET|FILE, --seed N, then -- and the command (docs/stdio.md).

    \b
    Example:
        mcp-layers wrap --record-dir ~/mcp-rec -- npx -y @modelcontextprotocol/server-everything
    """
    import mcp_layers_stdio

    mcp_layers_stdio.main(list(command))


def main() -> None:
    """The console script."""
    cli(prog_name="mcp-layers")
