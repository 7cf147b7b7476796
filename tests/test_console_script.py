"""The console scripts' entry (``run_console_script``): the interpreter's exit statuses and
output, kept while the process ends with ``os._exit`` (no module teardown)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import atexit, sys
    import click
    from nmtkit.cli.common import run_console_script

    @click.command()
    @click.argument("how")
    def command(how):
        atexit.register(lambda: print("atexit ran", file=sys.stderr))
        sys.stdout.write("unflushed output")  # no newline, no flush: the entry must flush it
        if how == "int":
            sys.exit(3)
        if how == "str":
            sys.exit("a message")
        if how == "usage":
            raise click.UsageError("bad")
        if how == "thread":  # the interpreter waits for it: so must the entry
            import threading, time
            threading.Thread(target=lambda: (time.sleep(0.5), print("thread done", file=sys.stderr))).start()

    run_console_script(command)
    print("not reached", file=sys.stderr)
''')


@pytest.mark.parametrize("how, status, err", [("ok", 0, ""), ("int", 3, ""), ("str", 1, "a message"), ("usage", 2, "bad"),
                                                 ("thread", 0, "thread done")])
def test_exit_status_output_and_atexit(how, status, err):
    res = subprocess.run([sys.executable, "-c", SCRIPT, how], capture_output=True, text=True, timeout=60)
    assert res.returncode == status
    assert res.stdout == "unflushed output"
    assert "atexit ran" in res.stderr and "not reached" not in res.stderr
    assert err in res.stderr


def test_every_console_script_uses_it():
    """setup.cfg's console scripts each end through run_console_script."""
    import configparser
    import importlib
    import inspect
    from pathlib import Path

    cfg = configparser.ConfigParser()
    cfg.read(Path(__file__).resolve().parents[1] / "setup.cfg")
    entries = [line.split("=", 1)[1].strip() for line in cfg["options.entry_points"]["console_scripts"].strip().splitlines()]
    assert len(entries) == 8
    for entry in entries:
        module, func = entry.split(":")
        assert "run_console_script(" in inspect.getsource(getattr(importlib.import_module(module), func)), entry
