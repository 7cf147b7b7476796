"""``nmtkit score``: two commands behind one entry point.

* ``nmtkit-score text``: BLEU/chrF/TER of system outputs, by length, with significance;
* ``nmtkit-score model``: reference log-probabilities and perplexity under a trained model
  (forced decoding).

Without ``text`` or ``model`` the command is chosen from the options (``--path`` means model
scoring), so ``nmtkit-score --sys H --ref R`` works as before.

Each figure is printed once, on stdout: tables when stdout is a terminal, tab-separated lines
when it is a pipe or file (or JSON with ``--json``).  Per-sentence scores only with
``--sentence-level``.  All inputs are read and checked before anything is scored, so a bad
file never produces partial results.

Text scoring, plain lines (tab-separated):

* corpus scores: ``LABEL  METRIC  SCORE  SIGNATURE`` (one line per system and metric);
* ``--paired-bootstrap``: ``LABEL  METRIC  SCORE  MEAN  CI  P  SIGNATURE`` instead
  (``P`` is ``-`` for the baseline, the first ``--sys``);
* ``--by-length``: also ``LABEL  length  BUCKET  COUNT  BLEU`` (``BLEU`` ``-`` if empty);
* ``--sentence-level``: only one line per sentence with one score per system and metric
  (systems in order, metrics in order within each system).

Model scoring, plain lines: ``corpus  LOGPROB  NTOKENS  PERPLEXITY``; with ``--sentence-level``
first ``LINE  LOGPROB  NTOKENS`` per sentence (natural log, summed over the reference tokens
including ``</s>``).  ``--json`` holds the sentences always.
"""
from __future__ import annotations

import json
import math
import sys
from typing import Any, Optional, Sequence

import click
from rich.console import Console
from rich.table import Table

from nmtkit.cli.common import (NmtkitCommand, OneLineUsageError, batching_options, console, device_options,
                               handle_errors, run_console_script)
from nmtkit.errors import NmtkitError
from nmtkit.evaluate.length_buckets import BucketScore
from nmtkit.evaluate.metrics import DEFAULT_BOOTSTRAP_SAMPLES, MAX_TER_WORDS, BootstrapResult, MetricResult
from nmtkit.evaluate.scoring import score_files
from nmtkit.utils.overlap import refuse_outputs_over_inputs
from nmtkit.utils.stdio import input_name, is_stdio

PROG = "nmtkit-score"


def _fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _table_console() -> Optional[Console]:
    """A console on stdout when stdout is a terminal (the results as tables), else None (the
    results as tab-separated lines for a pipe or a file): each figure once, never both."""
    try:
        terminal = sys.stdout.isatty()
    except (AttributeError, ValueError):  # closed or replaced stdout
        terminal = False
    return Console(file=sys.stdout, highlight=False, soft_wrap=True) if terminal else None


# ---------------------------------------------------------------------------------------
# text scoring
# ---------------------------------------------------------------------------------------
def _print_corpus_table(out: Console, labels: list[str], results: list[dict[str, MetricResult]]) -> None:
    table = Table(title="Corpus scores")
    table.add_column("system")
    for res in results[0].values():
        table.add_column(res.name, justify="right")
    for label, scores in zip(labels, results):
        table.add_row(label, *[f"{r.score:.2f}" for r in scores.values()])
    out.print(table)
    for res in results[0].values():
        out.print(f"{res.name} signature: {res.signature}", soft_wrap=True)


def _print_bucket_table(out: Console, labels: list[str], buckets: list[list[BucketScore]]) -> None:
    table = Table(title="BLEU by length")
    table.add_column("length")
    table.add_column("sentences", justify="right")
    for label in labels:
        table.add_column(label, justify="right")
    for k, b in enumerate(buckets[0]):
        table.add_row(b.label, str(b.count), *[_fmt(sys_b[k].bleu) for sys_b in buckets])
    out.print(table)


