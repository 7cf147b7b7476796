"""Alignment error rate, precision and recall over a corpus (Och & Ney 2003).

With hypothesis links A, gold sure links S and gold possible links P (S is a subset of P)::

    precision = |A & P| / |A|
    recall    = |A & S| / |S|
    AER       = 1 - (|A & S| + |A & P|) / (|A| + |S|)

Counts are summed over all sentences before dividing (a corpus score, not a mean of
sentence scores).  Zero denominators are defined, not errors:

* no hypothesis links at all (|A| = 0): precision = 1.0 (nothing proposed, nothing wrong);
* no sure gold links at all (|S| = 0): recall = 1.0 (nothing to find);
* both empty: AER = 0.0 (complete agreement that nothing aligns).

These keep AER = 1 - 2PR/(P+R) whenever P = S, e.g. an empty hypothesis against a
non-empty gold gives precision 1, recall 0, AER 1.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from nmtkit.data.pharaoh import GoldAlignment, Link
from nmtkit.errors import NmtkitError


@dataclass(frozen=True)
class AERResult:
    """Corpus alignment quality and the counts it was computed from."""

    precision: float
    recall: float
    aer: float
    n_sentences: int
    n_hyp: int  # |A|
    n_sure: int  # |S|
    n_hyp_sure: int  # |A & S|
    n_hyp_possible: int  # |A & P|


def alignment_error_rate(hyps: Sequence[Iterable[Link]], golds: Sequence[GoldAlignment]) -> AERResult:
    """Corpus precision, recall and AER of hypothesis link sets against gold alignments."""
    if len(hyps) != len(golds):
        raise NmtkitError(f"{len(hyps)} hypothesis alignments but {len(golds)} gold alignments")
    n_a = n_s = n_as = n_ap = 0
    for hyp, gold in zip(hyps, golds):
        a = set(hyp)
        sure = set(gold.sure)
        possible = set(gold.possible) | sure
        n_a += len(a)
        n_s += len(sure)
        n_as += len(a & sure)
        n_ap += len(a & possible)
    precision = n_ap / n_a if n_a else 1.0
    recall = n_as / n_s if n_s else 1.0
    aer = 1.0 - (n_as + n_ap) / (n_a + n_s) if (n_a + n_s) else 0.0
    return AERResult(precision=precision, recall=recall, aer=aer, n_sentences=len(hyps),
                     n_hyp=n_a, n_sure=n_s, n_hyp_sure=n_as, n_hyp_possible=n_ap)
