"""Attention posteriors: where a target word comes from once the word itself is known.

A decoder's attention ``alpha_ij`` for target word ``y_i`` is computed before ``y_i`` is known
(from ``s_{i-1}`` in RNNsearch), so it is the model's *prior* over source positions: where the
next word will probably come from.  Treating the attention as a latent alignment (Shankar &
Sarawagi 2018, "Posterior attention models"), Bayes' rule gives the posterior

    p(a_i = j | y_<=i, x)  ∝  alpha_ij * p(y_i | y_<i, x, c_i = h_j),

where the likelihood is the model's own output distribution with the context vector replaced
by the single annotation ``h_j``.  Forced alignment knows ``y_i``, so it can read links off the
posterior instead of the prior (``nmtkit-align --posterior``).  It needs one output-layer
evaluation per (target position, source position), which is why it is computed in chunks.

A model supports it by computing its pre-readout activation as a sum of a part that depends on
the decoder (``query_part`` ``[B, T, D]``) and a part that is linear in the context
(``context_part`` ``[B, S, D]``), plus the readout (``D -> logits``).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

#: Floats of one chunk of logits [t, S, V] (about 64 MB).
CHUNK_FLOATS = 1 << 24


def context_log_likelihoods(
    query_part: Tensor, context_part: Tensor, readout: Callable[[Tensor], Tensor], targets: Tensor,
    src_lengths: Tensor,
) -> Tensor:
    """``log p(y_i | ..., c_i = h_j)`` for every target position ``i`` and source position ``j``.

    ``query_part`` ``[B, T, D]`` + ``context_part`` ``[B, S, D]`` is the pre-readout activation with
    context ``h_j``; ``readout`` maps ``[..., D]`` to logits ``[..., V]``; ``targets`` ``[B, T]``
    the words ``y_i``.  Returns ``[B, T, S]``, ``-inf`` beyond each source length.
    """
    bsz, tgt_len, _ = query_part.shape
    src_len = context_part.size(1)
    out = query_part.new_full((bsz, tgt_len, src_len), float("-inf"))
    for b in range(bsz):
        s = int(src_lengths[b])
        ctx = context_part[b, :s]  # [s, D]
        probe = readout(query_part[b, :1, None] + ctx[None, :1])  # vocabulary size
        step = max(1, CHUNK_FLOATS // max(1, s * probe.size(-1)))
        for t0 in range(0, tgt_len, step):
            pre = query_part[b, t0 : t0 + step, None, :] + ctx[None]  # [t, s, D]
            logp = torch.log_softmax(readout(pre).float(), dim=-1)  # [t, s, V]
            want = targets[b, t0 : t0 + step, None, None].expand(-1, s, 1)
            out[b, t0 : t0 + step, :s] = logp.gather(2, want).squeeze(2)
    return out


def attention_posterior(prior: Tensor, log_likelihood: Tensor, src_mask: Tensor) -> Tensor:
    """Normalised ``prior * likelihood`` over the source positions (``[B, T, S]``); padding
    positions get exactly zero, as the attention contract requires."""
    log_prior = prior.float().clamp_min(torch.finfo(torch.float32).tiny).log()
    scores = (log_prior + log_likelihood.float()).masked_fill(~src_mask[:, None, :], float("-inf"))
    return torch.softmax(scores, dim=-1).masked_fill(~src_mask[:, None, :], 0.0)
