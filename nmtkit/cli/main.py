"""The ``nmtkit`` click group: one entry point with every working subcommand."""
from __future__ import annotations

import importlib
from typing import Any

import click

from nmtkit import __version__
from nmtkit.commands import COMMANDS

#: Subcommand name -> module that defines ``command`` (a click.Command): the one list, nmtkit.commands.
SUBCOMMANDS: dict[str, str] = COMMANDS


class LazyGroup(click.Group):
    """Imports a subcommand's module only when it is used, so ``nmtkit --help`` is fast."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """UTF-8 standard streams before click prints anything (help, usage errors)."""
        from nmtkit.utils.stdio import use_utf8_stdio

        use_utf8_stdio()
        return super().main(*args, **kwargs)

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except BrokenPipeError:  # ``nmtkit --help | head``: 141 as for every command, not click's status 1
            from nmtkit.cli.common import exit_broken_pipe

            exit_broken_pipe()

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in SUBCOMMANDS:
            return None
        return importlib.import_module(SUBCOMMANDS[name]).command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nmtkit")
def cli() -> None:
    """nmtkit: attention-based neural machine translation from the command line."""


command = cli  # what nmtkit.launch runs, as for every command module

if __name__ == "__main__":  # python -m nmtkit.cli.main (the console script starts in nmtkit.launch)
    from nmtkit.cli.common import run_console_script

    run_console_script(cli)
