"""Build script: the metadata is setup.cfg's; the console scripts come from nmtkit/commands.py,
the one list of commands (read as a file, without importing nmtkit)."""
import os
import runpy

from setuptools import setup

_commands = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "nmtkit", "commands.py"))
setup(entry_points={"console_scripts": _commands["console_scripts"]()})
