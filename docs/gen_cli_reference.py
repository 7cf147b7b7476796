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
import re

import click

PAGE = "reference/cli.md"

#: (console script, module defining ``command``), in the order of a job.
COMMANDS = [
    ("nmtkit-preprocess", "nmtkit.cli.preprocess"),
    ("nmtkit-train", "nmtkit.cli.train"),
    ("nmtkit-translate", "nmtkit.cli.translate"),
    ("nmtkit-score", "nmtkit.cli.score"),
    ("nmtkit-align", "nmtkit.cli.align"),
    ("nmtkit-average", "nmtkit.cli.average"),
    ("nmtkit-shortlist", "nmtkit.cli.shortlist"),
    ("nmtkit-sample", "nmtkit.cli.sample"),
]


def _md(text: str) -> str:
    """Help text as literal Markdown inside a table cell: no HTML, emphasis or cell breaks."""
    text = html.escape(" ".join(text.split()), quote=False)
    return re.sub(r"([\\`*_|\[\]])", r"\\\1", text)


def _commands() -> list[tuple[str, click.Command]]:
    from nmtkit.cli.main import SUBCOMMANDS

    listed = {module for _, module in COMMANDS}
    missing = sorted(set(SUBCOMMANDS.values()) - listed)
    if missing:  # a new subcommand must get its section here, or the build fails
        raise RuntimeError(f"docs/gen_cli_reference.py: add {', '.join(missing)} to COMMANDS")
    return [(name, importlib.import_module(module).command) for name, module in COMMANDS]


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
        ctx = click.Context(cmd, info_name=name)
        out += ["", f"## {name}", ""]
        out += ["```text", " ".join([name, *cmd.collect_usage_pieces(ctx)]), "```", ""]
        doc = (cmd.help or "").split("\f")[0]
        paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", doc.strip()) if p.strip()]
        for para in paragraphs:
            out += [html.escape(para, quote=False).replace("*", r"\*").replace("_", r"\_"), ""]
        rows = [p.get_help_record(ctx) for p in cmd.get_params(ctx)]
        rows = [r for r in rows if r is not None]
        if rows:
            out += ["| option | meaning |", "|---|---|"]
            out += [f"| `{opts}` | {_md(text)} |" for opts, text in rows]
    return "\n".join(out) + "\n"


def on_files(files, config):  # noqa: ANN001, ANN201 - the MkDocs hook's signature
    """MkDocs hook: add the generated page to the site."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=render()))
    return files


if __name__ == "__main__":
    print(render(), end="")
