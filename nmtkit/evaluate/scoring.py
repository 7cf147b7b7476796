"""What the text mode of ``nmtkit-score`` computes, as library functions: the command only parses
options and prints.  Model scoring (forced decoding) is :mod:`nmtkit.generate.scorer`.

* :func:`score`: corpus metrics of hypotheses against references held in memory;
* :func:`score_files`: everything the text mode of ``nmtkit-score`` does with files (labels, line
  checks, sentence scores, BLEU by length and its plot, paired bootstrap) -> :class:`TextScores`.

Every input is read and checked before anything is scored, so a bad file never gives partial results.
"""
from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Iterator, Optional, Sequence, Union

from nmtkit.errors import NmtkitError
from nmtkit.evaluate.length_buckets import DEFAULT_EDGES, BucketScore, LengthBucketAccumulator, parse_edges
from nmtkit.evaluate.metrics import (
    DEFAULT_BOOTSTRAP_SAMPLES,
    SCORE_CHUNK_LINES,
    BootstrapResult,
    CorpusAccumulator,
    MetricResult,
    corpus_scores,
    paired_bootstrap,
    parse_metric_names,
    sentence_scores,
)
from nmtkit.utils.checks import text_lines
from nmtkit.utils.stdio import input_name, refuse_stdin_twice
from nmtkit.utils.textio import check_parallel, iter_parallel_chunks, read_lines

DEFAULT_METRICS = ("bleu", "chrf")


def _metric_list(metrics: Union[str, Sequence[str], None]) -> list[str]:
    if metrics is None:
        return list(DEFAULT_METRICS)
    return parse_metric_names(metrics if isinstance(metrics, str) else ",".join(metrics))


def score(hyps: Sequence[str], refs: Union[Sequence[str], Sequence[Sequence[str]]],
          metrics: Union[str, Sequence[str], None] = DEFAULT_METRICS, *, tokenized: bool = False,
          lowercase: bool = False) -> dict[str, MetricResult]:
    """Corpus scores of ``hyps`` keyed by metric name (``bleu``, ``chrf``, ``ter``).

    ``refs``: one reference per hypothesis (a list of str), or several reference sets (a list
    of such lists).  ``tokenized``: BLEU on whitespace-split text, as the papers report it.
    """
    hyp_lines = text_lines(hyps, "score(): hyps")
    if isinstance(refs, (str, bytes, bytearray)) or not isinstance(refs, Iterable):
        text_lines(refs, "score(): refs")  # raises: one string (or None) is no list of references
    refs = list(refs)
    if any(isinstance(r, str) for r in refs):  # one reference per hypothesis (any other item is named)
        ref_sets = [text_lines(refs, "score(): refs")]
    else:  # several reference sets, each a list of lines
        ref_sets = [text_lines(r, f"score(): refs[{k}]") for k, r in enumerate(refs)]
    return corpus_scores(hyp_lines, ref_sets, _metric_list(metrics), tokenized=tokenized, lowercase=lowercase)


@dataclass
class TextScores:
    """Results of :func:`score_files`, per system in ``labels`` order (None where not asked for)."""

    labels: list[str]
    files: list[str]
    metrics: list[str]
    options: dict[str, bool]
    corpus: list[dict[str, MetricResult]]
    sentences: Optional[list[list[dict[str, float]]]] = None
    by_length: Optional[list[list[BucketScore]]] = None
    bootstrap: Optional[list[BootstrapResult]] = None
    bucketed_by_source: bool = False


def resolve_labels(sys_files: Sequence[str], labels: Union[str, Sequence[str], None]) -> list[str]:
    """System names: ``labels`` if given (one per system, unique), else the file names."""
    if labels is None:
        return ["stdin" if s == "-" else s for s in sys_files]
    names = [s.strip() for s in labels.split(",")] if isinstance(labels, str) else [str(s).strip() for s in labels]
    if len(names) != len(sys_files) or any(not n for n in names):
        raise NmtkitError(f"--labels gives {len(names)} names for {len(sys_files)} systems "
                          "(need one non-empty name per --sys)")
    if len(set(names)) != len(names):
        raise NmtkitError(f"--labels has a repeated name: {labels!r}")
    bad = next((n for n in names if n.splitlines() != [n] or any(unicodedata.category(c) == "Cc" for c in n)), None)
    if bad is not None:  # a tab or line break would break the tab-separated lines of the tables
        raise NmtkitError(f"--labels: {bad!r} holds a tab, line break or other control character")
    return names


def read_score_inputs(sys_files: Sequence[str], ref_files: Sequence[str],
                      src_file: Optional[str]) -> tuple[list[list[str]], list[list[str]], Optional[list[str]]]:
    """Read every file (strict UTF-8, non-empty) and require equal line counts."""
    refuse_stdin_twice([*[("--sys", s) for s in sys_files], *[("--ref", r) for r in ref_files], ("--src", src_file)])
    systems = [read_lines(s) for s in sys_files]
    refs = [read_lines(r) for r in ref_files]
    src = read_lines(src_file) if src_file is not None else None
    paths = [input_name(p) for p in list(sys_files) + list(ref_files)]
    counts = [len(x) for x in systems + refs]
    if src is not None and src_file is not None:
        paths.append(input_name(src_file))
        counts.append(len(src))
    check_parallel(paths, counts)
    return systems, refs, src


