"""Corpus and sentence scores (BLEU, chrF, TER), paired bootstrap and perplexity.

Why a wrapper around sacrebleu: every score nmtkit reports must carry sacrebleu's
signature so it can be reproduced, and the two BLEU flavours in the literature must not
be confused.  ``tokenized=False`` is SacreBLEU proper (detokenized text, its own 13a
tokenizer); ``tokenized=True`` is what the attention papers report ("multi-bleu"):
already tokenized text split on whitespace only (``tok:none`` in the signature).

Conventions: ``refs`` is a list of reference *streams*, each a list of lines parallel to
``hyps`` (so two references are ``[ref1_lines, ref2_lines]``).  Without ``lowercase``
every metric is case-sensitive -- TER included, although sacrebleu's own TER default is
case-insensitive; the signature always records the case setting (``case:``/``c:``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

from nmtkit.errors import InputError, NmtkitError

#: Metric names accepted by :func:`make_metric` and the ``--metrics`` option.
METRIC_NAMES: tuple[str, ...] = ("bleu", "chrf", "ter")

#: Default bootstrap resamples, as in sacrebleu and Koehn (2004).
DEFAULT_BOOTSTRAP_SAMPLES = 1000


@dataclass(frozen=True)
class MetricResult:
    """One corpus score: ``name`` as sacrebleu prints it (``BLEU``, ``chrF2``, ``TER``)."""

    name: str
    score: float
    signature: str
    #: sacrebleu's one-line rendering, e.g. ``BLEU = 23.1 55.0/29.2/17.5/11.0 (BP = ...)``.
    details: str


@dataclass(frozen=True)
class BootstrapResult:
    """Paired bootstrap outcome for one system and one metric (sacrebleu's ``paired-bs``).

    ``mean`` and ``ci`` are the bootstrap mean and half-width of the 95% interval;
    ``p_value`` is ``None`` for the baseline (the system everything is compared with).
    """

    system: str
    metric: str
    score: float
    mean: float | None
    ci: float | None
    p_value: float | None
    signature: str


def parse_metric_names(spec: str) -> list[str]:
    """Turn ``"bleu,chrf"`` into ``["bleu", "chrf"]``; unknown or repeated names are errors."""
    names = [s.strip().lower() for s in spec.split(",") if s.strip()]
    if not names:
        raise NmtkitError("no metric given (choose from " + ", ".join(METRIC_NAMES) + ")")
    for n in names:
        if n not in METRIC_NAMES:
            raise NmtkitError(f"unknown metric {n!r} (choose from " + ", ".join(METRIC_NAMES) + ")")
    if len(set(names)) != len(names):
        raise NmtkitError(f"metric listed twice in {spec!r}")
    return names


def make_metric(name: str, *, tokenized: bool = False, lowercase: bool = False,
                sentence_level: bool = False):  # noqa: ANN201 (sacrebleu Metric)
    """Build the sacrebleu metric object for ``name`` with nmtkit's conventions.

    ``tokenized`` only changes BLEU (chrF works on characters and TER keeps sacrebleu's
    default of no tokenization).  ``sentence_level`` turns on BLEU's effective n-gram
    order, which sentence BLEU needs to be meaningful.
    """
    from sacrebleu.metrics import BLEU, CHRF, TER

    name = name.lower()
    if name == "bleu":
        return BLEU(
            lowercase=lowercase,
            tokenize="none" if tokenized else None,
            force=tokenized,  # tokenized input is intended: silence the "detokenize" warning
            effective_order=sentence_level,
        )
    if name == "chrf":
        return CHRF(lowercase=lowercase)
    if name == "ter":
        return TER(case_sensitive=not lowercase)
    raise NmtkitError(f"unknown metric {name!r} (choose from " + ", ".join(METRIC_NAMES) + ")")


def _check_refs(hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> None:
    """Refuse empty corpora and reference streams that are not parallel to ``hyps``."""
    if len(hyps) == 0:
        raise NmtkitError("nothing to score: the system output is empty")
    if len(refs) == 0:
        raise NmtkitError("at least one reference is needed")
    for k, stream in enumerate(refs, start=1):
        if len(stream) != len(hyps):
            raise NmtkitError(
                f"reference {k} has {len(stream)} lines but the system output has {len(hyps)}"
            )


#: The longest line (in words, hypothesis or reference) TER scores.  Why: sacrebleu's TER keeps
#: an edit-distance table of hypothesis words x reference words (and caches its rows), so one
#: line of 2 million words grew until memory ran out; 1000 x 1000 stays near 100 MB.
MAX_TER_WORDS = 1000


def check_ter_lengths(hyps: Sequence[str], refs: Sequence[Sequence[str]], first_line: int = 1,
                      names: Optional[Sequence[str]] = None) -> None:
    """Refuse a line TER cannot score in bounded memory (:data:`MAX_TER_WORDS`), naming its
    file (``names``: the hypotheses' then each reference stream's) and line number."""
    streams = [hyps, *refs]
    labels = list(names) if names is not None else ["hypotheses", *[f"references {k}" for k in range(1, len(refs) + 1)]]
    for label, stream in zip(labels, streams):
        for i, line in enumerate(stream):
            if len(line) > MAX_TER_WORDS and len(line.split()) > MAX_TER_WORDS:  # (a short line is no longer split)
                raise InputError(label, first_line + i, f"{len(line.split())} words: TER scores lines of at most "
                                 f"{MAX_TER_WORDS} words (its edit distance holds a words x words table); split "
                                 "the line, or score it without ter")


#: Lines handed to sacrebleu at a time.  Why: sacrebleu caches the n-grams of every reference
#: line it is given (about 11 kB a line for chrF), so a 1M-line corpus scored in one call took
#: over 11 GB; summing sufficient statistics chunk by chunk gives the same score in bounded memory.
SCORE_CHUNK_LINES = 2000


class CorpusAccumulator:
    """One corpus metric computed from per-chunk sufficient statistics.

    :meth:`add` chunks in corpus order, then :meth:`result`: exactly (to the last digit) what
    sacrebleu's ``corpus_score`` gives on the whole corpus, because it sums the same per-line
    statistics in the same order (``_extract_corpus_statistics`` / ``_compute_score_from_stats``,
    the pair sacrebleu's own significance tests use).
    """

    def __init__(self, name: str, *, tokenized: bool = False, lowercase: bool = False,
                 names: Optional[Sequence[str]] = None) -> None:
        self.metric = make_metric(name, tokenized=tokenized, lowercase=lowercase)
        self.name = name
        self.names = names  # the files of the hypotheses and references, for errors naming a line
        # sacrebleu warns about tokenized periods per call, i.e. per chunk: count them over the
        # corpus here and warn once, as one call over the whole corpus would
        self._check_periods = not self.metric._force
        self.metric._force = True
        self.tokenized_periods = 0
        self.totals: list | None = None
        self.lines = 0

    def add(self, hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> None:
        """Add the statistics of a chunk of hypotheses and its reference streams."""
        if not hyps:
            return
        if self.name == "ter":
            check_ter_lengths(hyps, refs, self.lines + 1, self.names)
        stats = self.metric._extract_corpus_statistics(list(hyps), [list(r) for r in refs])
        if self._check_periods:
            self.tokenized_periods += sum(1 for h in hyps if h.endswith(" ."))
        for line in stats:
            if self.totals is None:  # as sacrebleu's sum_of_lists: start from zero of the stats' type
                self.totals = [type(line[0])(0.0)] * len(line)
            for i, v in enumerate(line):
                self.totals[i] += v
        self.lines += len(stats)

    def result(self) -> MetricResult:
        if self.totals is None:
            raise NmtkitError("nothing to score: the system output is empty")
        if self.tokenized_periods >= 100:
            import logging

            sacrelogger = logging.getLogger("sacrebleu")  # the logger sacrebleu itself warns on
            sacrelogger.warning("That's 100 lines that end in a tokenized period ('.')")
            sacrelogger.warning("It looks like you forgot to detokenize your test data, which may hurt your score.")
            sacrelogger.warning("If you insist your data is detokenized, or don't care, you can suppress this "
                                "message with the `force` parameter.")
        result = self.metric._compute_score_from_stats(self.totals)
        return MetricResult(name=result.name, score=float(result.score), signature=str(self.metric.get_signature()),
                            details=result.format())


def corpus_score(name: str, hyps: Sequence[str], refs: Sequence[Sequence[str]], *,
                 tokenized: bool = False, lowercase: bool = False,
                 chunk_lines: int = SCORE_CHUNK_LINES) -> MetricResult:
    """Score a whole corpus with one metric and return score, signature and details
    (computed ``chunk_lines`` at a time: see :class:`CorpusAccumulator`)."""
    _check_refs(hyps, refs)
    acc = CorpusAccumulator(name, tokenized=tokenized, lowercase=lowercase)
    for i in range(0, len(hyps), chunk_lines):
        acc.add(hyps[i : i + chunk_lines], [r[i : i + chunk_lines] for r in refs])
    return acc.result()


def corpus_bleu(hyps: Sequence[str], refs: Sequence[Sequence[str]], *,
                tokenized: bool = False, lowercase: bool = False) -> MetricResult:
    """Corpus BLEU: SacreBLEU on detokenized text, or multi-bleu style with ``tokenized``."""
    return corpus_score("bleu", hyps, refs, tokenized=tokenized, lowercase=lowercase)


def corpus_chrf(hyps: Sequence[str], refs: Sequence[Sequence[str]], *,
                lowercase: bool = False) -> MetricResult:
    """Corpus chrF2 (character n-gram F-score, beta = 2)."""
    return corpus_score("chrf", hyps, refs, lowercase=lowercase)


def corpus_ter(hyps: Sequence[str], refs: Sequence[Sequence[str]], *,
               lowercase: bool = False) -> MetricResult:
    """Corpus TER (translation edit rate; lower is better)."""
    return corpus_score("ter", hyps, refs, lowercase=lowercase)


def corpus_scores(hyps: Sequence[str], refs: Sequence[Sequence[str]],
                  metrics: Sequence[str] = ("bleu", "chrf"), *,
                  tokenized: bool = False, lowercase: bool = False) -> dict[str, MetricResult]:
    """Several corpus metrics at once, keyed by the lower-case metric name given."""
    return {
        m: corpus_score(m, hyps, refs, tokenized=tokenized, lowercase=lowercase) for m in metrics
    }


def sentence_scores(hyps: Sequence[str], refs: Sequence[Sequence[str]],
                    metrics: Sequence[str] = ("bleu", "chrf"), *,
                    tokenized: bool = False, lowercase: bool = False) -> list[dict[str, float]]:
    """One ``{metric: score}`` dict per sentence (BLEU with effective order)."""
    _check_refs(hyps, refs)
    if "ter" in metrics:
        check_ter_lengths(hyps, refs)
    objs = {m: make_metric(m, tokenized=tokenized, lowercase=lowercase, sentence_level=True)
            for m in metrics}
    out: list[dict[str, float]] = []
    for i, hyp in enumerate(hyps):
        sent_refs = [stream[i] for stream in refs]
        out.append({m: float(obj.sentence_score(hyp, sent_refs).score) for m, obj in objs.items()})
    return out


def paired_bootstrap(systems: Sequence[tuple[str, Sequence[str]]], refs: Sequence[Sequence[str]],
                     metrics: Sequence[str] = ("bleu",), *, tokenized: bool = False,
                     lowercase: bool = False,
                     n_samples: int = DEFAULT_BOOTSTRAP_SAMPLES) -> list[BootstrapResult]:
    """Paired bootstrap resampling (Koehn 2004) with sacrebleu's own implementation.

    ``systems`` is ``[(name, hyps), ...]``; the first is the baseline, every other system
    gets a p-value for "differs from the baseline" (a system scoring exactly the
    baseline's score gets p = 1.0; sacrebleu alone would report its minimum p).  The
    resampling is seeded by sacrebleu (``SACREBLEU_SEED``, default 12345), so repeated
    runs agree.  Results come back system by system, metrics in the order given.
    """
    from sacrebleu.significance import PairedTest, Result

    if len(systems) < 2:
        raise NmtkitError("the paired bootstrap test needs at least two systems")
    if n_samples < 1:
        raise NmtkitError(f"bootstrap samples must be positive, got {n_samples}")
    for _, hyps in systems:
        _check_refs(hyps, refs)
        if "ter" in metrics:
            check_ter_lengths(hyps, refs)
    objs = {m: make_metric(m, tokenized=tokenized, lowercase=lowercase) for m in metrics}
    test = PairedTest(
        named_systems=[(name, list(h)) for name, h in systems],
        metrics=objs,
        references=[list(r) for r in refs],
        test_type="bs",
        n_samples=n_samples,
    )
    signatures, table = test()
    names = table["System"]
    results: list[BootstrapResult] = []
    for k, sys_name in enumerate(names):
        for metric_name in signatures:  # sacrebleu keeps the metric order given
            r, baseline = table[metric_name][k], table[metric_name][0]
            # the table holds the names under "System" and a Result in every metric's column
            assert isinstance(r, Result) and isinstance(baseline, Result)
            p_value = r.p_value
            if p_value is not None and r.score == baseline.score:
                # sacrebleu counts resampled differences strictly above the observed one,
                # so identical systems would get the smallest possible p (1/(n+1)).
                # No observed difference is no evidence of one: p = 1.
                p_value = 1.0
            results.append(BootstrapResult(
                system=str(sys_name),
                metric=metric_name,
                score=float(r.score),
                mean=None if r.mean is None else float(r.mean),
                ci=None if r.ci is None else float(r.ci),
                p_value=None if p_value is None else float(p_value),
                signature=str(signatures[metric_name]),
            ))
    return results


def perplexity(total_logprob_nats: float, n_tokens: int) -> float:
    """Corpus perplexity ``exp(-sum log p / N)`` from natural-log probabilities.

    ``n_tokens`` counts every scored target token (``</s>`` included, as in training).
    A huge value overflows to ``inf`` rather than raising.
    """
    if n_tokens <= 0:
        raise ValueError(f"perplexity needs a positive token count, got {n_tokens}")
    try:
        return math.exp(-total_logprob_nats / n_tokens)
    except OverflowError:
        return math.inf
