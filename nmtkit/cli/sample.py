"""``nmtkit sample``: write the seeded English->German toy corpus with gold alignments.

The corpus is what the README demo and the tests train on; see
:mod:`nmtkit.sample` for the grammar and why it exists.
"""
from __future__ import annotations

import click
from rich.table import Table

from nmtkit.cli.common import SEED, AtLeast, NmtkitCommand, console, handle_errors, run_console_script
from nmtkit.sample import describe_corpus, generate_corpus, is_sample_corpus
from nmtkit.sample.corpus import MAX_PAIRS
from nmtkit.utils.atomic_dir import atomic_directory

PROG = "nmtkit-sample"


@click.command("sample", cls=NmtkitCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--out", "out_dir", required=True, metavar="DIR",
              help="Directory for train/valid/test.{en,de,align}; must be new or empty.")
@click.option("--seed", default=1, show_default=True, type=SEED, help="Random seed; same seed, same files.")
@click.option("--train", "n_train", default=20000, show_default=True, type=AtLeast(1, MAX_PAIRS),
              help="Training sentence pairs.")
@click.option("--valid", "n_valid", default=500, show_default=True, type=AtLeast(1, MAX_PAIRS),
              help="Validation sentence pairs.")
@click.option("--test", "n_test", default=500, show_default=True, type=AtLeast(1, MAX_PAIRS),
              help="Test sentence pairs.")
@click.option("--overwrite", is_flag=True, help="Replace --out if it holds a corpus nmtkit sample wrote (never another directory).")
@handle_errors(PROG)
def command(out_dir: str, seed: int, n_train: int, n_valid: int, n_test: int, overwrite: bool) -> None:
    """Generate the sample English->German corpus with gold word alignments."""
    with atomic_directory(out_dir, overwrite=overwrite, owned=is_sample_corpus, writer="nmtkit sample") as tmp:
        generate_corpus(tmp, seed=seed, n_train=n_train, n_valid=n_valid, n_test=n_test)
    info = describe_corpus(out_dir)
    table = Table(title=f"sample corpus in {out_dir} (seed {seed})", title_justify="left")
    for col in ("split", "pairs", "en tokens", "de tokens"):
        table.add_column(col, justify="left" if col == "split" else "right")
    for split, row in info["splits"].items():
        table.add_row(split, str(row["lines"]), str(row["en_tokens"]), str(row["de_tokens"]))
    console.print(table)
    console.print(f"train vocabulary: {info['en_types']} en / {info['de_types']} de types; "
                  f"test pairs with a name unseen in train: {info['test_unseen_name_share']:.0%}")


if __name__ == "__main__":  # python -m nmtkit.cli.sample (the console script starts in nmtkit.launch)
    run_console_script(command)
