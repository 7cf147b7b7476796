"""The console scripts' entry (``run_console_script``): the interpreter's exit statuses and
output, kept while the process ends with ``os._exit`` (no module teardown)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import atexit, ctypes, sys
    import click
    from nmtkit.cli.common import NmtkitCommand, handle_errors, run_console_script

    @click.command(cls=NmtkitCommand)
    @click.argument("how")
    @handle_errors("nmtkit-test")
    def command(how):
        atexit.register(lambda: print("atexit ran", file=sys.stderr))
        sys.stdout.write("[stdout]")
        ctypes.CDLL(None).printf(b"[C stdio]")  # block-buffered into a pipe: only fflush writes it
        if how == "int":
            sys.exit(3)
        if how == "str":
            sys.exit("a message")
        if how == "huge":
            sys.exit(2 ** 40 + 7)
        if how == "usage":
            raise click.UsageError("bad")
        if how == "thread":  # the interpreter waits for it: so must the entry
            import threading, time
            threading.Thread(target=lambda: (time.sleep(0.5), print("thread done", file=sys.stderr))).start()
        sys.__stdout__.write("[original stdout]")  # after the command flushed sys.stdout: the entry must flush this

    run_console_script(command)
    print("not reached", file=sys.stderr)
''')


@pytest.mark.parametrize("how, status, err", [("ok", 0, ""), ("int", 3, ""), ("str", 1, "a message"), ("huge", 7, ""),
                                              ("usage", 2, "bad"), ("thread", 0, "thread done")])
def test_exit_status_output_and_atexit(how, status, err):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # buffered, as for a user
    res = subprocess.run([sys.executable, "-c", SCRIPT, how], capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode == status, res.stderr
    assert "[stdout]" in res.stdout and "[C stdio]" in res.stdout
    if how in ("ok", "thread"):
        assert "[original stdout]" in res.stdout
    assert "not reached" not in res.stderr
    assert "atexit ran" in res.stderr
    assert err in res.stderr


def test_every_console_script_uses_it():
    """The console scripts, derived from the one list (nmtkit.commands), each start through
    nmtkit.launch (the guard around the command module's import) and run the module's ``command``;
    ``python -m`` runs that command through run_console_script too."""
    import importlib
    import inspect
    import runpy
    from pathlib import Path

    import nmtkit.launch
    from nmtkit.commands import COMMANDS, GROUP, module

    root = Path(__file__).resolve().parents[2]
    setup_py = (root / "setup.py").read_text(encoding="utf-8")
    assert "console_scripts" in setup_py and "entry_points" not in (root / "setup.cfg").read_text(encoding="utf-8")
    scripts = runpy.run_path(str(root / "nmtkit" / "commands.py"))["console_scripts"]()
    assert len(scripts) == 10 == len(COMMANDS) + 1  # nine commands (symmetrize the last) and the group
    for entry in scripts:
        target = entry.split("=", 1)[1].strip()
        where, name = target.split(":")
        assert where == "nmtkit.launch", entry
        assert callable(getattr(nmtkit.launch, name))
        mod = importlib.import_module(module(name))
        assert callable(mod.command)
        assert "run_console_script(" in inspect.getsource(mod).split('if __name__ == "__main__":')[1], entry
    assert GROUP == "nmtkit"
