"""``nmtkit-align``: word alignments from a model's attention by forced decoding.

Each sentence pair is force-decoded (the model reads the source and is fed the given
target); for every target word the most-attended source word is its link (Luong et al.
2015, section 5.4).  Output: one line of word-level Pharaoh ``i-j`` links per pair, ``i``
indexing the whitespace-separated words of the source line as given and ``j`` those of the
target line, whatever tokenization and BPE the model applies inside.  Subword attention
is merged to words by **summing** a source word's piece columns and **averaging** a target
word's piece rows; the ``</s>`` column is dropped.

``--align-shift`` (Luong et al. 2015, footnote 14): the paper reads the alignment of content-
based attention (dot/general/concat) off the *next* step (shift 1), because the attention
computed at step t, from a decoder state that has just read y_{t-1}, pointed at the source of
y_{t-1} in their models.  Here the default is 0, by measurement: in nmtkit's Luong model the
attention of step t builds the attentional state that predicts y_t itself, and on the
``nmtkit sample`` test set's gold links shift 0 scored far lower AER than shift 1 for both
luong_tiny and rnnsearch_tiny (tests/generate/test_align_e2e.py has the measurements and pins the
default).  Shift 1 remains available for models that behave as the paper's did.

``--posterior`` (rnnsearch, Luong): read the links off the attention posterior given each
target word, ``α_ij · p(y_i | context h_j)`` normalised over ``j``, instead of the attention
``α_ij``, which is computed before ``y_i`` is known (:mod:`nmtkit.models.posterior`).  On the
Hansards gold set it roughly halved the AER of plain models (bench/RESULTS.md, "AER: Canadian Hansards").

Output streams: links on stdout (or ``--output``); tables and progress on stderr; with
``--json`` stdout carries only the scores.  Every output path is checked before the model loads,
and the files (``--output``, ``--build-dict``) are replaced only once every output has been
written: a failed run leaves them as they were (stdout, written last, cannot be taken back).
"""
from __future__ import annotations

import json
import os
import sys
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Optional

import click
from rich.table import Table

from nmtkit.cli.common import (NmtkitCommand, alignment_layer_options, batching_options, console, device_options, handle_errors,
                               run_console_script, set_threads)
from nmtkit.errors import NmtkitError, OutputError
from nmtkit.evaluate.symmetrize import ALL_METHODS, check_symmetrize_options
from nmtkit.utils.overlap import refuse_outputs_over_inputs
from nmtkit.utils.stdio import (STDIO, STDOUT_NAME, direct_target, display_name, input_name, is_stdio, refuse_stdin_twice,
                                 stream_closed)

PROG = "nmtkit-align"

#: Why 0 and not the paper's 1: the module docstring.
DEFAULT_ALIGN_SHIFT = 0
SYMMETRIZATIONS = ALL_METHODS
DEFAULT_PLOTS = 5

#: An output of the run: (option, path, text); ``-`` is stdout.
Output = tuple[str, Any, str]


def parse_plot_ids(text: Optional[str], n_pairs: Optional[int]) -> list[int]:
    """``"0,5,7"`` -> ``[0, 5, 7]`` (0-based pair indices, each below ``n_pairs``; None: not known
    yet, when the paths are checked before any input is read, so no range check)."""
    if text is None:
        return list(range(DEFAULT_PLOTS if n_pairs is None else min(DEFAULT_PLOTS, n_pairs)))
    ids: list[int] = []
    for item in text.split(","):
        item = item.strip()
        if not (item.isascii() and item.isdigit()):  # int() would take '²' as a digit but fail
            raise NmtkitError(f"--plot-ids expects comma-separated 0-based sentence numbers, got {text!r}")
        k = int(item)
        if n_pairs is not None and k >= n_pairs:
            raise NmtkitError(f"--plot-ids {k} is out of range: there are {n_pairs} sentence pairs (0-{n_pairs - 1})")
        if k not in ids:
            ids.append(k)
    return ids


