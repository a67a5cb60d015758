"""Exit statuses of `mcp-layers`, one name each (documented in docs/cli.md)."""

from enum import IntEnum


class ExitStatus(IntEnum):
    #: The output was written.
    OK = 0
    #: No record matched the filters, or the inputs hold no records (the output is empty).
    NOTHING_MATCHED = 1
    #: `verdicts`: a client FAILed a requirement (the table is written).
    VERDICT_FAILED = 1
    #: A bad option or argument, an input that cannot be read, a record of a newer format
    #: version, or (with --strict) a line that is not a record. Click's usage errors use it too.
    USAGE_ERROR = 2