def _print_bootstrap_table(out: Console, results: list[BootstrapResult]) -> None:
    table = Table(title="Paired bootstrap resampling (baseline: first system)")
    for col in ("system", "metric", "score", "mean ± 95% CI", "p-value"):
        table.add_column(col, justify="left" if col in ("system", "metric") else "right")
    for r in results:
        ci = "-" if r.mean is None else f"{r.mean:.2f} ± {r.ci:.2f}"
        table.add_row(r.system, r.metric, f"{r.score:.2f}", ci, _fmt(r.p_value, 4))
    out.print(table)


def _score_text(*, sys_files: Sequence[str], ref_files: Sequence[str], metrics: str | None,
                tokenized: bool, lowercase: bool, sentence_level: bool, by_length: bool,
                src_file: str | None, buckets: str | None, plot: str | None, labels: str | None,
                do_bootstrap: bool, bootstrap_samples: int, as_json: bool) -> None:
    """Everything but model scoring: the library scores (:func:`score_files`), this prints."""
    res = score_files(sys_files, ref_files, metrics=metrics, tokenized=tokenized, lowercase=lowercase,
                      sentence_level=sentence_level, by_length=by_length, src_file=src_file, buckets=buckets,
                      plot=plot, labels=labels, paired_bootstrap_test=do_bootstrap,
                      bootstrap_samples=bootstrap_samples)
    names, metric_names, corpus, opts = res.labels, res.metrics, res.corpus, res.options
    sentences, by_len, boot = res.sentences, res.by_length, res.bootstrap

    if plot is not None:
        console.print(f"wrote {plot}")
    out = None if as_json else _table_console()
    if as_json:
        click.echo(json.dumps(_text_json(names, res.files, metric_names, corpus, sentences, by_len, boot, opts),
                              indent=2, ensure_ascii=False))
    elif out is None or sentences is not None:  # per-sentence scores are lines, on a terminal too
        _text_lines(names, metric_names, corpus, sentences, by_len, boot, out)
    else:
        if boot is not None:
            _print_bootstrap_table(out, boot)
        else:
            _print_corpus_table(out, names, corpus)
        if by_len is not None:
            _print_bucket_table(out, names, by_len)


def _text_lines(names: list[str], metric_names: list[str], corpus: list[dict[str, MetricResult]],
                sentences: list[list[dict[str, float]]] | None, by_len: list[list[BucketScore]] | None,
                boot: list[BootstrapResult] | None, out: Optional[Console] = None) -> None:
    if sentences is not None:  # the column names: a header on a terminal, on stderr for a pipe
        (out or console).print("columns: " + " ".join(f"{n}:{corpus[0][m].name}" for n in names for m in metric_names))
        for k in range(len(sentences[0])):
            click.echo("\t".join(f"{sys_sents[k][m]:.2f}" for sys_sents in sentences for m in metric_names))
        return
    if boot is not None:
        for r in boot:
            click.echo("\t".join([r.system, r.metric, f"{r.score:.2f}", _fmt(r.mean), _fmt(r.ci),
                                  _fmt(r.p_value, 4), r.signature]))
    else:
        for name, res in zip(names, corpus):
            for m in res.values():
                click.echo(f"{name}\t{m.name}\t{m.score:.2f}\t{m.signature}")
    if by_len is not None:
        for name, buckets in zip(names, by_len):
            for b in buckets:
                click.echo(f"{name}\tlength\t{b.label}\t{b.count}\t{_fmt(b.bleu)}")


