"""BLEU per sentence-length bucket, as in Luong et al. (2015) Fig. 6.

Why: attention is claimed to help most on long sentences; the claim is checked by
splitting the test set by source length and scoring each part separately.  The buckets
partition the corpus: every sentence falls in exactly one bucket, so the counts add up
to the corpus size.  Lengths are whitespace-separated words of the source when a source
is given, otherwise of the first reference.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from nmtkit.errors import NmtkitError
from nmtkit.evaluate.metrics import SCORE_CHUNK_LINES, CorpusAccumulator

#: Upper-exclusive edges of the default buckets: <10, 10-19, ..., 60-69, 70+.
DEFAULT_EDGES: tuple[int, ...] = (10, 20, 30, 40, 50, 60, 70)


@dataclass(frozen=True)
class BucketScore:
    """One bucket: lengths ``lo <= n < hi`` (``hi`` None: no upper bound)."""

    label: str
    lo: int
    hi: int | None
    count: int
    #: Corpus BLEU of the bucket's sentences; ``None`` when the bucket is empty.
    bleu: float | None


def parse_edges(spec: str) -> tuple[int, ...]:
    """Parse ``"10,20,30"`` into validated bucket edges (see :func:`check_edges`)."""
    try:
        edges = tuple(int(s) for s in spec.split(",") if s.strip())
    except ValueError:
        raise NmtkitError(f"bucket edges must be comma-separated integers, got {spec!r}") from None
    check_edges(edges)
    return edges


def check_edges(edges: Sequence[int]) -> None:
    """Edges must be positive and strictly increasing, so the buckets do not overlap."""
    if not edges:
        raise NmtkitError("at least one bucket edge is needed")
    if edges[0] <= 0:
        raise NmtkitError(f"bucket edges must be positive, got {edges[0]}")
    for a, b in zip(edges, edges[1:]):
        if b <= a:
            raise NmtkitError(f"bucket edges must be strictly increasing, got {a} then {b}")


def bucket_bounds(edges: Sequence[int]) -> list[tuple[int, int | None, str]]:
    """``(lo, hi, label)`` for each bucket: ``<e0``, ``e0-(e1-1)``, ..., ``eN+``."""
    check_edges(edges)
    bounds: list[tuple[int, int | None, str]] = [(0, edges[0], f"<{edges[0]}")]
    for a, b in zip(edges, edges[1:]):
        label = f"{a}-{b - 1}" if b - 1 > a else str(a)
        bounds.append((a, b, label))
    bounds.append((edges[-1], None, f"{edges[-1]}+"))
    return bounds


def bucket_of(length: int, edges: Sequence[int]) -> int:
    """Index of the bucket holding a sentence of ``length`` words."""
    for k, edge in enumerate(edges):
        if length < edge:
            return k
    return len(edges)


def assign_buckets(lengths: Sequence[int], edges: Sequence[int] = DEFAULT_EDGES) -> list[list[int]]:
    """Sentence indices per bucket (``len(edges) + 1`` lists that partition the corpus)."""
    check_edges(edges)
    groups: list[list[int]] = [[] for _ in range(len(edges) + 1)]
    for i, n in enumerate(lengths):
        groups[bucket_of(n, edges)].append(i)
    return groups


class LengthBucketAccumulator:
    """BLEU per length bucket from chunks of a corpus (bounded memory: per bucket, BLEU's
    sufficient statistics, not its lines).  :meth:`add` chunks in corpus order, then :meth:`result`."""

    def __init__(self, edges: Sequence[int] = DEFAULT_EDGES, *, tokenized: bool = False, lowercase: bool = False) -> None:
        self.edges = tuple(edges)
        self.bounds = bucket_bounds(self.edges)
        self.scores = [CorpusAccumulator("bleu", tokenized=tokenized, lowercase=lowercase) for _ in self.bounds]

    def add(self, hyps: Sequence[str], refs: Sequence[Sequence[str]], basis: Sequence[str]) -> None:
        """A chunk of hypotheses, its reference streams and the lines whose length decides the bucket."""
        lengths = [len(line.split()) for line in basis]
        for acc, idx in zip(self.scores, assign_buckets(lengths, self.edges)):
            if idx:
                acc.add([hyps[i] for i in idx], [[stream[i] for i in idx] for stream in refs])

    def result(self) -> list[BucketScore]:
        return [BucketScore(label=label, lo=lo, hi=hi, count=acc.lines, bleu=acc.result().score if acc.lines else None)
                for (lo, hi, label), acc in zip(self.bounds, self.scores)]


def bleu_by_length(hyps: Sequence[str], refs: Sequence[Sequence[str]],
                   src: Sequence[str] | None = None, edges: Sequence[int] = DEFAULT_EDGES, *,
                   tokenized: bool = False, lowercase: bool = False) -> list[BucketScore]:
    """Corpus BLEU of each length bucket (bucketed by ``src`` if given, else first reference)."""
    basis = src if src is not None else (refs[0] if refs else [])
    if len(basis) != len(hyps):
        what = "source" if src is not None else "reference"
        raise NmtkitError(f"{what} has {len(basis)} lines but the system output has {len(hyps)}")
    acc = LengthBucketAccumulator(edges, tokenized=tokenized, lowercase=lowercase)
    for i in range(0, len(hyps), SCORE_CHUNK_LINES):
        part = slice(i, i + SCORE_CHUNK_LINES)
        acc.add(hyps[part], [stream[part] for stream in refs], basis[part])
    return acc.result()
