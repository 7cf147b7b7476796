"""Attention posteriors: where a target word comes from once the word itself is known.

A decoder's attention ``alpha_ij`` for target word ``y_i`` is computed before ``y_i`` is known
(from ``s_{i-1}`` in RNNsearch), so it is the model's *prior* over source positions: where the
next word will probably come from.  Treating the attention as a latent alignment (Shankar &
Sarawagi 2018, "Posterior attention models"), Bayes' rule gives the posterior

    p(a_i = j | y_<=i, x)  ∝  alpha_ij * p(y_i | y_<i, x, c_i = h_j),

where the likelihood is the model's own output distribution with the context vector replaced
by the single annotation ``h_j``.  Forced alignment knows ``y_i``, so it can read links off the
posterior instead of the prior (``nmtkit-align --posterior``).  It needs one output-layer
evaluation per (target position, source position), which is why it is computed in chunks, and
only for the target rows asked for.

A model supports it by computing its pre-readout activation as a sum of a part that depends on
the decoder (``query_part`` ``[B, T, D]``) and a part that is linear in the context
(``context_part`` ``[B, S, D]``), plus the readout (``D -> logits``).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from nmtkit.data.dictionary import PAD_ID

#: Floats of one chunk of logits [rows, sources, V] (about 64 MB).
CHUNK_FLOATS = 1 << 24


def context_log_likelihoods(
    query_part: Tensor, context_part: Tensor, readout: Callable[[Tensor], Tensor], targets: Tensor,
    src_lengths: Tensor, vocab_size: int,
) -> Tensor:
    """``log p(y_i | ..., c_i = h_j)`` for every target position ``i`` and source position ``j``.

    ``query_part`` ``[B, T, D]`` + ``context_part`` ``[B, S, D]`` is the pre-readout activation with
    context ``h_j``; ``readout`` maps ``[..., D]`` to logits ``[..., vocab_size]``; ``targets``
    ``[B, T]`` the words ``y_i``.  Rows whose target is ``<pad>`` are not computed (0: their
    posterior is the prior), which is how a caller asks for some rows only.  Returns float32
    ``[B, T, S]``, ``-inf`` beyond each source length.
    """
    bsz, tgt_len, _ = query_part.shape
    src_len = context_part.size(1)
    out = torch.zeros(bsz, tgt_len, src_len, dtype=torch.float32, device=query_part.device)
    src_step = max(1, CHUNK_FLOATS // vocab_size)
    for b in range(bsz):
        s = int(src_lengths[b])
        out[b, :, s:] = float("-inf")
        rows = targets[b].ne(PAD_ID).nonzero().squeeze(1)
        if rows.numel() == 0:
            continue
        row_step = max(1, CHUNK_FLOATS // (min(s, src_step) * vocab_size))
        for r0 in range(0, rows.numel(), row_step):
            r = rows[r0 : r0 + row_step]
            want = targets[b, r]
            for j0 in range(0, s, src_step):
                j1 = min(s, j0 + src_step)
                pre = query_part[b, r, None, :] + context_part[b, None, j0:j1]  # [rows, sources, D]
                logp = torch.log_softmax(readout(pre).float(), dim=-1)  # [rows, sources, V]
                out[b, r, j0:j1] = logp.gather(2, want[:, None, None].expand(-1, j1 - j0, 1)).squeeze(2)
    return out


def attention_posterior(prior: Tensor, log_likelihood: Tensor, src_mask: Tensor) -> Tensor:
    """Normalised ``prior * likelihood`` over the source positions (``[B, T, S]``, float32).

    A position with prior 0 (outside a local attention window) keeps posterior 0; padding
    positions get exactly zero, as the attention contract requires."""
    mask = src_mask[:, None, :]
    log_prior = prior.float().log().masked_fill(~mask, float("-inf"))
    scores = log_prior + log_likelihood.float()
    dead = ~torch.isfinite(scores).any(dim=-1, keepdim=True)  # every supported position underflowed
    if dead.any():
        tiny = prior.float().clamp_min(torch.finfo(torch.float32).tiny).log() + log_likelihood.float()
        scores = torch.where(dead, tiny.masked_fill(~mask, float("-inf")), scores)
    return torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0)
