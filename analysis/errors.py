"""The few exceptions the analysis raises; the CLI turns each into a message and an exit code."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .schema import RECORD_VERSION


class AnalysisError(Exception):
    """Base of every error the analysis raises on purpose."""


class InputError(AnalysisError):
    """An input cannot be read: missing, unreadable, or a glob that matches nothing."""


class NewerRecordVersion(AnalysisError):
    """A record of a format version newer than this command reads.

    `index` is the line's 0-based index in the block being decoded; the reader that knows
    the file and line number sets `where` (`path:lineno`). `earlier` holds the bad lines
    found before it in the same block, so they are still reported.
    """

    def __init__(
        self, version: int, *, index: int = -1, where: str = "", earlier: Sequence[Any] = ()
    ) -> None:
        super().__init__(version, index, where)
        self.version = version
        self.index = index
        self.where = where
        self.earlier = list(earlier)  # bad lines before it in the same block

    def __str__(self) -> str:
        prefix = f"{self.where}: " if self.where else ""
        return (
            f"{prefix}record version {self.version} is newer than this mcp-layers reads "
            f"({RECORD_VERSION}); upgrade mcp-layers"
        )
