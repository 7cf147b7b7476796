"""SIGTERM handled like SIGINT.

Why: ``kill``, ``timeout``, batch schedulers and ``docker stop`` send SIGTERM, whose default action
ends Python at once: no ``finally``, so temporary outputs and the training lock stay behind.
Raising :class:`KeyboardInterrupt` instead runs every cleanup and ends with the interrupt's exit
status (130, see ``nmtkit.cli.common``), with one line and no traceback.
"""
from __future__ import annotations

import contextlib
import functools
import signal
import threading
from typing import Any, Callable, Iterator


def _raise_interrupt(signum: int, frame: Any) -> None:  # noqa: ARG001
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def handles_sigterm(fn: Callable) -> Callable:
    """Decorator form of :func:`sigterm_as_interrupt` for a command function."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with sigterm_as_interrupt():
            return fn(*args, **kwargs)

    return wrapper


def default_signals_in_worker() -> None:
    """For pool workers forked from a command: default SIGTERM (the pool's terminate() must end
    them quietly) and SIGINT ignored (Ctrl-C is the parent's to handle)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
