"""Guided alignment (``nmtkit-train --guided-alignment-weight λ``): pull the attention towards given links.

Why: attention trained on translation alone aligns words poorly (issue 11); Marian and
OpenNMT-py add a loss between the attention and links from a statistical aligner
(eflomal, fast_align).  The links come from ``nmtkit-preprocess --alignfile`` as piece links
(:mod:`nmtkit.data.alignments`).

The gold matrix ``G [B, T, S]`` of a batch: row ``t`` belongs to target position ``t`` (piece
``y_t``, or ``</s>`` at the last position), the row of attention the model computes while
*predicting* that token (``model(src, lengths, prev)`` returns ``attn[:, t]`` next to
``logits[:, t]``, which scores ``target[:, t]``; no shift).  ``G[b, t, s] = 1 / n_t`` for each of
the ``n_t`` source pieces ``s`` linked to target piece ``t``, 0 elsewhere; the target ``</s>`` is
always linked to the source ``</s>`` (so the final step is guided too).  Target positions
without links have an all-zero row and add nothing.

Loss, summed over the batch like the translation NLL (:func:`nmtkit.train.loss.sequence_loss`)
and normalised with it by the trainer's ``--loss-norm`` (target tokens or sentences)::

    ce:   L = - sum_b sum_{t linked} sum_s G[b,t,s] * log(A[b,t,s] + 1e-6)
    mse:  L =   sum_b sum_{t linked} sum_s (A[b,t,s] - G[b,t,s])^2

The objective of an update is ``(NLL + λ L) / N`` with ``N`` its target tokens (``--loss-norm
token``, Marian's normalisation of ``ce``: the sum over positions divided by the target words)
or sentences (``--loss-norm sentence``), so λ weighs the alignment loss against the NLL the
same way under either.  With every target position linked this is λ times the mean
cross-entropy per linked target position.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import torch
from torch import Tensor

from nmtkit.data.alignments import StoredAlignments
from nmtkit.data.dataset import Batch
from nmtkit.data.dictionary import PAD_ID
from nmtkit.errors import NmtkitError


GUIDED_LOSSES = ("ce", "mse")
EPSILON = 1e-6  # inside the log, as Marian: attention may be exactly 0 (local attention, padding)


def check_guided_alignment(weight: float, arch: str, model: torch.nn.Module, has_links: bool, no_links: str) -> None:
    """``--guided-alignment-weight`` (``weight``) needs stored links (``has_links``; ``no_links``
    says where they are missing) and attention: refuse it at once otherwise; an alignment head
    learns only from it."""
    if weight <= 0:
        if getattr(model, "needs_guided_alignment", False):
            raise NmtkitError("--alignment-head is trained only by the guided-alignment loss: "
                              "give --guided-alignment-weight (and data preprocessed with --alignfile)")
        return
    if not has_links:
        raise NmtkitError(f"--guided-alignment-weight: {no_links} (run nmtkit-preprocess with --alignfile)")
    if not model.has_attention:
        raise NmtkitError(f"--guided-alignment-weight: {arch} ({model.model_name}) has no attention to guide")


def gold_alignment_matrix(links: Sequence[Optional[np.ndarray]], src_lengths: Tensor, tgt_lengths: Tensor,
                          shape: tuple[int, int]) -> Tensor:
    """``[B, T, S]`` row-normalised gold links (see the module docstring).

    ``links[b]``: piece links ``[n, 2]`` (source piece, target piece) of batch row ``b``, in the
    batch's order (so they follow whatever order batching put the sentences in);
    ``src_lengths``/``tgt_lengths``: real positions including ``</s>``; ``shape``: ``(T, S)``.
    """
    n_rows = len(links)
    gold = torch.zeros(n_rows, *shape, dtype=torch.float32)
    for b, pairs in enumerate(links):
        if pairs is not None and len(pairs):
            p = torch.as_tensor(np.asarray(pairs, dtype=np.int64))
            gold[b, p[:, 1], p[:, 0]] = 1.0
        gold[b, int(tgt_lengths[b]) - 1, int(src_lengths[b]) - 1] = 1.0  # </s> -> </s>
    return gold / gold.sum(dim=2, keepdim=True).clamp_min(1.0)


def batch_alignment_loss(alignments: StoredAlignments, batch: Batch, attn: Tensor, kind: str) -> Tensor:
    """:func:`guided_alignment_loss` of a training batch (its tensors on the device)
    against the links of its sentences, ``alignments`` being the corpus's: the links are taken in
    the batch's order (``batch.ids``), not the corpus's."""
    gold = gold_alignment_matrix([alignments[int(i)] for i in batch.ids], batch.src_lengths,
                                 batch.target.ne(PAD_ID).sum(dim=1), (attn.size(1), attn.size(2))).to(batch.target.device)
    return guided_alignment_loss(attn, gold, kind)


def guided_alignment_loss(attn: Tensor, gold: Tensor, kind: str = "ce") -> Tensor:
    """The alignment loss summed over the batch's linked target positions (formulas in the module docstring)."""
    a = attn.float()
    linked = (gold.sum(dim=2, keepdim=True) > 0).to(a.dtype)
    if kind == "ce":
        return -(gold * torch.log(a + EPSILON)).sum()
    if kind == "mse":
        return (((a - gold) ** 2) * linked).sum()
    raise NmtkitError(f"--guided-alignment-loss must be one of {', '.join(GUIDED_LOSSES)}, got {kind!r}")
