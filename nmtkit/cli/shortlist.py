"""``nmtkit-shortlist``: compile a lexical table into a model's shortlist for ``nmtkit-translate --shortlist``.

The text table (``source target [count]`` lines) is turned into target ids of one model once,
instead of at every translate command's start-up (:mod:`nmtkit.generate.shortlist`).
"""
from __future__ import annotations

import click

from nmtkit.cli.common import NmtkitCommand, console, handle_errors, run_console_script
from nmtkit.utils.overlap import refuse_outputs_over_inputs

PROG = "nmtkit-shortlist"


@click.command("shortlist", cls=NmtkitCommand, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--path", required=True,
              help="Checkpoint (or ensemble a.pt:b.pt) whose target vocabulary and text pipeline the shortlist is for.")
@click.option("--table", required=True, type=click.Path(dir_okay=False),
              help="Lexical table of 'source target [count]' lines (nmtkit-align --build-dict FILE writes one).")
@click.option("--data", type=click.Path(file_okay=False),
              help="The data dir whose tokenizer/BPE nmtkit-translate --data uses (its dictionaries must match).")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False),
              help="Where to write the compiled shortlist (an .npz archive, written atomically).")
@handle_errors(PROG)
def command(path: str, table: str, data: str | None, output: str) -> None:
    """Compile a lexical table for one model; nmtkit-translate --shortlist reads the result
    like the table itself (same ids for any --shortlist-k), without the start-up work."""
    from nmtkit.generate.bundle import ModelBundle
    from nmtkit.generate.checkpoint_paths import split_checkpoint_paths
    from nmtkit.generate.shortlist import compile_shortlist
    from nmtkit.utils.progress import progress_bar

    refuse_outputs_over_inputs([("--output", output)], [("--table", table), ("--data", data),
                                                        *(("--path", p) for p in split_checkpoint_paths(path))])
    bundle = ModelBundle.load(path, device="cpu", amp="none")
    if data is not None:
        bundle.use_data_pipelines(data)
    with progress_bar("keys", transient=True) as bar:
        task = bar.add_task("compile", total=None)
        n_keys, n_ids = compile_shortlist(table, output, bundle.tgt_pipe, bundle.tgt_dict, bundle.src_pipe.lowercase,
                                          progress=lambda n: bar.advance(task, n))
    console.print(f"compiled {n_keys:,} source keys ({n_ids:,} target ids) of {table} for {path} -> {output}")


if __name__ == "__main__":  # python -m nmtkit.cli.shortlist (the console script starts in nmtkit.launch)
    run_console_script(command)
