"""``nmtkit score``: BLEU/chrF/TER of system outputs, by length, with significance; or
reference log-probabilities and perplexity of a trained model (forced decoding).

Results go to stdout (tab-separated lines, or JSON with ``--json``); the human-readable
tables go to stderr.  All inputs are read and checked before anything is scored, so a
bad file never produces partial results.

Text scoring, stdout lines (tab-separated):

* corpus scores: ``LABEL  METRIC  SCORE  SIGNATURE`` (one line per system and metric);
* ``--paired-bootstrap``: ``LABEL  METRIC  SCORE  MEAN  CI  P  SIGNATURE`` instead
  (``P`` is ``-`` for the baseline, the first ``--sys``);
* ``--by-length``: also ``LABEL  length  BUCKET  COUNT  BLEU`` (``BLEU`` ``-`` if empty);
* ``--sentence-level``: only one line per sentence with one score per system and metric
  (systems in order, metrics in order within each system).

Model scoring (``--path``), stdout: ``LINE  LOGPROB  NTOKENS`` per sentence (natural log,
summed over the reference tokens including ``</s>``), then
``corpus  LOGPROB  NTOKENS  PERPLEXITY``.
"""
from __future__ import annotations

import json
from typing import Any, Sequence

import click
from rich.table import Table

from nmtkit.cli.common import NmtkitCommand, console, handle_errors, parse_device
from nmtkit.errors import NmtkitError
from nmtkit.evaluate.length_buckets import DEFAULT_EDGES, BucketScore, bleu_by_length, parse_edges
from nmtkit.evaluate.metrics import (
    DEFAULT_BOOTSTRAP_SAMPLES,
    BootstrapResult,
    MetricResult,
    corpus_scores,
    paired_bootstrap as run_paired_bootstrap,
    parse_metric_names,
    perplexity,
    sentence_scores,
)
from nmtkit.utils.textio import check_parallel, read_lines

PROG = "nmtkit-score"
DEFAULT_METRICS = "bleu,chrf"


def _display(path: str) -> str:
    return "<stdin>" if path == "-" else path


def _fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


# ---------------------------------------------------------------------------------------
# text scoring
# ---------------------------------------------------------------------------------------
def _resolve_labels(sys_files: Sequence[str], labels: str | None) -> list[str]:
    """System names: ``--labels`` if given (one per --sys), else the file names."""
    if labels is None:
        return ["stdin" if s == "-" else s for s in sys_files]
    names = [s.strip() for s in labels.split(",")]
    if len(names) != len(sys_files) or any(not n for n in names):
        raise NmtkitError(f"--labels gives {len(names)} names for {len(sys_files)} systems "
                          "(need one non-empty name per --sys)")
    if len(set(names)) != len(names):
        raise NmtkitError(f"--labels has a repeated name: {labels!r}")
    return names


def _read_inputs(sys_files: Sequence[str], ref_files: Sequence[str],
                 src_file: str | None) -> tuple[list[list[str]], list[list[str]], list[str] | None]:
    """Read every file (strict UTF-8, non-empty) and require equal line counts."""
    if sum(1 for s in list(sys_files) + list(ref_files) + [src_file or ""] if s == "-") > 1:
        raise NmtkitError("standard input ('-') can be read only once")
    systems = [read_lines(s) for s in sys_files]
    refs = [read_lines(r) for r in ref_files]
    src = read_lines(src_file) if src_file is not None else None
    paths = [_display(p) for p in list(sys_files) + list(ref_files)]
    counts = [len(x) for x in systems + refs]
    if src is not None:
        paths.append(_display(src_file))
        counts.append(len(src))
    check_parallel(paths, counts)
    return systems, refs, src


def _print_corpus_table(labels: list[str], results: list[dict[str, MetricResult]]) -> None:
    table = Table(title="Corpus scores")
    table.add_column("system")
    for res in results[0].values():
        table.add_column(res.name, justify="right")
    for label, res in zip(labels, results):
        table.add_row(label, *[f"{r.score:.2f}" for r in res.values()])
    console.print(table)
    for res in results[0].values():
        console.print(f"{res.name} signature: {res.signature}", soft_wrap=True)


def _print_bucket_table(labels: list[str], buckets: list[list[BucketScore]]) -> None:
    table = Table(title="BLEU by length")
    table.add_column("length")
    table.add_column("sentences", justify="right")
    for label in labels:
        table.add_column(label, justify="right")
    for k, b in enumerate(buckets[0]):
        table.add_row(b.label, str(b.count), *[_fmt(sys_b[k].bleu) for sys_b in buckets])
    console.print(table)


