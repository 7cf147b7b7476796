"""What every subcommand shares: one-line errors and exit statuses; the console and device choice
live in ``nmtkit.utils`` (the library uses them too) and are re-exported here."""
from __future__ import annotations

import functools
import io
import os
import signal
import sys
import threading
from typing import Any, Callable

import click

from nmtkit.errors import NmtkitError
from nmtkit.utils.console import console
from nmtkit.utils.device import parse_device
from nmtkit.utils.memory import allocation_failure_message, is_allocation_failure
from nmtkit.utils.stdio import STDOUT_NAME, use_utf8_stdio

__all__ = ["console", "parse_device", "handle_errors", "fail", "NmtkitCommand", "OneLineUsageError", "FiniteFloat",
           "SEED"]


#: Exit statuses, the same for every subcommand (documented in the README).
EXIT_ERROR = 1  # bad input, bad option values found after parsing, failed writes
EXIT_USAGE = 2  # a command line click cannot parse (unknown option, value out of range)
EXIT_INTERRUPT = 130  # SIGINT (Ctrl-C): 128 + 2, as a shell reports it
EXIT_BROKEN_PIPE = 141  # stdout closed by the reader (``| head``): 128 + SIGPIPE, as a shell reports it


class FiniteFloat(click.FloatRange):
    """A float option that must be a finite number (click's ``FloatRange`` lets ``nan`` and
    ``inf`` through, and a ``nan`` learning rate or length penalty fails silently later)."""

    name = "float"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        import math

        out = super().convert(value, param, ctx)
        if out is not None and not math.isfinite(out):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return out


#: ``--seed``: what ``torch.manual_seed`` accepts (a larger one was an overflow traceback).
SEED = click.IntRange(0, 2**64 - 1)


def fail(prog: str, message: str) -> None:
    """Print ``prog: error: message`` on one line to stderr and exit with status 1."""
    message = " ".join(str(message).split("\n")).strip()
    click.echo(f"{prog}: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null so that the final flush at exit cannot fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # not a real file descriptor (tests capture stdout)


def _ignore_sigxfsz() -> None:
    """Past ``ulimit -f`` the kernel sends SIGXFSZ, whose default action kills the process with a
    core dump, no message and temporary files left behind.  Ignored, the write fails with EFBIG
    and is reported like any failed write (``PATH: File too large``).  CPython ignores it at
    startup already, but not when embedded without its signal handlers: this does not rely on it."""
    sig = getattr(signal, "SIGXFSZ", None)  # not on Windows
    if sig is not None and threading.current_thread() is threading.main_thread():
        signal.signal(sig, signal.SIG_IGN)


def _stdout_failed() -> bool:
    """Flush stdout; if that fails (a full disk, /dev/full), point it at /dev/null so that
    Python's own flush at exit cannot print "Exception ignored" noise, and say so."""
    try:
        sys.stdout.flush()
        return False
    except (OSError, ValueError, AttributeError):
        _stdout_to_devnull()
        return True


def handle_errors(prog: str) -> Callable:
    """Decorator turning errors into one line and a documented exit status, never a traceback.

    :class:`NmtkitError`, any OSError and a failed allocation: ``prog: error: ...``, status 1; Ctrl-C: status 130;
    a reader that closed our stdout: status 141, silently.  An OSError without a file name
    that stdout cannot be flushed after came from stdout and is reported as ``<stdout>: ...``.
    The standard streams are UTF-8 (:func:`~nmtkit.utils.stdio.use_utf8_stdio`).
    """

    def deco(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            _ignore_sigxfsz()
            use_utf8_stdio()
            try:
                result = fn(*args, **kwargs)
                sys.stdout.flush()  # a closed pipe or a full disk shows here, not in Python's shutdown
                return result
            except NmtkitError as exc:
                _stdout_failed()
                fail(prog, str(exc))
            except BrokenPipeError:
                _stdout_to_devnull()
                sys.exit(EXIT_BROKEN_PIPE)
            except KeyboardInterrupt:
                _stdout_failed()
                click.echo(f"{prog}: interrupted", err=True)
                sys.exit(EXIT_INTERRUPT)
            except OSError as exc:
                reason = exc.strerror or str(exc) or type(exc).__name__
                stdout_failed = _stdout_failed()  # always: a failed stdout must not fail again at exit
                name = exc.filename or (STDOUT_NAME if stdout_failed else None)
                fail(prog, f"{name}: {reason}" if name else reason)
            except (MemoryError, RuntimeError) as exc:
                # the steps that allocate by an option's size name it (nmtkit.utils.memory); this
                # catches the rest, still one line
                if not is_allocation_failure(exc):
                    raise
                _stdout_failed()
                fail(prog, f"out of memory: {allocation_failure_message(exc)}")

        return wrapper

    return deco


class OneLineUsageError(click.UsageError):
    """A click usage error shown as ``prog: error: message`` on one line (exit status 2)."""

    def __init__(self, message: str, prog: str, ctx: click.Context | None = None) -> None:
        super().__init__(message, ctx)
        self.prog = prog

    def show(self, file: Any = None) -> None:
        message = " ".join(self.format_message().split())
        click.echo(f"{self.prog}: error: {message} (see --help)", file=file, err=file is None)


class NmtkitCommand(click.Command):
    """Every subcommand's class: option parsing errors (``--batch-size 0``) are one line, not
    click's usage block, so that they read like every other nmtkit error."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """UTF-8 standard streams before click prints anything (help, usage errors)."""
        use_utf8_stdio()
        return super().main(*args, **kwargs)

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except OneLineUsageError:
            raise
        except click.UsageError as exc:
            raise OneLineUsageError(exc.format_message(), f"nmtkit-{self.name}", exc.ctx) from None

