"""What every subcommand shares: one-line errors, the rich console, device choice."""
from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any, Callable

import click
from rich.console import Console

from nmtkit.errors import NmtkitError

if TYPE_CHECKING:
    import torch

#: Progress, tables and messages go to stderr so that stdout carries only results.
console = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(prog: str, message: str) -> None:
    """Print ``prog: error: message`` on one line to stderr and exit with status 1."""
    message = " ".join(str(message).split("\n")).strip()
    click.echo(f"{prog}: error: {message}", err=True)
    sys.exit(1)


def handle_errors(prog: str) -> Callable:
    """Decorator turning :class:`NmtkitError` (and a few OS errors) into one-line errors."""

    def deco(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except NmtkitError as exc:
                fail(prog, str(exc))
            except BrokenPipeError:
                sys.stderr.close()
                sys.exit(1)
            except OSError as exc:
                if exc.filename:
                    fail(prog, f"{exc.filename}: {exc.strerror}")
                raise

        return wrapper

    return deco


def parse_device(name: str) -> "torch.device":
    """Resolve ``auto|cpu|cuda[:N]``; ``auto`` takes a GPU when one is present."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise NmtkitError(f"--device {name} asked for, but no CUDA GPU is available")
    return torch.device(name)
