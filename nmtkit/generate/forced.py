"""Teacher-forced scoring of given references (forced decoding), for scoring and alignment.

Why one teacher-forced pass per model instead of stepping: each member's ``forward``
yields every step's logits at once; members are combined exactly as in search (log of the
mean probability), so a reference scores the same here as it does inside beam search.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import torch
from torch import Tensor

from nmtkit.data.dictionary import BOS_ID, EOS_ID, PAD_ID
from nmtkit.generate.ensemble import EnsembleModel


@dataclass
class ForcedResult:
    """Scores of one reference.

    ``tokens``: reference ids without the final ``</s>``; ``positional_scores``
    ``[len(tokens) + 1]``: log-probability of each token and of ``</s>``; ``log_prob``: their
    sum; ``num_tokens``: ``len(tokens) + 1``; ``attention``: ``[len(tokens) + 1, src_len]``
    (rows: each token then ``</s>``; columns: real source positions incl. the source
    ``</s>``) or ``None`` when no model has attention.  Tensors are on the CPU.
    """

    tokens: list[int]
    positional_scores: Tensor
    log_prob: float
    num_tokens: int
    attention: Optional[Tensor]

    @property
    def avg_log_prob(self) -> float:
        return self.log_prob / self.num_tokens

    @property
    def perplexity(self) -> float:
        return math.exp(-self.avg_log_prob)


def collate(seqs: Sequence[Sequence[int]], device: torch.device | str | None = None) -> tuple[Tensor, Tensor]:
    """Right-pad id sequences that each end with ``</s>`` -> (tokens ``[B, T]``, lengths ``[B]``).

    Lengths include the ``</s>``, as the model contract expects for sources and targets.
    """
    if not seqs:
        raise ValueError("collate needs at least one sequence")
    for s in seqs:
        if len(s) == 0 or int(s[-1]) != EOS_ID:
            raise ValueError("every sequence must end with </s> (use Dictionary.encode(..., add_eos=True))")
    width = max(len(s) for s in seqs)
    toks = torch.full((len(seqs), width), PAD_ID, dtype=torch.long)
    for i, s in enumerate(seqs):
        toks[i, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    return toks.to(device), lengths.to(device)


def shift_right(tgt_tokens: Tensor, tgt_lengths: Tensor) -> Tensor:
    """``y_1 .. y_{n-1} </s>`` -> decoder input ``<s> y_1 .. y_{n-1}``, padding kept as padding."""
    prev = torch.cat([torch.full_like(tgt_tokens[:, :1], BOS_ID), tgt_tokens[:, :-1]], dim=1)
    positions = torch.arange(tgt_tokens.size(1), device=tgt_tokens.device).unsqueeze(0)
    return prev.masked_fill(positions >= tgt_lengths.unsqueeze(1), PAD_ID)


@torch.inference_mode()
def score_references(
    model: EnsembleModel, src_tokens: Tensor, src_lengths: Tensor, tgt_tokens: Tensor, tgt_lengths: Tensor,
    posterior_targets: Optional[Tensor] = None,
) -> list[ForcedResult]:
    """Score each reference ``tgt_tokens[i]`` (ending with ``</s>``, right-padded) given its source.

    ``posterior_targets``: report the attention posterior given these words (normally
    ``tgt_tokens``; ``<pad>`` where a row is not needed) instead of the attention (see
    :mod:`nmtkit.models.posterior`); the scores are the same."""
    prev = shift_right(tgt_tokens, tgt_lengths)
    lprobs, attn = model.forward_log_probs(src_tokens, src_lengths, prev, posterior_targets)
    pos = lprobs.gather(2, tgt_tokens.unsqueeze(2)).squeeze(2).cpu()
    attn = attn.float().cpu() if attn is not None else None
    tgt_cpu = tgt_tokens.cpu()
    results = []
    for i, (n, s) in enumerate(zip(tgt_lengths.tolist(), src_lengths.tolist())):
        ps = pos[i, :n].clone()
        results.append(
            ForcedResult(
                tokens=tgt_cpu[i, : n - 1].tolist(),
                positional_scores=ps,
                log_prob=float(ps.sum()),
                num_tokens=n,
                attention=None if attn is None else attn[i, :n, :s].clone(),
            )
        )
    return results


def score_corpus(
    model: EnsembleModel,
    src_seqs: Sequence[Sequence[int]],
    tgt_seqs: Sequence[Sequence[int]],
    batch_size: int = 64,
    device: torch.device | str | None = None,
) -> list[ForcedResult]:
    """Score many (source, reference) id pairs in length-sorted batches; results in input order.

    Sorting by length keeps padding (wasted compute) low; every sequence ends with ``</s>``.
    """
    if len(src_seqs) != len(tgt_seqs):
        raise ValueError("source and reference lists differ in length")
    order = sorted(range(len(src_seqs)), key=lambda i: (len(src_seqs[i]), len(tgt_seqs[i])))
    out: list[Optional[ForcedResult]] = [None] * len(order)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        src, slen = collate([src_seqs[i] for i in idx], device)
        tgt, tlen = collate([tgt_seqs[i] for i in idx], device)
        for i, r in zip(idx, score_references(model, src, slen, tgt, tlen)):
            out[i] = r
    return out  # type: ignore[return-value]