def _print_bootstrap_table(results: list[BootstrapResult]) -> None:
    table = Table(title="Paired bootstrap resampling (baseline: first system)")
    for col in ("system", "metric", "score", "mean ± 95% CI", "p-value"):
        table.add_column(col, justify="left" if col in ("system", "metric") else "right")
    for r in results:
        ci = "-" if r.mean is None else f"{r.mean:.2f} ± {r.ci:.2f}"
        table.add_row(r.system, r.metric, f"{r.score:.2f}", ci, _fmt(r.p_value, 4))
    console.print(table)


def _score_text(*, sys_files: Sequence[str], ref_files: Sequence[str], metrics: str | None,
                tokenized: bool, lowercase: bool, sentence_level: bool, by_length: bool,
                src_file: str | None, buckets: str | None, plot: str | None, labels: str | None,
                do_bootstrap: bool, bootstrap_samples: int, as_json: bool) -> None:
    """Everything but model scoring: validate options, read, score, then print."""
    sys_files = list(sys_files) or ["-"]
    if not ref_files:
        raise NmtkitError("give at least one --ref FILE (or --path CKPT for model scoring)")
    metric_names = parse_metric_names(metrics or DEFAULT_METRICS)
    by_length = by_length or plot is not None
    if (src_file is not None or buckets is not None) and not by_length:
        raise NmtkitError("--src and --buckets are used only with --by-length (or --plot)")
    if sentence_level and (by_length or do_bootstrap):
        raise NmtkitError("--sentence-level cannot be combined with --by-length, --plot or --paired-bootstrap")
    if do_bootstrap and len(sys_files) != 2:
        raise NmtkitError(f"--paired-bootstrap needs exactly two --sys files, got {len(sys_files)}")
    edges = parse_edges(buckets) if buckets is not None else DEFAULT_EDGES
    names = _resolve_labels(sys_files, labels)

    systems, refs, src = _read_inputs(sys_files, ref_files, src_file)
    opts = {"tokenized": tokenized, "lowercase": lowercase}

    corpus = [corpus_scores(h, refs, metric_names, **opts) for h in systems]
    sentences = [sentence_scores(h, refs, metric_names, **opts) for h in systems] if sentence_level else None
    by_len = [bleu_by_length(h, refs, src, edges, **opts) for h in systems] if by_length else None
    boot = (run_paired_bootstrap(list(zip(names, systems)), refs, metric_names, n_samples=bootstrap_samples, **opts)
            if do_bootstrap else None)
    if plot is not None and by_len is not None:
        from nmtkit.evaluate.plots import plot_length_buckets

        plot_length_buckets(plot, [b.label for b in by_len[0]],
                            {n: [b.bleu for b in bs] for n, bs in zip(names, by_len)},
                            xlabel="source sentence length (words)" if src is not None
                            else "reference length (words)")

    _print_corpus_table(names, corpus)
    if by_len is not None:
        _print_bucket_table(names, by_len)
    if boot is not None:
        _print_bootstrap_table(boot)
    if plot is not None:
        console.print(f"wrote {plot}")

    if as_json:
        click.echo(json.dumps(_text_json(names, sys_files, metric_names, corpus, sentences, by_len, boot, opts),
                              indent=2, ensure_ascii=False))
    else:
        _text_lines(names, metric_names, corpus, sentences, by_len, boot)


