"""Multi-head attention (Vaswani et al. 2017, section 3.2.2) for :mod:`nmtkit.models.transformer`.

Why a module of its own: the fused kernel (:func:`torch.nn.functional.scaled_dot_product_attention`)
and the written-out product that also returns the weights (read as alignment) must compute the same
thing, and the tests hold them against a plain softmax(QKᵀ/√d)V here, apart from the layers.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from nmtkit.models.dropout import dropout as fast_dropout
from nmtkit.models.gemm import Linear


def split_heads(x: Tensor, heads: int) -> Tensor:
    """``[B, T, D]`` -> ``[B, heads, T, D / heads]``."""
    b, t, d = x.shape
    return x.view(b, t, heads, d // heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """``[B, heads, T, d]`` -> ``[B, T, heads * d]``."""
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


def attend_with_weights(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], dropout: float,
                        training: bool) -> tuple[Tensor, Tensor]:
    """``softmax(q kᵀ / sqrt(d) + mask) v`` written out, returning the weights too: what
    :func:`F.scaled_dot_product_attention` computes (``mask``: bool, True where a key takes part).
    ``q`` ``[B, H, T, d]``, ``k``/``v`` ``[B, H, S, d]`` -> (``[B, H, T, d]``, weights ``[B, H, T, S]``)."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    dropped = fast_dropout(weights, dropout, training) if dropout > 0 else weights
    return torch.matmul(dropped, v), weights


class MultiheadAttention(nn.Module):
    """Multi-head attention with separate query, key and value projections (so that the keys
    and values of the encoder can be computed once per sentence)."""

    def __init__(self, dim: int, heads: int, dropout: float, self_attention: bool) -> None:
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.self_attention = self_attention
        if self_attention:  # one product for q, k and v of the same input
            self.in_proj = Linear(dim, 3 * dim)
        else:
            self.q_proj = Linear(dim, dim)
            self.kv_proj = Linear(dim, 2 * dim)
        self.out_proj = Linear(dim, dim)

    @torch.no_grad()
    def init_xavier_(self) -> None:
        """fairseq's initialisation of attention: the query, key and value projections each
        Xavier-uniform as a ``d x d`` matrix with gain 1/sqrt(2) (bound sqrt(1.5 / d)), whether
        they are stored fused or not; the output projection stays plain Xavier (``init_xavier_``)."""
        bound = math.sqrt(1.5 / self.out_proj.in_features)
        for proj in (self.in_proj,) if self.self_attention else (self.q_proj, self.kv_proj):
            nn.init.uniform_(proj.weight, -bound, bound)

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Cross-attention keys and values of ``memory`` ``[B, S, D]`` -> two ``[B, H, S, d]``, in
        :func:`attention_dtype` (read at every decoder step: cast once here)."""
        kv = self.kv_proj(memory)
        k, v = kv.to(attention_dtype(kv)).chunk(2, dim=-1)
        return split_heads(k, self.heads), split_heads(v, self.heads)

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        q, k, v = self.in_proj(x).chunk(3, dim=-1)
        return split_heads(q, self.heads), split_heads(k, self.heads), split_heads(v, self.heads)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], causal: bool = False,
               need_weights: bool = False) -> tuple[Tensor, Optional[Tensor]]:
        """Heads ``q`` ``[B, H, T, d]`` over ``k``/``v`` ``[B, H, S, d]`` -> (output ``[B, T, D]``,
        weights ``[B, H, T, S]`` when ``need_weights``)."""
        p, t, s = (self.dropout if self.training else 0.0), q.size(2), k.size(2)
        if causal and (need_weights or mask is not None or t != s):  # else the kernel's own causal mask
            tri = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(s - t)  # query i sees keys up to s - t + i
            mask, causal = (tri if mask is None else mask & tri), False
        if need_weights:
            out, weights = attend_with_weights(q, k, v, mask, p, self.training)
            return self.out_proj(merge_heads(out)), weights
        out = fused_attention(q, k, v, mask, p, causal)
        return self.out_proj(merge_heads(out)), None


def attention_dtype(x: Tensor) -> torch.dtype:
    """The precision :func:`fused_attention` computes in for operands like ``x``: float32 for
    bf16 or float16 on CPU, ``x``'s own otherwise.  Keys and values kept across steps (the
    encoder's, the decoder's cache) are stored in it, so that they are cast once, not at every
    step."""
    low = x.dtype in (torch.bfloat16, torch.float16)
    return torch.float32 if low and x.device.type == "cpu" else x.dtype


def fused_attention(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], dropout_p: float, is_causal: bool) -> Tensor:
    """``scaled_dot_product_attention``, in float32 on CPU whatever the autocast precision.

    Why: torch's CPU flash-attention kernels are slower in bf16 than in float32, the backward
    several times so (the figures are in the CHANGELOG and bench/RESULTS.md), while the products
    around them gain from bf16.  The result is cast back, so the layers after see the autocast
    precision (``q``'s)."""
    if attention_dtype(q) == q.dtype:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)
    with torch.autocast("cpu", enabled=False):
        out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask, dropout_p=dropout_p,
                                             is_causal=is_causal)
    return out.to(q.dtype)
