"""SIGTERM handled like SIGINT: the one path, for a command's module while it loads
(:func:`interrupt_ends_command`, :mod:`nmtkit.launch`) and for the command as it runs
(:func:`nmtkit.cli.common.handle_errors`).

Why: ``kill``, ``timeout``, batch schedulers and ``docker stop`` send SIGTERM, whose default action
ends Python at once: no ``finally``, so temporary outputs and the training lock stay behind.
Raising :class:`KeyboardInterrupt` instead runs every cleanup and ends with the interrupt's exit
status (:data:`EXIT_INTERRUPT`), with one line and no traceback.  A SIGTERM that the parent set
to be ignored (``nohup``-like) stays ignored.
"""
from __future__ import annotations

import contextlib
import signal
import sys
import threading
from typing import Any, Iterator

EXIT_INTERRUPT = 130  # SIGINT (Ctrl-C): 128 + 2, as a shell reports it


def _raise_interrupt(signum: int, frame: Any) -> None:  # noqa: ARG001
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt (main thread only, and unless the parent
    set it to be ignored; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def interrupt_ends_command(prog: str) -> Iterator[None]:
    """A command module's imports (click, torch, the models): Ctrl-C or SIGTERM there ends the
    command as :func:`nmtkit.cli.common.handle_errors` would, ``prog: interrupted`` and status
    :data:`EXIT_INTERRUPT`.  Nothing has been written yet, so there is nothing to clean up; the
    line is written without click, which may be what was loading."""
    try:
        with sigterm_as_interrupt():
            yield
    except KeyboardInterrupt:
        try:
            sys.stderr.write(f"{prog}: interrupted\n")
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):  # stderr closed or gone: the status still says it
            pass
        raise SystemExit(EXIT_INTERRUPT) from None


def default_signals_in_worker() -> None:
    """For pool workers forked from a command: default SIGTERM (the pool's terminate() must end
    them quietly) and SIGINT ignored (Ctrl-C is the parent's to handle)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()


def _die_with_parent() -> None:
    """Linux: have the kernel kill this worker when the thread that forked it ends.

    Why: a pool's worker-handler thread can fork a replacement worker while terminate() runs
    (a CPython race that a loaded machine widens); that worker outlived the interrupted command,
    holding its stderr open, so a caller waiting for the output hung.  Elsewhere this is a no-op."""
    import ctypes
    import multiprocessing
    import os

    parent = multiprocessing.parent_process()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if parent is not None and os.getppid() != parent.pid:  # the parent died before prctl took effect
        os._exit(1)
