"""Teacher-forced scoring of given references (forced decoding), for scoring and alignment.

Why one teacher-forced pass per model instead of stepping: each member's ``forward``
yields every step's logits at once; members are combined exactly as in search (log of the
mean probability), so a reference scores the same here as it does inside beam search.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence

import torch
from torch import Tensor

from nmtkit.data.dataset import pad_sequences
from nmtkit.data.dictionary import BOS_ID, PAD_ID
from nmtkit.evaluate.metrics import perplexity
from nmtkit.generate.ensemble import EnsembleModel

if TYPE_CHECKING:
    from nmtkit.generate.bundle import ModelBundle


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
        return perplexity(self.log_prob, self.num_tokens)


def shift_right(tgt_tokens: Tensor, tgt_lengths: Tensor) -> Tensor:
    """``y_1 .. y_{n-1} </s>`` -> decoder input ``<s> y_1 .. y_{n-1}``, padding kept as padding."""
    prev = torch.cat([torch.full_like(tgt_tokens[:, :1], BOS_ID), tgt_tokens[:, :-1]], dim=1)
    positions = torch.arange(tgt_tokens.size(1), device=tgt_tokens.device).unsqueeze(0)
    return prev.masked_fill(positions >= tgt_lengths.unsqueeze(1), PAD_ID)


@torch.inference_mode()
def score_references(
    model: EnsembleModel, src_tokens: Tensor, src_lengths: Tensor, tgt_tokens: Tensor, tgt_lengths: Tensor,
    posterior_targets: Optional[Tensor] = None, need_attention: bool = True,
) -> list[ForcedResult]:
    """Score each reference ``tgt_tokens[i]`` (ending with ``</s>``, right-padded) given its source.

    ``posterior_targets``: report the attention posterior given these words (normally
    ``tgt_tokens``; ``<pad>`` where a row is not needed) instead of the attention (see
    :mod:`nmtkit.models.posterior`); the scores are the same.  ``need_attention=False``: the
    results' attention may be None (scores only, which spares a Transformer its alignment layer)."""
    prev = shift_right(tgt_tokens, tgt_lengths)
    lprobs, attn = model.forward_log_probs(src_tokens, src_lengths, prev, posterior_targets, need_attention)
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


def score_corpus(bundle: "ModelBundle", src_seqs: Sequence[Sequence[int]],
                 tgt_seqs: Sequence[Sequence[int]], need_attention: bool = True) -> list[ForcedResult]:
    """Score many (source, reference) id pairs, each ending with ``</s>``, in the bundle's
    length-sorted batches and precision; results in input order (``need_attention``: as
    :func:`score_references`)."""
    if len(src_seqs) != len(tgt_seqs):
        raise ValueError("source and reference lists differ in length")
    out: list[Optional[ForcedResult]] = [None] * len(src_seqs)
    for idx in bundle.batches([len(s) for s in src_seqs], [len(t) for t in tgt_seqs], sort_by="source"):
        src, slen = (t.to(bundle.device) for t in pad_sequences([src_seqs[i] for i in idx], append_eos=False))
        tgt, tlen = (t.to(bundle.device) for t in pad_sequences([tgt_seqs[i] for i in idx], append_eos=False))
        with bundle.autocast():
            results = score_references(bundle.model, src, slen, tgt, tlen, need_attention=need_attention)
        for i, r in zip(idx, results):
            out[i] = r
    return out  # type: ignore[return-value]
