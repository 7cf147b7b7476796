"""The console scripts' entry points: each imports its command module under a guard.

Why: a console script imports its command's module before any of nmtkit's handlers exist
(click, ``nmtkit.cli.common`` and, for ``nmtkit-train``, torch and the models), so a Ctrl-C in
those first tens of milliseconds was a ``KeyboardInterrupt`` traceback and a SIGTERM a death by
the signal.  Here SIGTERM is an interrupt while the module loads, and an interrupt then ends the
command with one line and status 130, as a running command's would.  Before the guard only
Python's own start-up and ``nmtkit/__init__.py`` (which imports ``importlib`` and ``typing``)
run unguarded.
"""
from __future__ import annotations

import importlib
import signal
import sys
from functools import partial

#: Entry point -> (module with ``main``, program name in messages).
COMMANDS = {
    "nmtkit": ("nmtkit.cli.main", "nmtkit"),
    "preprocess": ("nmtkit.cli.preprocess", "nmtkit-preprocess"),
    "train": ("nmtkit.cli.train", "nmtkit-train"),
    "translate": ("nmtkit.cli.translate", "nmtkit-translate"),
    "score": ("nmtkit.cli.score", "nmtkit-score"),
    "align": ("nmtkit.cli.align", "nmtkit-align"),
    "average": ("nmtkit.cli.average", "nmtkit-average"),
    "shortlist": ("nmtkit.cli.shortlist", "nmtkit-shortlist"),
    "sample": ("nmtkit.cli.sample", "nmtkit-sample"),
}


def _interrupt(signum: int, frame: object) -> None:  # noqa: ARG001 - a signal handler's signature
    raise KeyboardInterrupt


def run(name: str) -> object:
    """Import the command ``name`` of :data:`COMMANDS` under the guard, then run it.  A SIGTERM
    that the parent set to be ignored stays ignored, and off the main thread (no signal handlers
    there) the import is simply not guarded."""
    module, prog = COMMANDS[name]
    previous = signal.getsignal(signal.SIGTERM)
    guard = previous is not signal.SIG_IGN
    if guard:
        try:
            signal.signal(signal.SIGTERM, _interrupt)
        except ValueError:  # not the main thread
            guard = False
    try:
        main = importlib.import_module(module).main
    except KeyboardInterrupt:
        try:
            sys.stderr.write(f"{prog}: interrupted\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # stderr closed or gone: the status still says it
            pass
        raise SystemExit(130) from None
    finally:
        if guard:
            signal.signal(signal.SIGTERM, previous)
    return main()


# The console scripts (setup.cfg), one per command.
nmtkit = partial(run, "nmtkit")
preprocess = partial(run, "preprocess")
train = partial(run, "train")
translate = partial(run, "translate")
score = partial(run, "score")
align = partial(run, "align")
average = partial(run, "average")
shortlist = partial(run, "shortlist")
sample = partial(run, "sample")