def _check_options(o: dict[str, Any]) -> None:
    """Refuse option combinations that cannot mean anything, before any file is read."""
    from nmtkit.evaluate.alignment_io import check_gold_options

    if o["data"] is not None and (o["source"] is not None or o["target"] is not None):
        raise NmtkitError("give either --data DIR (with --split) or --source/--target, not both")
    if o["data"] is None and (o["source"] is None or o["target"] is None):
        raise NmtkitError("give --source FILE and --target FILE, or --data DIR with --split")
    refuse_stdin_twice([(f"--{name}", o[name]) for name in ("source", "target", "gold", "sure", "possible")])
    check_gold_options(o["gold"], o["sure"], o["possible"])  # before the (slow) checkpoint loading
    check_symmetrize_options(o["symmetrize"], o["reverse_path"] is not None)
    if o["as_json"] and o["gold"] is None and o["sure"] is None:
        raise NmtkitError("--json prints alignment scores and needs --gold or --sure")
    if o["as_json"] and _on_stdout(o["output"]):
        raise NmtkitError("--json prints the scores on standard output: give --output a file for the links")
    if (o["plot_ids"] is not None or o["html"]) and o["plot"] is None:
        raise NmtkitError("--plot-ids and --html need --plot DIR")


def _on_stdout(path: Optional[str]) -> bool:
    """Whether an output option writes to this process's stdout: ``-``, ``/dev/stdout`` and the like."""
    return path is not None and direct_target(path) == 1


def _check_destinations(o: dict[str, Any]) -> None:
    """Every output, checked before the model loads: a run of hours must not end in an error that
    the paths alone could tell (a --plot that is a file, a parent that is a file, an input)."""
    links_on_stdout = not o["as_json"] and (o["output"] is None or _on_stdout(o["output"]))
    if _on_stdout(o["build_dict"]) and (links_on_stdout or o["as_json"]):  # the two would be mixed
        what = "links" if links_on_stdout else "scores"
        raise NmtkitError(f"--build-dict {o['build_dict']}: the {what} are written to standard output; "
                          "give the dictionary a file name")
    if (links_on_stdout or o["as_json"] or _on_stdout(o["build_dict"])) and stream_closed(sys.stdout):
        hint = " (give --output FILE)" if links_on_stdout else ""
        raise OutputError(STDOUT_NAME, f"standard output is closed{hint}")
    files = [(opt, o[key]) for opt, key in (("--output", "output"), ("--build-dict", "build_dict"))
             if o[key] is not None and not is_stdio(o[key])]
    if o["plot"] is not None:  # the heatmaps --plot-ids asks for, or the first DEFAULT_PLOTS (range checked later)
        files += _plot_files(o, parse_plot_ids(o["plot_ids"], None))
    refuse_outputs_over_inputs(files, _inputs(o))
    if o["plot"] is not None:
        _check_destination("--plot", o["plot"], directory=True)
    for opt, path in files:
        _check_destination(opt, path)


