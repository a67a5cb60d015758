"""Exit statuses of `mcp-layers`, one name each (documented in docs/cli.md)."""

from enum import IntEnum


class ExitStatus(IntEnum):
    #: The output was written.
    OK = 0
    #: No record matched the filters, or the inputs hold no records (the output is empty).
    NOTHING_MATCHED = 1
    #: `verdicts`: a client FAILed a MUST (the table is written). Its own value: a script
    #: must tell "a client broke the spec" from "nothing was read".
    VERDICT_FAILED = 3
    #: A bad option or argument, an input that cannot be read, a record of a newer format
    #: version, or (with --strict) a line that is not a record. Click's usage errors use it too.
    USAGE_ERROR = 2
