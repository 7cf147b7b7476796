"""``nmtkit-symmetrize FWD REV``: combine two directional word alignments (Pharaoh files) into one.

Why a command: the guided-alignment recipe (eflomal or fast_align in both directions, then
``nmtkit-preprocess --alignfile``) needs the two directions symmetrized, which took a
``python -c`` one-liner importing nmtkit's internal modules.
"""
from __future__ import annotations

import click

from nmtkit.cli.common import NmtkitCommand, console, handle_errors, run_console_script
from nmtkit.evaluate.symmetrize import METHODS

PROG = "nmtkit-symmetrize"


@click.command("symmetrize", cls=NmtkitCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("forward", type=click.Path(dir_okay=False))
@click.argument("reverse", type=click.Path(dir_okay=False))
@click.option("--method", type=click.Choice(list(METHODS)), default="grow-diag-final-and", show_default=True,
              help="intersect: precision; union: recall; grow-diag-final(-and): in between (Koehn et al. 2003).")
@click.option("--output", "-o", default="-", show_default=True, type=click.Path(dir_okay=False),
              help="The symmetrized links, source-target (-: stdout).")
@click.option("--flipped-output", type=click.Path(dir_okay=False), metavar="FILE",
              help="Also write them target-source (j-i): the --alignfile of the reverse direction's data.")
@handle_errors(PROG)
def command(forward: str, reverse: str, method: str, output: str, flipped_output: str | None) -> None:
    """Symmetrize FORWARD and REVERSE alignments, one Pharaoh line (i-j, 0-based words) per sentence pair.

    Both files index source word i and target word j, as eflomal (-f, -r) and fast_align (with
    and without -r) write them.

    \b
    Example (guided alignment, docs/guide/alignment.md):
      eflomal-align -s train.en -t train.de -f train.fwd -r train.rev
      nmtkit-symmetrize train.fwd train.rev -o train.en-de.align --flipped-output train.de-en.align
      nmtkit-preprocess -s en -t de --trainpref train --alignfile train.en-de ... --destdir data/ende
    """
    from nmtkit.errors import NmtkitError
    from nmtkit.evaluate.alignment_io import read_alignments, write_pharaoh
    from nmtkit.evaluate.symmetrize import symmetrize
    from nmtkit.utils.overlap import refuse_outputs_over_inputs
    from nmtkit.utils.stdio import is_stdio

    outputs = [("--output", output), ("--flipped-output", flipped_output)]
    refuse_outputs_over_inputs(outputs, [("FORWARD", forward), ("REVERSE", reverse)])
    if flipped_output is not None and (flipped_output == output or (is_stdio(flipped_output) and is_stdio(output))):
        raise NmtkitError("--output and --flipped-output must be different files")
    fwd, rev = read_alignments(forward), read_alignments(reverse)  # errors name the file and line
    if len(fwd) != len(rev):
        raise NmtkitError(f"{forward} has {len(fwd)} lines, {reverse} has {len(rev)}: not the same sentence pairs")
    links = [symmetrize(f, r, method) for f, r in zip(fwd, rev)]
    write_pharaoh(output, links)  # both written whole or not at all (atomic)
    if flipped_output is not None:
        write_pharaoh(flipped_output, [{(j, i) for i, j in s} for s in links])
    n = sum(map(len, links))
    console.print(f"{method}: {n:,} links in {len(links):,} sentence pairs "
                  f"(forward {sum(map(len, fwd)):,}, reverse {sum(map(len, rev)):,})")


if __name__ == "__main__":  # python -m nmtkit.cli.symmetrize (the console script starts in nmtkit.launch)
    run_console_script(command)
