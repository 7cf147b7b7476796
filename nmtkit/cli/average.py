"""``nmtkit-average``: average the parameters of several checkpoints into one checkpoint."""
from __future__ import annotations

from pathlib import Path

import click

from nmtkit.cli.common import NmtkitCommand, console, handle_errors, run_console_script
from nmtkit.errors import NmtkitError
from nmtkit.utils.overlap import refuse_outputs_over_inputs

PROG = "nmtkit-average"


@click.command("average", cls=NmtkitCommand, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--inputs", "-i", multiple=True, help="Checkpoints to average (repeatable, or several after one --inputs).")
@click.option("--last", type=click.IntRange(min=1), help="Average the last N checkpoint{epoch}.pt files of --save-dir.")
@click.option("--save-dir", type=click.Path(file_okay=False), help="Training directory for --last.")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="Where to write the averaged checkpoint.")
@click.argument("more", nargs=-1, metavar="[CHECKPOINT]...")  # checked as --inputs are, in the same words
@handle_errors(PROG)
def command(inputs: tuple[str, ...], last: int | None, save_dir: str | None, output: str, more: tuple[str, ...]) -> None:
    """Average checkpoints: --inputs a.pt b.pt ... or --last N --save-dir DIR, written to -o.

    The result is an ordinary checkpoint that translate, score and align load like any other
    (it holds no training state).  Checkpoints of different models are refused."""
    from nmtkit.train.average import average_checkpoints, last_epoch_checkpoints
    from nmtkit.checkpoint import epoch_number, save_checkpoint

    paths = list(inputs) + list(more)
    if last is not None:
        if paths:
            raise NmtkitError("give either --inputs or --last N --save-dir DIR, not both")
        if save_dir is None:
            raise NmtkitError("--last needs --save-dir")
        paths = [str(p) for p in last_epoch_checkpoints(save_dir, last)]
    if not paths:
        raise NmtkitError("nothing to average: give --inputs a.pt b.pt ... or --last N --save-dir DIR")
    refuse_outputs_over_inputs([("--output", output)], [("--last" if last is not None else "--inputs", p) for p in paths])
    name = Path(output).name
    if name in ("checkpoint_last.pt", "checkpoint_best.pt") or epoch_number(output) is not None:
        # the trainer resumes from checkpoint_last.pt, replaces checkpoint_best.pt, and --last N
        # reads checkpointN.pt back
        raise NmtkitError(f"--output {output}: {name} is a name the trainer writes and reads; "
                          "give the average another name (e.g. checkpoint_avg.pt)")
    payload = average_checkpoints(paths)
    save_checkpoint(output, payload)
    console.print(f"averaged {len(paths)} checkpoint{'s' if len(paths) != 1 else ''} ({', '.join(paths)}) -> {output}")


if __name__ == "__main__":  # python -m nmtkit.cli.average (the console script starts in nmtkit.launch)
    run_console_script(command)