def _text_json(names: list[str], sys_files: list[str], metric_names: list[str],
               corpus: list[dict[str, MetricResult]], sentences: list[list[dict[str, float]]] | None,
               by_len: list[list[BucketScore]] | None, boot: list[BootstrapResult] | None,
               opts: dict[str, bool]) -> dict[str, Any]:
    out_systems = []
    for k, (name, path) in enumerate(zip(names, sys_files)):
        entry: dict[str, Any] = {
            "label": name,
            "file": input_name(path),
            "scores": {m: {"name": r.name, "score": r.score, "signature": r.signature, "details": r.details}
                       for m, r in corpus[k].items()},
        }
        if sentences is not None:
            entry["sentences"] = sentences[k]
        if by_len is not None:
            entry["by_length"] = [{"bucket": b.label, "min_len": b.lo, "max_len": None if b.hi is None else b.hi - 1,
                                   "count": b.count, "bleu": b.bleu} for b in by_len[k]]
        out_systems.append(entry)
    out: dict[str, Any] = {"options": {**opts, "metrics": metric_names}, "systems": out_systems}
    if boot is not None:
        out["paired_bootstrap"] = [
            {"system": r.system, "metric": r.metric, "score": r.score, "mean": r.mean, "ci95": r.ci,
             "p_value": r.p_value, "signature": r.signature} for r in boot
        ]
    return out


# ---------------------------------------------------------------------------------------
# model scoring (forced decoding of references)
# ---------------------------------------------------------------------------------------
def _json_number(x: float) -> float | None:
    """``x``, or null where it is not finite (a perplexity that overflows is ``inf``): strict JSON
    has no Infinity or NaN, and readers other than Python's refuse them."""
    return x if math.isfinite(x) else None


def _score_model(*, checkpoints: str, data: str | None, split: str, source: str | None,
                 target: str | None, batch_size: int, device: str, amp: str, as_json: bool,
                 sentence_level: bool = False) -> None:
    """Reference log-probabilities per sentence and corpus perplexity under a model/ensemble."""
    from nmtkit.generate.scorer import score_model  # torch and the models: only for model scoring

    scores = score_model(checkpoints, data=data, split=split, source=source, target=target,
                         batch_size=batch_size, device=device, amp=amp)
    paths, logprobs, counts = scores.checkpoints, scores.logprobs, scores.n_tokens
    total, n_tokens, ppl = scores.total_logprob, scores.total_tokens, scores.perplexity

    if as_json:
        click.echo(json.dumps({
            "checkpoints": paths,
            "sentences": [{"line": k, "logprob": _json_number(lp), "n_tokens": n}
                          for k, (lp, n) in enumerate(zip(logprobs, counts), start=1)],
            "total_logprob": _json_number(total), "n_tokens": n_tokens, "perplexity": _json_number(ppl),
        }, indent=2, allow_nan=False))
        return
    if sentence_level:
        for k, (lp, n) in enumerate(zip(logprobs, counts), start=1):
            click.echo(f"{k}\t{lp:.4f}\t{n}")
    out = _table_console()
    if out is None:
        click.echo(f"corpus\t{total:.4f}\t{n_tokens}\t{ppl:.4f}")
        return
    table = Table(title="Reference scoring (forced decoding)")
    for col in ("sentences", "tokens", "log-prob (nats)", "perplexity"):
        table.add_column(col, justify="right")
    table.add_row(str(len(logprobs)), str(n_tokens), f"{total:.2f}", f"{ppl:.2f}")
    out.print(table)


# ---------------------------------------------------------------------------------------
# the commands
# ---------------------------------------------------------------------------------------
class MetricList(click.ParamType):
    """``--metrics``: names checked when the command line is parsed, a usage error (exit 2) in
    the library's words (:func:`nmtkit.evaluate.metrics.parse_metric_names`), like any other
    value out of range; the library checks the same for callers from Python."""

    name = "list"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        from nmtkit.evaluate.metrics import parse_metric_names

        try:
            parse_metric_names(value)
        except NmtkitError as exc:
            raise click.UsageError(f"--metrics: {exc}", ctx) from None
        return value


class ScoreCommand(NmtkitCommand):
    """A subcommand whose messages say ``nmtkit-score``, the program the user ran."""

    prog = PROG


