"""The search's top-k and its tie order, in the two forms its executors need.

The order (:func:`nmtkit.generate.search.rules.top_candidates` states it once): by descending
value, equal values by ascending column.  ``torch.topk`` leaves the order of equal values
unspecified, so both forms enforce it:

* :func:`topk_ordered` (the eager search) asks the host whether a tie crosses the cut and
  redoes only those rows with :func:`exact_topk`; on the CPU wide rows take :func:`grouped_topk`.
* :func:`keyed_topk` (the fixed-shape search, replayed as CUDA graphs) never looks at the data
  on the host: the tie order is encoded in 64-bit keys (:func:`exact_topk`).

Both rank :class:`CandidateScores`: a step's log-probabilities plus each row's score, which
the grouped top-k reads without writing the sum out.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

_NEG_INF = float("-inf")

#: Elements per group of :func:`grouped_topk`.
TOPK_GROUP = 8


@dataclass
class CandidateScores:
    """Each sentence's candidate scores: ``lprobs[r, c] + shift[r]`` over its ``per`` rows, ranked
    as one row of ``per * V`` (column ``b * V + c``: row ``b`` of the sentence, token ``c``).

    Why not the sum itself: writing ``rows x V`` sums and reading them back cost a search step
    about as much as its log-softmax (two passes over 10 MB at beam 5, batch 64, 8k words);
    :func:`grouped_topk` needs the sums only of the few elements it ranks.  ``dense`` writes
    them all (into ``out``, a reused ``[>= rows, V]`` buffer, where given), for the other forms."""

    lprobs: Tensor  # [n * per, V]
    shift: Tensor  # [n * per]
    per: int
    out: Optional[Tensor] = None

    @property
    def width(self) -> int:
        return self.per * self.lprobs.size(1)

    def dense(self) -> Tensor:
        """All candidate scores, ``[n, per * V]``."""
        r, v = self.lprobs.shape
        out = self.out[:r] if self.out is not None and self.out.size(1) == v else None
        return torch.add(self.lprobs, self.shift.unsqueeze(1), out=out).view(-1, self.per * v)

    def rows(self, sentences: Tensor) -> Tensor:
        """The candidate scores of some sentences only, ``[len(sentences), per * V]``."""
        v = self.lprobs.size(1)
        lp = self.lprobs.unflatten(0, (-1, self.per)).index_select(0, sentences)
        return (lp + self.shift.view(-1, self.per, 1).index_select(0, sentences)).view(-1, self.per * v)


def grouped_topk(c: CandidateScores, m: int) -> Optional[tuple[Tensor, Tensor]]:
    """``c.dense().topk(m, dim=1)`` from group maxima, or None where that would not be exact or fast.

    Why: ATen's CPU top-k over a sentence's ``beam * V`` candidates costs several times a
    maximum over the same numbers (bench/README.md), and the candidates need not be summed to
    be ranked.  Each row's first ``8 * (V // 8)`` columns form :data:`TOPK_GROUP` strided
    blocks (group ``g``: columns ``g, g + G, ..., g + 7G``, so that the maxima are one vectorised
    maximum over the ``[rows, 8, G]`` view); a group's best candidate is its maximum plus the
    row's shift (rounding is monotone), and the top-k is taken among the elements of each
    sentence's ``m`` best groups and the few columns past the last group only.  When the
    ``m``-th best group maximum is finite and above the ``m+1``-th, every element outside those
    groups is below ``m`` elements inside them, so the ``m`` largest candidates, and every one
    equal to one of them, are among those taken: the values are exactly a full top-k's, each
    summed as ``dense`` sums it, and ties can be ordered as in a full top-k (:func:`topk_ordered`).
    The sentences where that does not hold (ties at the cut, fewer than ``m`` finite groups:
    rare with real models) take the full top-k, those only.  None for sentences with fewer
    than ``64 (m + 1)`` groups, where ATen's top-k of the maxima leaves its partial-sort path
    and costs more than it saves, and off the CPU (a GPU's top-k is fast, and its decoder loop
    is bound by kernel launches).  The result is sorted by descending value, ties in no
    specified order."""
    lp, shift, per = c.lprobs, c.shift, c.per
    rows, v = lp.shape
    n, groups = rows // per, v // TOPK_GROUP
    if per * groups < 64 * (m + 1) or lp.device.type != "cpu" or lp.stride(1) != 1:
        return None
    maxima = lp.as_strided((rows, TOPK_GROUP, groups), (lp.stride(0), groups, 1)).amax(1)
    top_max, top_group = maxima.add_(shift.unsqueeze(1)).view(n, per * groups).topk(m + 1, dim=1)
    cut = top_max[:, m - 1]
    inexact = ((cut <= top_max[:, m]) | (cut == _NEG_INF)).nonzero().squeeze(1)
    chosen = top_group[:, :m]
    row = torch.div(chosen, groups, rounding_mode="floor")  # the row within its sentence
    row_id = row + torch.arange(n, device=lp.device).unsqueeze(1) * per
    col = (chosen - row * groups).unsqueeze(2) + torch.arange(TOPK_GROUP, device=lp.device) * groups
    vals = (lp[row_id.unsqueeze(2), col] + shift[row_id].unsqueeze(2)).view(n, m * TOPK_GROUP)
    idx = (row.unsqueeze(2) * v + col).view(n, m * TOPK_GROUP)
    tail = v - TOPK_GROUP * groups
    if tail:  # the columns past the last group, of every row: always taken
        tail_vals = (lp[:, v - tail:] + shift.unsqueeze(1)).reshape(n, per * tail)
        tail_idx = (torch.arange(per, device=lp.device).unsqueeze(1) * v + torch.arange(v - tail, v, device=lp.device))
        vals = torch.cat([vals, tail_vals], 1)
        idx = torch.cat([idx, tail_idx.view(1, per * tail).expand(n, -1)], 1)
    vals, pos = vals.topk(m, dim=1)
    idx = idx.gather(1, pos)
    if inexact.numel():
        full_vals, full_idx = c.rows(inexact).topk(m, dim=1)
        vals.index_copy_(0, inexact, full_vals)
        idx.index_copy_(0, inexact, full_idx)
    return vals, idx


def topk_ordered(c: CandidateScores, k: int) -> tuple[Tensor, Tensor]:
    """Each sentence's top-``k`` float32 candidate scores, by descending score, ties going to the
    lower column index.

    ``torch.topk`` does not specify which of equal elements it returns, so rows whose
    ``k``-th value equals the ``k+1``-th (a tie across the cut) are redone by
    :func:`exact_topk` (rare in float32; a row or two per step in bf16, where a stable sort of
    the row's ``beam * V`` scores took an eighth of the search; common with the hand-made tables
    of the tests).  Wide rows on the CPU take :func:`grouped_topk` where it is exact.
    """
    k = min(k, c.width)
    extra = int(k < c.width)  # one more element tells whether a tie crosses the boundary
    fast = grouped_topk(c, k + extra)
    vals, idx = fast if fast is not None else c.dense().topk(k + extra, dim=1)
    boundary_tie = (vals[:, k - 1] == vals[:, -1]) & (vals[:, k - 1] > _NEG_INF) if extra else None
    vals, idx = vals[:, :k], idx[:, :k]
    # order the chosen k by (value desc, index asc)
    idx, perm = idx.sort(dim=1)
    vals = vals.gather(1, perm)
    vals, perm = vals.sort(dim=1, descending=True, stable=True)
    idx = idx.gather(1, perm)
    if boundary_tie is None:
        return vals, idx
    rows = boundary_tie.nonzero().squeeze(1)
    if rows.numel():  # keyed top-k, not a stable sort of the row: ties are common in bf16 log-probs
        vals[rows], idx[rows] = exact_topk(c.rows(rows), k)
    return vals, idx


def keyed_topk(c: CandidateScores, k: int) -> tuple[Tensor, Tensor]:
    """:func:`exact_topk` of all the candidate scores: :func:`topk_ordered`'s order with no host
    synchronisation (the fixed-shape search)."""
    return exact_topk(c.dense(), min(k, c.width))


def exact_topk(scores: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Row-wise top-``k`` of float32 ``scores`` by descending value, equal values by ascending
    column: :func:`topk_ordered`'s order, with no host synchronisation.

    Each value's IEEE bits become an integer in the values' order (negative values have their
    magnitude bits reversed; ``-0.0`` is first made ``+0.0``, which compares equal to it), shifted
    above 32 bits, and the reversed column fills the low bits: the keys are distinct, and their
    order is the wanted one."""
    bits = (scores + 0.0).view(torch.int32).to(torch.int64)
    ordered = torch.where(bits < 0, -(2**31) - 1 - bits, bits)
    cols = torch.arange(scores.size(1), device=scores.device, dtype=torch.int64)
    keys = ordered * 2**32 + (2**32 - 1 - cols)
    idx = keys.topk(k, dim=1).indices
    return scores.gather(1, idx), idx
