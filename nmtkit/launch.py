"""The console scripts' entry points: each imports its command module under a guard.

Why: a console script imports its command's module before any of nmtkit's handlers exist
(click, ``nmtkit.cli.common`` and, for ``nmtkit-train``, torch and the models), so a Ctrl-C in
those first tens of milliseconds was a ``KeyboardInterrupt`` traceback and a SIGTERM a death by
the signal.  Here the import runs under :func:`nmtkit.utils.signals.interrupt_ends_command`, the
one SIGTERM-to-interrupt path: an interrupt then ends the command with one line and status 130,
as a running command's would.  Before the guard only Python's own start-up and the small
modules it needs (``nmtkit/__init__.py``, :mod:`nmtkit.commands`, :mod:`nmtkit.utils.signals`)
run unguarded.  The entry points are this module's attributes, one per name of
:mod:`nmtkit.commands` (``nmtkit.launch:translate``).
"""
from __future__ import annotations

import importlib
import os
import sys
from functools import partial
from typing import Callable, Optional

from nmtkit.commands import COMMANDS, GROUP, module, program
from nmtkit.utils.signals import interrupt_ends_command


def working_directory_problem() -> Optional[str]:
    """What is wrong with the working directory, or None.

    Why: a working directory that was deleted (or moved away) under a shell made torch abort
    with "oneMKL FATAL ERROR" on import, and a relative path fail with "No such file or
    directory" naming no path.  ``$PWD`` names it when that path is gone too (else it is stale)."""
    try:
        os.getcwd()
        return None
    except OSError as exc:
        pwd = os.environ.get("PWD")
        named = f" {pwd}" if pwd and not os.path.exists(pwd) else ""
        if isinstance(exc, FileNotFoundError):
            return f"the working directory{named} no longer exists (deleted or moved away?): cd into an existing one"
        return f"the working directory{named} cannot be read ({exc.strerror or exc}): cd into another one"


def run(name: str) -> None:
    """Check the working directory, import the module of command ``name`` (:mod:`nmtkit.commands`)
    under the guard, then run its ``command`` as a console script
    (:func:`nmtkit.cli.common.run_console_script`)."""
    problem = working_directory_problem()
    if problem is not None:  # before any import that may need it (torch)
        sys.stderr.write(f"{program(name)}: error: {problem}\n")
        sys.exit(1)
    with interrupt_ends_command(program(name)):
        command = importlib.import_module(module(name)).command
    from nmtkit.cli.common import run_console_script

    run_console_script(command)


def __getattr__(name: str) -> Callable[[], None]:
    """``nmtkit.launch:NAME``, the console script of each command."""
    if name == GROUP or name in COMMANDS:
        return partial(run, name)
    raise AttributeError(f"module 'nmtkit.launch' has no attribute {name!r}")
