"""The option reference (reference/cli.md), generated from the click commands themselves.

Two uses:

- a MkDocs hook (``hooks:`` in mkdocs.yml): at every build it adds the page ``reference/cli.md``,
  so the reference always matches the code and is never written twice;
- a script: ``python docs/gen_cli_reference.py`` prints the same Markdown.

Each command's text is what its ``--help`` prints: the docstring, the usage line, and for each
option its names and help (defaults and ranges included), in ``--help``'s order.
"""
from __future__ import annotations

import html
import importlib
import inspect
import re
import textwrap

import click

PAGE = "reference/cli.md"

#: Subcommands in the order of a job; any other command is listed after them.
ORDER = ["preprocess", "train", "translate", "score", "align", "symmetrize", "average", "shortlist", "sample"]


def _md(text: str) -> str:
    """Help text as literal Markdown inside a table cell: no HTML, emphasis or cell breaks."""
    text = html.escape(" ".join(text.split()), quote=False)
    return re.sub(r"([\\`*_|\[\]])", r"\\\1", text)


def _commands() -> list[tuple[str, click.Command]]:
    """Every console script but the ``nmtkit`` group, with its click command."""
    try:
        from nmtkit.commands import COMMANDS  # the one list of commands
    except ImportError:  # before nmtkit/commands.py
        from nmtkit.cli.main import SUBCOMMANDS as COMMANDS
    names = [n for n in ORDER if n in COMMANDS] + [n for n in COMMANDS if n not in ORDER]
    return [(f"nmtkit-{n}", importlib.import_module(COMMANDS[n]).command) for n in names]


def _help_text(cmd: click.Command) -> list[str]:
    """The command's help as Markdown: paragraphs rewrapped, click's ``\\b`` blocks verbatim."""
    doc = inspect.cleandoc((cmd.help or "").split("\f")[0])
    out: list[str] = []
    for para in re.split(r"\n\s*\n", doc):
        lines = para.splitlines()
        if lines and lines[0].strip() == "\b":
            out += ["```text", *textwrap.dedent("\n".join(lines[1:])).splitlines(), "```", ""]
        elif para.strip():
            text = html.escape(" ".join(para.split()), quote=False)
            out += [re.sub(r"([\\`*_\[\]])", r"\\\1", text), ""]
    return out


def _table(rows: list[tuple[str, str]]) -> list[str]:
    return ["| option | meaning |", "|---|---|", *(f"| `{opts}` | {_md(text)} |" for opts, text in rows), ""]


def _option_tables(cmd: click.Command, ctx: click.Context) -> list[str]:
    """The options as ``--help`` lists them: one table, or one per help panel (rich-click's
    ``panels``, titled as ``--help`` titles them) where the command has panels."""
    records = [(p, p.get_help_record(ctx)) for p in cmd.get_params(ctx)]
    records = [(p, r) for p, r in records if r is not None]
    panels = getattr(cmd, "panels", None) or []
    if not panels:
        return _table([r for _, r in records]) if records else []
    out: list[str] = []
    used: set[int] = set()
    for panel in panels:
        names = set(getattr(panel, "options", None) or [])
        rows = [(i, r) for i, (p, r) in enumerate(records)
                if i not in used and names & set(getattr(p, "opts", []) + getattr(p, "secondary_opts", []))]
        if rows:
            used.update(i for i, _ in rows)
            out += [f"**{html.escape(str(panel.name), quote=False)}**", "", *_table([r for _, r in rows])]
    rest = [r for i, (_, r) in enumerate(records) if i not in used]
    if rest:
        out += ["**Options**", "", *_table(rest)]
    return out


def _section(name: str, cmd: click.Command, parent: click.Context | None, level: int) -> list[str]:
    accepted = inspect.signature(click.Context).parameters  # settings meant for another Context class
    settings = {k: v for k, v in cmd.context_settings.items() if k in accepted}
    ctx = click.Context(cmd, info_name=name.split()[-1], parent=parent, **settings)
    out = ["", f"{'#' * level} {name}", ""]
    out += ["```text", " ".join([name, *cmd.collect_usage_pieces(ctx)]), "```", ""]
    out += _help_text(cmd)
    out += _option_tables(cmd, ctx)
    if isinstance(cmd, click.Group):
        for sub in cmd.list_commands(ctx):
            out += _section(f"{name} {sub}", cmd.get_command(ctx, sub), ctx, level + 1)
    return out


def render() -> str:
    """The whole page."""
    commands = _commands()
    out = [
        "# Command-line reference",
        "",
        "Generated from the click commands at every documentation build (`docs/gen_cli_reference.py`):",
        "each section is what `COMMAND --help` prints. Every `nmtkit-X` is also `nmtkit X`.",
        "",
    ]
    out += [f"- [`{name}`](#{name})" for name, _ in commands]
    for name, cmd in commands:
        out += _section(name, cmd, None, 2)
    return "\n".join(out) + "\n"


def on_files(files, config):  # noqa: ANN001, ANN201 - the MkDocs hook's signature
    """MkDocs hook: add the generated page to the site."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=render()))
    return files


if __name__ == "__main__":
    print(render(), end="")