_SENTENCE_LEVEL = click.option("--sentence-level", is_flag=True,
                               help="Also print one line of scores per sentence (plain lines, on a terminal too).")
_JSON = click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")


@click.command("text", cls=ScoreCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--sys", "sys_files", multiple=True, metavar="FILE",
              help="System output, one sentence per line (repeatable; default: stdin).")
@click.option("--ref", "ref_files", multiple=True, metavar="FILE",
              help="Reference translations (repeat for multiple references).")
@click.option("--metrics", default=None, metavar="LIST", type=MetricList(),
              help=f"Comma-separated: bleu,chrf,ter (TER: lines of at most {MAX_TER_WORDS} words)  [default: bleu,chrf]")
@click.option("--tokenized", is_flag=True,
              help="BLEU on already tokenized text, whitespace-split only (multi-bleu style, as the papers report).")
@click.option("--lowercase", "-lc", is_flag=True, help="Case-insensitive scoring.")
@_SENTENCE_LEVEL
@click.option("--by-length", is_flag=True, help="BLEU per sentence-length bucket.")
@click.option("--src", "src_file", default=None, metavar="FILE",
              help="Source sentences: bucket by source length (default: reference length).")
@click.option("--buckets", default=None, metavar="EDGES",
              help="Bucket edges, e.g. 10,20,30 gives <10, 10-19, 20-29, 30+  [default: 10,20,...,70]")
@click.option("--plot", default=None, metavar="PNG",
              help="Write a PNG of BLEU by length for every system to this file (implies --by-length). A file, not "
                   "'-': the scores go to standard output.")
@click.option("--labels", default=None, metavar="A,B", help="Names of the systems, in --sys order.")
@click.option("--paired-bootstrap", is_flag=True,
              help="Paired bootstrap significance test of the second --sys against the first.")
@click.option("--bootstrap-samples", default=DEFAULT_BOOTSTRAP_SAMPLES, show_default=True,
              type=click.IntRange(min=1, max=10_000_000), help="Resamples for --paired-bootstrap.")
@_JSON
@handle_errors(PROG)
def text_command(sys_files: tuple[str, ...], ref_files: tuple[str, ...], metrics: str | None, tokenized: bool,
                 lowercase: bool, sentence_level: bool, by_length: bool, src_file: str | None, buckets: str | None,
                 plot: str | None, labels: str | None, paired_bootstrap: bool, bootstrap_samples: int,
                 as_json: bool) -> None:
    """Score translations against references: BLEU, chrF, TER (sacrebleu), by length, with significance.

    \b
    Examples:
      nmtkit-score text --sys test.hyp --ref test.de
      nmtkit-score text --sys base.hyp --sys new.hyp --ref test.de --paired-bootstrap
      nmtkit-score text --sys test.hyp --ref test.de --by-length --plot len.png
    """
    if plot is not None and is_stdio(plot):  # the scores are printed there: the two would be mixed
        raise NmtkitError("--plot -: the scores are written to standard output; give the plot a file name")
    refuse_outputs_over_inputs(
        [("--plot", plot)],
        [*[("--sys", f) for f in sys_files], *[("--ref", f) for f in ref_files], ("--src", src_file)])
    _score_text(sys_files=sys_files, ref_files=ref_files, metrics=metrics, tokenized=tokenized,
                lowercase=lowercase, sentence_level=sentence_level, by_length=by_length, src_file=src_file,
                buckets=buckets, plot=plot, labels=labels, do_bootstrap=paired_bootstrap,
                bootstrap_samples=bootstrap_samples, as_json=as_json)


@click.command("model", cls=ScoreCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--path", "checkpoints", required=True, metavar="CKPT[:CKPT...]",
              help="Log-probability of the references under these checkpoints (several: their ensemble).")