def score_files(sys_files: Sequence[str], ref_files: Sequence[str], *,
                metrics: Union[str, Sequence[str], None] = None, tokenized: bool = False, lowercase: bool = False,
                sentence_level: bool = False, by_length: bool = False, src_file: Optional[str] = None,
                buckets: Optional[str] = None, plot: Union[str, os.PathLike, None] = None,
                labels: Union[str, Sequence[str], None] = None, paired_bootstrap_test: bool = False,
                bootstrap_samples: int = DEFAULT_BOOTSTRAP_SAMPLES) -> TextScores:
    """Score system output files against reference files (the text mode of ``nmtkit-score``).

    Option combinations that cannot mean anything are refused before any file is read;
    ``plot`` (a PNG of BLEU by length) implies ``by_length``.
    """
    sys_files = list(sys_files) or ["-"]
    if not ref_files:
        raise NmtkitError("give at least one --ref FILE (or --path CKPT for model scoring)")
    metric_names = _metric_list(metrics)
    by_length = by_length or plot is not None
    if (src_file is not None or buckets is not None) and not by_length:
        raise NmtkitError("--src and --buckets are used only with --by-length (or --plot)")
    if sentence_level and (by_length or paired_bootstrap_test):
        raise NmtkitError("--sentence-level cannot be combined with --by-length, --plot or --paired-bootstrap")
    if paired_bootstrap_test and len(sys_files) != 2:
        raise NmtkitError(f"--paired-bootstrap needs exactly two --sys files, got {len(sys_files)}")
    edges = parse_edges(buckets) if buckets is not None else DEFAULT_EDGES
    names = resolve_labels(sys_files, labels)

    opts = {"tokenized": tokenized, "lowercase": lowercase}
    n_sys, n_ref = len(sys_files), len(ref_files)
    if paired_bootstrap_test:  # the bootstrap resamples whole corpora: it holds every line
        systems, refs, src = read_score_inputs(sys_files, ref_files, src_file)
        files = [*systems, *refs, *([src] if src is not None else [])]
        chunks: Iterator[list[list[str]]] = ([f[i : i + SCORE_CHUNK_LINES] for f in files]
                                             for i in range(0, len(files[0]), SCORE_CHUNK_LINES))
    else:  # one chunk of every file in memory at a time
        paths = [*sys_files, *ref_files, *([src_file] if src_file is not None else [])]
        refuse_stdin_twice([*[("--sys", s) for s in sys_files], *[("--ref", r) for r in ref_files], ("--src", src_file)])
        chunks = iter_parallel_chunks(paths, SCORE_CHUNK_LINES)  # named as read_lines names them ('-': <stdin>)
    ref_names = [input_name(r) for r in ref_files]
    corpus = [{m: CorpusAccumulator(m, **opts, names=[input_name(s), *ref_names]) for m in metric_names} for s in sys_files]
    lengths = [LengthBucketAccumulator(edges, **opts) for _ in sys_files] if by_length else None
    sentences: Optional[list[list[dict[str, float]]]] = [[] for _ in sys_files] if sentence_level else None
    for chunk in chunks:
        chunk_refs = chunk[n_sys : n_sys + n_ref]
        basis = chunk[n_sys + n_ref] if src_file is not None else chunk_refs[0]
        for k, hyps in enumerate(chunk[:n_sys]):
            for acc in corpus[k].values():
                acc.add(hyps, chunk_refs)
            if lengths is not None:
                lengths[k].add(hyps, chunk_refs, basis)
            if sentences is not None:  # the per-line scores are kept (floats, not lines): they are the output
                sentences[k].extend(sentence_scores(hyps, chunk_refs, metric_names, **opts))
    result = TextScores(names, sys_files, metric_names, opts,
                        corpus=[{m: acc.result() for m, acc in c.items()} for c in corpus],
                        bucketed_by_source=src_file is not None, sentences=sentences,
                        by_length=[acc.result() for acc in lengths] if lengths is not None else None)
    if paired_bootstrap_test:
        result.bootstrap = paired_bootstrap(list(zip(names, systems)), refs, metric_names,
                                            n_samples=bootstrap_samples, **opts)
    if plot is not None and result.by_length is not None:
        from nmtkit.evaluate.plots import plot_length_buckets

        plot_length_buckets(plot, [b.label for b in result.by_length[0]],
                            {n: [b.bleu for b in bs] for n, bs in zip(names, result.by_length)},
                            xlabel="source sentence length (words)" if src_file is not None else "reference length (words)")
    return result