def _check_destination(option: str, path: Any, directory: bool = False) -> None:
    """Refuse an output path that cannot be written, creating nothing: a directory where the file
    goes (or a file where the directory goes), a parent that is a file, no permission to create it.
    Missing directories are fine (:func:`~nmtkit.utils.textio.atomic_write` creates them); devices,
    FIFOs and stdout are opened in place when written."""
    if direct_target(path) is not None:
        return
    target = Path(path)
    if target.exists() and target.is_dir() != directory:
        raise OutputError(target, f"{option} needs a directory, and this is a file" if directory
                          else f"is a directory, where {option} writes a file")
    start = target if directory else target.parent
    existing = next((p for p in (start, *start.parents) if p.exists()), None)
    if existing is None:  # not even the current directory exists: let the writer say why
        return
    if not existing.is_dir():
        raise OutputError(target, f"{existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(target, "Permission denied")


def _inputs(o: dict[str, Any]) -> list[tuple[str, Any]]:
    """Every file or directory the command reads, with its option (no output may replace one);
    a checkpoint that does not exist is refused here, before torch is imported."""
    from nmtkit.generate.checkpoint_paths import checkpoint_paths

    ckpts = [("--path", p) for p in checkpoint_paths(o["path"])]
    ckpts += [("--reverse-path", p) for p in (checkpoint_paths(o["reverse_path"]) if o["reverse_path"] else [])]
    return [*ckpts, *[(f"--{k}", o[k]) for k in ("source", "target", "data", "gold", "sure", "possible")]]


def _plot_files(o: dict[str, Any], ids: list[int]) -> list[tuple[str, Any]]:
    """The files --plot DIR will hold (checked, like every output, before the model loads)."""
    out = Path(o["plot"])
    return [("--plot", out / f"align-{k}.png") for k in ids] + ([("--plot", out / "index.html")] if o["html"] else [])


def _print_scores(rows: list[tuple[str, Any]]) -> None:
    table = Table(title="Alignment quality (corpus)")
    for col in ("alignment", "sentences", "links", "precision", "recall", "AER"):
        table.add_column(col, justify="left" if col == "alignment" else "right")
    for name, r in rows:
        table.add_row(name, str(r.n_sentences), str(r.n_hyp), f"{100 * r.precision:.2f}",
                      f"{100 * r.recall:.2f}", f"{100 * r.aer:.2f}")
    console.print(table)


def _scores_json(o: dict[str, Any], scores: list[tuple[str, Any]], method: Optional[str]) -> str:
    final = scores[-1][1]
    return json.dumps({
        "precision": final.precision, "recall": final.recall, "aer": final.aer,
        "align_shift": o["align_shift"], "posterior": o["posterior"], "symmetrize": method,
        "directions": {name: asdict(r) for name, r in scores},
    }, indent=2) + "\n"


def _write_plots(o: dict[str, Any], ids: list[int], prepared, aligned, golds, stack: ExitStack) -> str:  # noqa: ANN001
    """The heatmaps and page of --plot, as temporary files that ``stack`` commits with the other
    outputs -> the line to print once they are."""
    from nmtkit.evaluate.plots import HeatmapEntry, plot_attention, write_attention_html
    from nmtkit.utils.textio import ensure_dir

    out = ensure_dir(o["plot"])
    entries = []
    for k in ids:
        p, a = prepared[k], aligned[k]
        gold = None if golds is None else sorted(golds[k].possible)
        image = out / f"align-{k}.png"
        title = f"sentence {k}" + ("" if gold is None else " (circles: gold links)")
        plot_attention(image, a.attention.numpy(), p.src.words, p.tgt.words, gold=gold, title=title, stack=stack)
        entries.append(HeatmapEntry(image=str(image), src_words=p.src.words, tgt_words=p.tgt.words, title=title))
    if o["html"]:
        write_attention_html(out / "index.html", entries, title=f"Attention alignments ({o['path']})", stack=stack)
    return f"wrote {len(entries)} heatmap(s) to {out}" + (f" and {out / 'index.html'}" if o["html"] else "")


def _write_order(path: Any) -> int:
    """0: a regular file, replaced only when the run is over; 1: a device or FIFO, written in place;
    2: stdout, which no one can take back, so written last."""
    how = direct_target(path)
    return 0 if how is None else 2 if how == 1 else 1


def _write_text(stack: ExitStack, path: Any, text: str) -> None:
    """Write ``text`` to ``path`` through an atomic_write held in ``stack`` (committed when it closes).

    Flushed here, so that a full disk shows now, before any other output is committed; a failed
    write names its own output (the stack's other writers cannot tell whose bare OSError it is)."""
    from nmtkit.utils.textio import atomic_write, output_error

    fh = stack.enter_context(atomic_write(path))
    try:
        fh.write(text)
        fh.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise output_error(exc, display_name(path)) from exc


def _write_outputs(outputs: list[Output], plots: Callable[[ExitStack], None]) -> None:
    """Write every output, committing the files only once all of them have been written.

    Why: a failed --build-dict (a full disk) must not leave --output already replaced.  Regular
    files are written to atomic_write's temporary files first, then the heatmaps (temporary files
    too), devices and stdout, in that order; the files, heatmaps included, are renamed into place
    when the stack closes without error, so a failed write leaves no heatmap behind either.
    """
    ordered = sorted(outputs, key=lambda out: _write_order(out[1]))
    with ExitStack() as stack:
        for _, path, text in (out for out in ordered if _write_order(out[1]) == 0):
            _write_text(stack, path, text)
        plots(stack)
        try:
            with ExitStack() as streams:  # its own stack: a stream failing again as it closes stays in it
                for _, path, text in (out for out in ordered if _write_order(out[1]) > 0):
                    _write_text(streams, path, text)
        except BrokenPipeError:  # the reader of stdout left (| head): the finished files still count
            stack.close()
            raise


def run_align(o: dict[str, Any]) -> None:
    """Everything the command does, given its options as a dictionary: the library aligns
    (:class:`nmtkit.generate.aligner.Aligner`), this writes and prints."""
    from nmtkit.utils.startup import long_lived
    from nmtkit.utils.textio import read_lines

    _check_options(o)
    _check_destinations(o)  # before torch is imported, and the (slow) checkpoint loading and decoding
    with long_lived():  # torch and the model: kept for the whole run
        from nmtkit.generate.aligner import Aligner, read_gold_links

        set_threads(o["threads"])
        aligner = Aligner.from_checkpoint(o["path"], reverse_path=o["reverse_path"], symmetrize=o["symmetrize"],
                                          align_shift=o["align_shift"], batch_size=o["batch_size"],
                                          max_tokens=o["max_tokens"], device=o["device"], posterior=o["posterior"],
                                          amp=o["amp"], alignment_layer=o["alignment_layer"],
                                          alignment_heads=o["alignment_heads"])

    # every input is read and checked before any decoding
    if o["data"] is None:
        src_lines, tgt_lines = read_lines(o["source"]), read_lines(o["target"])
        src_name, tgt_name = input_name(o["source"]), input_name(o["target"])
        pretok = False
    else:
        src_lines, tgt_lines, src_name, tgt_name = aligner.read_split(o["data"], o["split"])
        pretok = True
    prepared = aligner.prepare(src_lines, tgt_lines, pretokenized=pretok, src_name=src_name, tgt_name=tgt_name)
    golds = read_gold_links([(p.src.words, p.tgt.words) for p in prepared[0]], gold=o["gold"], sure=o["sure"],
                            possible=o["possible"])
    plot_ids = parse_plot_ids(o["plot_ids"], len(prepared[0])) if o["plot"] is not None else []

    run = aligner.align_corpus(src_lines, tgt_lines, keep_attention=plot_ids, show_progress=True, prepared=prepared,
                               src_name=src_name, tgt_name=tgt_name, token_links=o["build_dict"] is not None)

    outputs = _collect_outputs(o, aligner, run, golds)  # everything is computed before anything is written

    written: list[str] = []

    def plots(stack: ExitStack) -> None:
        if o["plot"] is not None:
            written.append(_write_plots(o, plot_ids, run.prepared, run.forward, golds, stack))

    _write_outputs(outputs, plots)
    for line in written:  # said once the heatmaps are in place, with the other outputs
        console.print(line)
    for option, path, text in outputs:
        if option == "--build-dict":  # one entry a line
            n_entries = text.count("\n")
            console.print(f"wrote {n_entries} dictionary entries to {path}")


def _collect_outputs(o: dict[str, Any], aligner, run, golds) -> list[Output]:  # noqa: ANN001
    """The links, dictionary and JSON scores as text (the scores table goes to stderr now): all
    of it exists before the first output is written, so nothing can fail halfway through writing."""
    from nmtkit.evaluate.alignment_io import format_pharaoh
    from nmtkit.generate.aligner import score_alignments

    outputs: list[Output] = []
    if o["output"] is not None or not o["as_json"]:  # with --json the links go to --output only
        outputs.append(("--output", o["output"] or STDIO, "".join(format_pharaoh(sent) + "\n" for sent in run.links)))
    if o["build_dict"] is not None:
        entries = aligner.build_lexicon(run, min_count=o["dict_min_count"], top_k=o["dict_top_k"])
        fallback = run.extra.get("token_links_forward_only", 0)
        if fallback:
            console.print(f"warning: the two models tokenize {fallback} of {len(run.prepared)} pairs differently; "
                          "their dictionary counts use the forward model's links only", style="yellow")
        outputs.append(("--build-dict", o["build_dict"], "".join(line + "\n" for line in entries)))
    if golds is not None:
        scores = score_alignments(run.directions, golds)
        _print_scores(scores)
        if o["as_json"]:
            outputs.append(("--json", STDIO, _scores_json(o, scores, run.method)))
    return outputs


@click.command("align", cls=NmtkitCommand, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--path", required=True, metavar="CKPT[:CKPT...]",
              help="Source->target checkpoint(s); several are ensembled (attention averaged).")
@click.option("--source", default=None, metavar="FILE", help="Raw source text, one sentence per line (with --target).")
@click.option("--target", default=None, metavar="FILE", help="Raw target text, line-parallel to --source.")
@click.option("--data", default=None, metavar="DIR", help="Preprocessed data directory: align a split's .tok text.")
@click.option("--split", default="test", show_default=True, help="Split of --data to align.")
@click.option("--output", "-o", default=None, metavar="FILE", help="Write the Pharaoh links here ('-' or default: stdout).")
@click.option("--align-shift", type=click.IntRange(0, 1), default=DEFAULT_ALIGN_SHIFT, show_default=True,
              help="Read target word t's links from decoder step t+shift (Luong et al. 2015, footnote 14). "
                   "0 is the default because it aligned far better on the sample corpus's gold links: here "
                   "step t's attention feeds the prediction of word t itself.")
@click.option("--posterior", is_flag=True,
              help="Read links off the attention posterior p(a_i=j | y_i) ∝ attention x p(y_i | context h_j) "
                   "instead of the attention, which is computed before the word it aligns is known (rnnsearch, luong; "
                   "costs one output layer per target x source position). The prior is the decoder's attention, also for "
                   "--alignment-head models, whose head it does not read.")
@click.option("--gold", default=None, metavar="FILE", help="Gold links (i-j sure, i?j possible): print precision, recall, AER.")
@click.option("--sure", default=None, metavar="FILE", help="Gold sure links (i-j), instead of --gold.")
@click.option("--possible", default=None, metavar="FILE", help="Gold possible links (i-j), with --sure.")
@click.option("--reverse-path", default=None, metavar="CKPT[:CKPT...]",
              help="Target->source checkpoint(s): align both directions and symmetrize.")
@click.option("--symmetrize", type=click.Choice(SYMMETRIZATIONS), default=None,
              help="How to combine the two directions: a heuristic on their links, or "
                   "soft-grow-diag-final-and, which averages their word-level attention before reading links "
                   "(keeps every pair's attention in memory)  [default with --reverse-path: grow-diag-final-and]")
@click.option("--plot", default=None, metavar="DIR", help="Write word-level attention heatmaps (PNG) here.")
@click.option("--plot-ids", default=None, metavar="IDS",
              help=f"0-based sentence numbers to plot, e.g. 0,5,9  [default: the first {DEFAULT_PLOTS}]")
@click.option("--html", is_flag=True, help="Also write DIR/index.html showing the heatmaps with their sentences.")
@click.option("--build-dict", default=None, metavar="FILE",
              help="Write a 'source target' dictionary of the most frequent aligned target word per source word "
                   "(for nmtkit-translate --replace-unk).  Its words are the model's tokens (after its tokenizer "
                   "and lowercasing), which is what nmtkit-translate looks up and inserts.")
@click.option("--dict-min-count", type=click.IntRange(min=1), default=2, show_default=True,
              help="Leave out targets aligned fewer times to their source token.")
@click.option("--dict-top-k", type=click.IntRange(min=1), default=None, metavar="K",
              help="Keep the K most often aligned targets per source token, written as 'source target count' lines "
                   "(a table for nmtkit-translate --shortlist; --replace-unk reads it too)  [default: the 1-best, "
                   "'source target']")
@click.option("--json", "as_json", is_flag=True,
              help="Print the scores as JSON on stdout (alignments then go only to --output).")
@alignment_layer_options()
@batching_options(default_batch_size=64)
@device_options()
@handle_errors(PROG)
def command(**options: Any) -> None:
    """Word-align parallel text with a trained attention model (forced decoding).

    Prints one line of Pharaoh links i-j per sentence pair, i indexing the source words
    and j the target words exactly as given (whitespace-separated), whatever the model's
    tokenizer and BPE do inside.  Every target word is linked to the source word it
    attends to most (subword attention summed over a source word's pieces, averaged over a
    target word's pieces).  With --gold, precision, recall and AER go to stderr.
    """
    run_align(options)


if __name__ == "__main__":  # python -m nmtkit.cli.align (the console script starts in nmtkit.launch)
    run_console_script(command)
