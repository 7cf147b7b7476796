"""``nmtkit-preprocess``: parallel text -> dictionaries + memory-mappable token files."""
from __future__ import annotations

import time

import click
from rich.table import Table

from nmtkit.cli.common import MAX_THREADS, FiniteFloat, NmtkitCommand, console, handle_errors, run_console_script

PROG = "nmtkit-preprocess"


@click.command("preprocess", cls=NmtkitCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-s", "--source-lang", required=True, help="Source language suffix, e.g. en.")
@click.option("-t", "--target-lang", required=True, help="Target language suffix, e.g. de.")
@click.option("--trainpref", help="Training prefix(es), comma-separated: files PREFIX.{src,tgt}.")
@click.option("--validpref", help="Validation prefix(es), comma-separated (valid, valid1, ...).")
@click.option("--testpref", help="Test prefix(es), comma-separated (test, test1, ...).")
@click.option("--destdir", required=True, type=click.Path(file_okay=False), help="Output data directory.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, MAX_THREADS), help="Processes for tokenization/BPE.")
@click.option("--nwordssrc", default=-1, show_default=True, type=click.IntRange(min=-1), help="Keep the N most frequent source tokens (-1: all).")
@click.option("--nwordstgt", default=-1, show_default=True, type=click.IntRange(min=-1), help="Keep the N most frequent target tokens (-1: all).")
@click.option("--thresholdsrc", default=0, show_default=True, type=click.IntRange(min=0), help="Map source tokens seen fewer times to <unk>.")
@click.option("--thresholdtgt", default=0, show_default=True, type=click.IntRange(min=0), help="Map target tokens seen fewer times to <unk>.")
@click.option("--joined-dictionary", is_flag=True, help="One dictionary for both languages.")
@click.option("--srcdict", type=click.Path(dir_okay=False), help="Reuse this source dictionary.")
@click.option("--tgtdict", type=click.Path(dir_okay=False), help="Reuse this target dictionary.")
@click.option("--tokenizer", type=click.Choice(["moses", "none"]), default="none", show_default=True)
@click.option("--lowercase", is_flag=True, help="Lowercase after tokenization.")
@click.option("--bpe", type=click.Choice(["subword-nmt", "sentencepiece", "none"]), default="none", show_default=True,
              help="Subword segmentation learned on --trainpref: subword-nmt codes, or a SentencePiece model (--spm-type).")
@click.option("--bpe-merges", default=10000, show_default=True, type=click.IntRange(min=1, max=10_000_000), help="Number of BPE merge operations (subword-nmt).")
@click.option("--spm-type", type=click.Choice(["unigram", "bpe"]), default="unigram", show_default=True,
              help="--bpe sentencepiece: the model type.")
@click.option("--spm-vocab-size", default=8000, show_default=True, type=click.IntRange(min=2, max=10_000_000),
              help="--bpe sentencepiece: pieces to learn (at most; fewer on a small corpus). Written as subword-nmt "
                   "writes pieces (a piece inside a word ends in @@), a dictionary may hold up to twice as many.")
@click.option("--separate-bpe", is_flag=True, help="Learn one BPE (or SentencePiece) model per language instead of a joint one.")
@click.option("--bpe-codes", type=click.Path(dir_okay=False), help="Apply these subword-nmt codes (e.g. the reverse direction's bpe.codes) instead of learning new ones.")
@click.option("--alignfile", metavar="PREFIX[,PREFIX...]",
              help="Word alignments of the training pairs: PREFIX.align (Pharaoh i-j, 0-based whitespace words of "
                   "the lines as given), one prefix per --trainpref prefix; stored for --guided-alignment-weight.")
@click.option("--max-len", default=50, show_default=True, type=click.IntRange(min=0), help="Drop training pairs with more tokens on either side (0: off).")
@click.option("--max-len-ratio", default=9.0, show_default=True, type=FiniteFloat(min=0), help="Drop training pairs whose length ratio exceeds this (0: off).")
@click.option("--strict", is_flag=True, help="Fail on empty lines in training data instead of skipping them.")
@click.option("--overwrite", is_flag=True, help="Replace a non-empty --destdir that nmtkit-preprocess wrote (never another directory).")
@handle_errors(PROG)
def command(**kw) -> None:  # noqa: ANN003
    """Tokenize, BPE-segment, build dictionaries and binarize parallel text.

    \b
    Examples:
      nmtkit-preprocess -s en -t de --trainpref raw/train --validpref raw/valid --destdir data/ende --tokenizer moses --bpe subword-nmt
      nmtkit-preprocess -s en -t de --trainpref raw/train --validpref raw/valid --destdir data/spm --bpe sentencepiece
    """
    from nmtkit.data.preprocess import PreprocessOptions, check_destdir, run_preprocess
    from nmtkit.utils.progress import progress_bar

    kw["joint_bpe"] = not kw.pop("separate_bpe")
    opt = PreprocessOptions(**kw)
    check_destdir(opt)  # before the progress display, so that a refusal is one line
    t0 = time.perf_counter()
    with progress_bar("lines", transient=True) as progress:
        meta = run_preprocess(opt, progress)
    elapsed = time.perf_counter() - t0
    print_summary(meta, elapsed)


def print_summary(meta: dict, elapsed: float) -> None:
    """The closing table: per split and language, sentences, tokens and <unk> rate."""
    src, tgt = meta["source_lang"], meta["target_lang"]
    table = Table(title=f"nmtkit-preprocess: {src}->{tgt}  (dict {src} {meta['dict_sizes'][src]:,}, {tgt} {meta['dict_sizes'][tgt]:,})")
    for col in ("split", "lang", "sentences", "tokens", "<unk> %"):
        table.add_column(col, justify="right" if col not in ("split", "lang") else "left")
    total_lines = 0
    for name, info in meta["splits"].items():
        total_lines += info["sentences"]
        for lang in (src, tgt):
            li = info[lang]
            table.add_row(name, lang, f"{info['sentences']:,}", f"{li['tokens']:,}", f"{100 * li['unk_rate']:.2f}")
    console.print(table)
    removed = meta["splits"].get("train", {}).get("removed")
    if removed:
        console.print(
            f"train filters removed: {removed['empty']:,} empty, {removed['too_long']:,} longer than {meta['max_len']}, "
            f"{removed['bad_ratio']:,} with length ratio > {meta['max_len_ratio']}"
        )
    aligned = meta["splits"].get("train", {}).get("alignments")
    if aligned:
        console.print(f"train alignments: {aligned['word_links']:,} word links -> {aligned['piece_links']:,} piece links")
    console.print(f"done in {elapsed:.1f}s ({total_lines / max(elapsed, 1e-9):,.0f} sentence pairs/s)")
    from nmtkit.data.preprocess import unknown_word_advice

    for warning in unknown_word_advice(meta):
        console.print(f"[yellow]warning:[/yellow] {warning}")


if __name__ == "__main__":  # python -m nmtkit.cli.preprocess (the console script starts in nmtkit.launch)
    run_console_script(command)
