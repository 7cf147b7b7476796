"""Errors that reach the user as one clear line instead of a traceback.

Every subcommand catches :class:`NmtkitError` at the top (see ``nmtkit.cli.common``)
and prints ``nmtkit-<cmd>: error: <message>`` to stderr with exit status 1.
"""
from __future__ import annotations

from os import PathLike


class NmtkitError(Exception):
    """A problem caused by the user's input or options, reported without a traceback."""


class InputError(NmtkitError):
    """Bad content in an input file, located by file name and (1-based) line number."""

    def __init__(self, path: str | PathLike | None, line: int | None, message: str) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        self.message = message
        where = ""
        if self.path is not None:
            where = self.path if line is None else f"{self.path}:{line}"
            where += ": "
        super().__init__(where + message)


class OutputError(NmtkitError):
    """Writing an output failed (full disk, no permission, a parent that is a file ...).

    Names the path the user asked for, never the temporary file nmtkit was writing to,
    with the reason (``No space left on device``); the previous file, if any, is intact.
    """

    def __init__(self, path: str | PathLike, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")