def _text_lines(names: list[str], metric_names: list[str], corpus: list[dict[str, MetricResult]],
                sentences: list[list[dict[str, float]]] | None, by_len: list[list[BucketScore]] | None,
                boot: list[BootstrapResult] | None) -> None:
    if sentences is not None:
        console.print("columns: " + " ".join(f"{n}:{corpus[0][m].name}" for n in names for m in metric_names))
        for k in range(len(sentences[0])):
            click.echo("\t".join(f"{sys_sents[k][m]:.2f}" for sys_sents in sentences for m in metric_names))
        return
    if boot is not None:
        for r in boot:
            click.echo("\t".join([r.system, r.metric, f"{r.score:.2f}", _fmt(r.mean), _fmt(r.ci),
                                  _fmt(r.p_value, 4), r.signature]))
    else:
        for name, res in zip(names, corpus):
            for r in res.values():
                click.echo(f"{name}\t{r.name}\t{r.score:.2f}\t{r.signature}")
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
            "file": _display(path),
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
def forced_scores(checkpoints: str, *, data_dir: str | None, split: str, source: str | None,
                  target: str | None, batch_size: int, device: Any) -> list[Any]:
    """Load the checkpoints as one ensemble and force-decode the references.

    The references come from a preprocessed split (``data_dir``/``split``: ids as
    binarized, dictionaries must be the model's) or from raw ``source``/``target`` files
    (turned into pieces by the checkpoint's own text pipeline).  Returns
    :class:`nmtkit.generate.forced.ForcedResult` objects in corpus order.
    """
    from nmtkit.data.dictionary import EOS_ID
    from nmtkit.generate.forced import score_corpus
    from nmtkit.generate.loading import load_ensemble, split_checkpoint_paths
    from nmtkit.checkpoint import pipelines_from_checkpoint

    model, ckpts = load_ensemble(checkpoints, device)
    first_path = split_checkpoint_paths(checkpoints)[0]
    if data_dir is not None:
        from nmtkit.data.dataset import DataDir

        data = DataDir(data_dir)
        for side, mine, theirs in (("source", model.src_dict, data.src_dict), ("target", model.tgt_dict, data.tgt_dict)):
            if mine.checksum() != theirs.checksum():
                raise NmtkitError(f"{first_path} and {data_dir}: the {side} dictionaries differ "
                                  "(score data preprocessed with the model's dictionaries, or use --source/--target)")
        ds = data.load_split(split)
        src_seqs = [ds.src[i].tolist() + [EOS_ID] for i in range(len(ds))]
        tgt_seqs = [ds.tgt[i].tolist() + [EOS_ID] for i in range(len(ds))]
    else:
        assert source is not None and target is not None
        src_lines, tgt_lines = read_lines(source), read_lines(target)
        check_parallel([_display(source), _display(target)], [len(src_lines), len(tgt_lines)])
        src_pipe, tgt_pipe = pipelines_from_checkpoint(ckpts[0])
        src_seqs = [model.src_dict.encode(src_pipe.encode(line)[1], add_eos=True) for line in src_lines]
        tgt_seqs = [model.tgt_dict.encode(tgt_pipe.encode(line)[1], add_eos=True) for line in tgt_lines]
    if not src_seqs:
        raise NmtkitError(f"nothing to score: split {split!r} of {data_dir} is empty")
    return score_corpus(model, src_seqs, tgt_seqs, batch_size=batch_size, device=device)


def _score_model(*, checkpoints: str, data: str | None, split: str, source: str | None,
                 target: str | None, batch_size: int, device: str, as_json: bool) -> None:
    """Reference log-probabilities per sentence and corpus perplexity under a model/ensemble."""
    from nmtkit.generate.loading import split_checkpoint_paths

    paths = split_checkpoint_paths(checkpoints)
    if data is not None and (source is not None or target is not None):
        raise NmtkitError("give either --data DIR (with --split) or --source/--target, not both")
    if data is None and (source is None or target is None):
        raise NmtkitError("model scoring needs --data DIR (with --split) or both --source and --target")
    if source is not None and source == target == "-":
        raise NmtkitError("standard input ('-') can be read only once")

    scores = forced_scores(checkpoints, data_dir=data, split=split, source=source, target=target,
                           batch_size=batch_size, device=parse_device(device))
    logprobs = [float(r.log_prob) for r in scores]
    counts = [int(r.num_tokens) for r in scores]
    total, n_tokens = sum(logprobs), sum(counts)
    ppl = perplexity(total, n_tokens)

    table = Table(title="Reference scoring (forced decoding)")
    for col in ("sentences", "tokens", "log-prob (nats)", "perplexity"):
        table.add_column(col, justify="right")
    table.add_row(str(len(scores)), str(n_tokens), f"{total:.2f}", f"{ppl:.2f}")
    console.print(table)

    if as_json:
        click.echo(json.dumps({
            "checkpoints": paths,
            "sentences": [{"line": k, "logprob": lp, "n_tokens": n}
                          for k, (lp, n) in enumerate(zip(logprobs, counts), start=1)],
            "total_logprob": total, "n_tokens": n_tokens, "perplexity": ppl,
        }, indent=2))
    else:
        for k, (lp, n) in enumerate(zip(logprobs, counts), start=1):
            click.echo(f"{k}\t{lp:.4f}\t{n}")
        click.echo(f"corpus\t{total:.4f}\t{n_tokens}\t{ppl:.4f}")


