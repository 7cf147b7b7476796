"""SIGINT/SIGTERM during training: finish what changes the training state, then stop cleanly.

Why: a signal that killed the process in the middle of an update or a checkpoint write would
lose the work since the last checkpoint, or leave a torn file.  So the handler only remembers
the signal; the loop checks it after each update, writes checkpoint_last.pt and exits 130.
Phases that change no training state (validation, BLEU) are marked :func:`interruptible`: there
the handler raises :class:`StopNow` at once instead of after minutes on a large valid set.
"""
from __future__ import annotations

import functools
import signal
from typing import Any, Callable, Optional, TypeVar

Method = TypeVar("Method", bound=Callable[..., Any])


class StopNow(Exception):
    """Raised by the signal handler inside an interruptible phase (validation)."""


class StopSignals:
    """The SIGINT/SIGTERM received (if any) and whether an interruptible phase is running."""

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self.interruptible_depth = 0  # > 0 inside validation: a signal stops at once

    @property
    def received(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        """The signal's name (``SIGINT``), or ``interrupt`` for a KeyboardInterrupt without one."""
        return signal.Signals(self.signum).name if self.signum is not None else "interrupt"

    def _handle(self, signum: int, frame: Any) -> None:  # noqa: ARG002
        self.signum = signum
        if self.interruptible_depth > 0:
            raise StopNow

    def install(self) -> dict[int, Any]:
        """Install the handlers; returns the previous ones for :meth:`restore`."""
        previous: dict[int, Any] = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not in the main thread
                pass
        return previous

    @staticmethod
    def restore(previous: dict[int, Any]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def interruptible(method: Method) -> Method:
    """Marks a method of an object with a ``stop_signals`` attribute as a phase that changes no
    training state: a signal during it raises :class:`StopNow` (so does one received before)."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        signals: StopSignals = self.stop_signals
        if signals.received:
            raise StopNow
        outer = signals.interruptible_depth
        signals.interruptible_depth = outer + 1
        try:
            return method(self, *args, **kwargs)
        finally:
            signals.interruptible_depth = outer

    return wrapper  # type: ignore[return-value]