@click.option("--data", default=None, metavar="DIR", help="Preprocessed data directory (or --source and --target).")
@click.option("--split", default="test", show_default=True, help="Split of --data to score.")
@click.option("--source", default=None, metavar="FILE", help="Raw source file (with --target).")
@click.option("--target", default=None, metavar="FILE", help="Raw reference file (with --source).")
@_SENTENCE_LEVEL
@_JSON
@batching_options(default_batch_size=32, max_tokens=False)
@device_options(threads=False)
@handle_errors(PROG)
def model_command(checkpoints: str, data: str | None, split: str, source: str | None, target: str | None,
                  sentence_level: bool, as_json: bool, batch_size: int, device: str, amp: str) -> None:
    """Score references under a model (forced decoding): log-probabilities and perplexity.

    \b
    Examples:
      nmtkit-score model --path ckpt/checkpoint_best.pt --source test.en --target test.de
      nmtkit-score model --path a.pt:b.pt --data data-bin --split valid --sentence-level
    """
    from nmtkit.generate.checkpoint_paths import split_checkpoint_paths  # torch only when scoring with a model

    ckpt_names = split_checkpoint_paths(checkpoints)
    refuse_outputs_over_inputs([], [*[("--path", p) for p in ckpt_names], ("--data", data), ("--source", source),
                                    ("--target", target)])
    _score_model(checkpoints=checkpoints, data=data, split=split, source=source, target=target,
                 batch_size=batch_size, device=device, amp=amp, as_json=as_json, sentence_level=sentence_level)


def _long_options(command: click.Command) -> set[str]:
    return {opt for p in command.params for opt in getattr(p, "opts", []) + getattr(p, "secondary_opts", [])}


class ScoreGroup(click.Group):
    """``text`` and ``model`` behind one entry point.  A command line without either picks one
    from its options: ``--path`` means model scoring.  Options of the other command are refused
    in one line that says which command they belong to."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        from nmtkit.utils.stdio import use_utf8_stdio

        use_utf8_stdio()
        return super().main(*args, **kwargs)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and (args[0] in self.commands or args[0] in ctx.help_option_names):
            return super().parse_args(ctx, args)
        given = [a.split("=", 1)[0] for a in args if a.startswith("-")]
        text_opts, model_opts = _long_options(text_command), _long_options(model_command)
        if "--path" in given:
            clash = [g for g in dict.fromkeys(given) if g in text_opts and g not in model_opts]
            if clash:
                raise OneLineUsageError(f"--path (model scoring) cannot be combined with {', '.join(clash)}", PROG, ctx)
            return super().parse_args(ctx, ["model", *args])
        model_only = [g for g in dict.fromkeys(given) if g in model_opts and g not in text_opts]
        if model_only:  # given, they would be ignored by text scoring
            one = len(model_only) == 1
            raise OneLineUsageError(f"{', '.join(model_only)} {'is' if one else 'are'} for model scoring and "
                                    f"need{'s' if one else ''} --path", PROG, ctx)
        return super().parse_args(ctx, ["text", *args])

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except BrokenPipeError:
            from nmtkit.cli.common import exit_broken_pipe

            exit_broken_pipe()
        except OneLineUsageError:
            raise
        except click.UsageError as exc:
            raise OneLineUsageError(exc.format_message(), PROG, exc.ctx) from None


@click.group("score", cls=ScoreGroup, context_settings={"help_option_names": ["-h", "--help"]})
def command() -> None:
    """Score translations (text) or references under a model (model).

    Without TEXT or MODEL the options choose: --path means model scoring.

    \b
    Examples:
      nmtkit-score --sys test.hyp --ref test.de            # = nmtkit-score text ...
      nmtkit-score model --path ckpt/checkpoint_best.pt --source test.en --target test.de
    """


command.add_command(text_command)
command.add_command(model_command)


if __name__ == "__main__":  # python -m nmtkit.cli.score (the console script starts in nmtkit.launch)
    run_console_script(command)
