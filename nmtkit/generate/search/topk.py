"""The search's top-k and its tie order, in the two forms its executors need.

The order (:func:`nmtkit.generate.search.rules.top_candidates` states it once): by descending
value, equal values by ascending column.  ``torch.topk`` leaves the order of equal values
unspecified, so both forms enforce it:

* :func:`topk_ordered` (the eager search) asks the host whether a tie crosses the cut and
  redoes only those rows with :func:`exact_topk`; on the CPU wide rows take :func:`chunked_topk`.
* :func:`exact_topk` (the fixed-shape search, replayed as CUDA graphs) never looks at the data
  on the host: the tie order is encoded in 64-bit keys.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

_NEG_INF = float("-inf")

#: Elements per group of :func:`chunked_topk`.
TOPK_GROUP = 8


def chunked_topk(scores: Tensor, m: int) -> Optional[tuple[Tensor, Tensor]]:
    """``scores.topk(m, dim=1)`` in two stages, or None where that would not be exact or fast.

    Why: ATen's CPU top-k over a sentence's ``beam * V`` candidates costs several times a
    maximum over the same numbers (bench/README.md).  Each row's columns are split into groups
    of :data:`TOPK_GROUP` (group ``g``: columns ``g, g + G, g + 2G, ...``, so that the group
    maxima are one vectorised maximum over rows of the ``[n, TOPK_GROUP, G]`` view), the groups
    are ranked by their maxima, and the top-``m`` is taken among the elements of the ``m`` best
    groups only.  When the ``m``-th best group maximum is finite and above the ``m+1``-th, every
    element outside those groups is below every one of their maxima, so the ``m`` largest
    elements, and every element equal to one of them, lie in the chosen groups: the values are
    exactly ``torch.topk``'s and ties can be ordered as in a full top-k (:func:`topk_ordered`).
    The rows where that does not hold (ties at the cut, fewer than ``m`` finite groups: rare
    with real models) take the full top-k, those rows only.  None for rows with fewer than
    ``64 (m + 1)`` groups, where ATen's top-k of the maxima leaves its partial-sort path and
    costs more than it saves, and off the CPU (a GPU's top-k is fast, and its decoder loop is
    bound by kernel launches).  ``scores`` ``[n, W]``, ``W`` a multiple of :data:`TOPK_GROUP`;
    the result is sorted by descending value, ties in no specified order."""
    n, width = scores.shape
    groups = width // TOPK_GROUP
    if width % TOPK_GROUP or groups < 64 * (m + 1) or scores.device.type != "cpu":
        return None
    view = scores.view(n, TOPK_GROUP, groups)
    top_max, top_group = view.amax(1).topk(m + 1, dim=1)
    cut = top_max[:, m - 1]
    inexact = ((cut <= top_max[:, m]) | (cut == _NEG_INF)).nonzero().squeeze(1)
    chosen = top_group[:, :m]
    elems = view.gather(2, chosen.unsqueeze(1).expand(n, TOPK_GROUP, m)).reshape(n, TOPK_GROUP * m)
    vals, pos = elems.topk(m, dim=1)
    idx = chosen.gather(1, pos % m) + (pos // m) * groups
    if inexact.numel():
        full_vals, full_idx = scores.index_select(0, inexact).topk(m, dim=1)
        vals.index_copy_(0, inexact, full_vals)
        idx.index_copy_(0, inexact, full_idx)
    return vals, idx


def topk_ordered(scores: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Row-wise top-``k`` of float32 ``scores`` (the search's log-probs always are) by descending
    score, ties going to the lower column index.

    ``torch.topk`` does not specify which of equal elements it returns, so rows whose
    ``k``-th value equals the ``k+1``-th (a tie across the cut) are redone by
    :func:`exact_topk` (rare in float32; a row or two per step in bf16, where a stable sort of
    the row's ``beam * V`` scores took an eighth of the search; common with the hand-made tables
    of the tests).  Wide rows whose
    width is a multiple of :data:`TOPK_GROUP` take :func:`chunked_topk` where it is exact.
    """
    k = min(k, scores.size(1))
    extra = int(k < scores.size(1))  # one more element tells whether a tie crosses the boundary
    fast = chunked_topk(scores, k + extra)
    vals, idx = fast if fast is not None else scores.topk(k + extra, dim=1)
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
        vals[rows], idx[rows] = exact_topk(scores.index_select(0, rows), k)
    return vals, idx


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