# ---------------------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------------------
_TEXT_ONLY = ("sys_files", "ref_files", "metrics", "tokenized", "lowercase", "sentence_level", "by_length",
              "src_file", "buckets", "plot", "labels", "paired_bootstrap")


@click.command("score", cls=NmtkitCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--sys", "sys_files", multiple=True, metavar="FILE",
              help="System output, one sentence per line (repeatable; default: stdin).")
@click.option("--ref", "ref_files", multiple=True, metavar="FILE",
              help="Reference translations (repeat for multiple references).")
@click.option("--metrics", default=None, metavar="LIST", help="Comma-separated: bleu,chrf,ter  [default: bleu,chrf]")
@click.option("--tokenized", is_flag=True,
              help="BLEU on already tokenized text, whitespace-split only (multi-bleu style, as the papers report).")
@click.option("--lowercase", "-lc", is_flag=True, help="Case-insensitive scoring.")
@click.option("--sentence-level", is_flag=True, help="Print one line of scores per sentence.")
@click.option("--by-length", is_flag=True, help="BLEU per sentence-length bucket.")
@click.option("--src", "src_file", default=None, metavar="FILE",
              help="Source sentences: bucket by source length (default: reference length).")
@click.option("--buckets", default=None, metavar="EDGES",
              help="Bucket edges, e.g. 10,20,30 gives <10, 10-19, 20-29, 30+  [default: 10,20,...,70]")
@click.option("--plot", default=None, metavar="PNG", help="Plot BLEU by length for every system (implies --by-length).")
@click.option("--labels", default=None, metavar="A,B", help="Names of the systems, in --sys order.")
@click.option("--paired-bootstrap", is_flag=True,
              help="Paired bootstrap significance test of the second --sys against the first.")
@click.option("--bootstrap-samples", default=DEFAULT_BOOTSTRAP_SAMPLES, show_default=True,
              type=click.IntRange(min=1), help="Resamples for --paired-bootstrap.")
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
@click.option("--path", "checkpoints", default=None, metavar="CKPT[:CKPT...]",
              help="Model scoring: log-probability of the references under these checkpoints (ensemble).")
@click.option("--data", default=None, metavar="DIR", help="Model scoring: preprocessed data directory.")
@click.option("--split", default="test", show_default=True, help="Model scoring: split of --data to score.")
@click.option("--source", default=None, metavar="FILE", help="Model scoring: raw source file (with --target).")
@click.option("--target", default=None, metavar="FILE", help="Model scoring: raw reference file (with --source).")
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1),
              help="Model scoring: sentences per batch.")
@click.option("--device", default="auto", show_default=True, help="Model scoring: auto, cpu or cuda[:N].")
@handle_errors(PROG)
def command(sys_files: tuple[str, ...], ref_files: tuple[str, ...], metrics: str | None, tokenized: bool,
            lowercase: bool, sentence_level: bool, by_length: bool, src_file: str | None, buckets: str | None,
            plot: str | None, labels: str | None, paired_bootstrap: bool, bootstrap_samples: int,
            as_json: bool, checkpoints: str | None, data: str | None, split: str, source: str | None,
            target: str | None, batch_size: int, device: str) -> None:
    """Score translations against references (BLEU, chrF, TER), or references under a model."""
    if checkpoints is not None:
        given = locals()
        clash = [name for name in _TEXT_ONLY if given[name] not in (None, False, ())]
        if clash:
            opts = ", ".join("--" + n.replace("_files", "").replace("_file", "").replace("_", "-") for n in clash)
            raise NmtkitError(f"--path (model scoring) cannot be combined with {opts}")
        _score_model(checkpoints=checkpoints, data=data, split=split, source=source, target=target,
                     batch_size=batch_size, device=device, as_json=as_json)
        return
    if data is not None or source is not None or target is not None:
        raise NmtkitError("--data, --source and --target are for model scoring and need --path")
    _score_text(sys_files=sys_files, ref_files=ref_files, metrics=metrics, tokenized=tokenized,
                lowercase=lowercase, sentence_level=sentence_level, by_length=by_length, src_file=src_file,
                buckets=buckets, plot=plot, labels=labels, do_bootstrap=paired_bootstrap,
                bootstrap_samples=bootstrap_samples, as_json=as_json)


def main() -> None:
    """Entry point of the ``nmtkit-score`` console script."""
    command()


if __name__ == "__main__":
    main()
