"""Attention mechanisms of the two papers.

:class:`LuongAttention` (Luong, Pham & Manning 2015, section 3): a query ``h_t`` (the top
decoder state) scores source annotations ``h_s`` with one of

* ``dot``       ``h_t . h_s``
* ``general``   ``h_t . (W_a h_s)``
* ``concat``    ``v_a . tanh(W_a [h_t; h_s])`` computed as ``v_a . tanh(W_q h_t + W_k h_s)``
* ``location``  ``(W_a h_t)_s``: a distribution over a fixed number of source positions
  (``max_source_positions``); positions at or beyond it get zero weight, so a longer source
  is attended only over its first ``max_source_positions`` tokens (at least one real
  position always exists, so the weights never become NaN).

and normalises them over

* ``global``    all real source positions;
* ``local-m``   the window ``[p_t - D, p_t + D]`` with ``p_t = t`` (the 0-based target step)
  clamped to the last real position;
* ``local-p``   the same window around ``p_t = L * sigmoid(v_p . tanh(W_p h_t))`` (``L`` the
  real source length, ``</s>`` included), and the softmax weights are multiplied by
  ``exp(-(s - p_t)^2 / (2 sigma^2))`` with ``sigma = D / 2`` (the paper's eq. 10).  As in the
  paper the result is *not* renormalised, so local-p weights sum to at most 1; the Gaussian is
  what lets gradients reach ``W_p`` and ``v_p``.

Windows are cut at the sentence edges; positions outside the window or in the padding get
weight exactly 0.  Source positions are in the original (unreversed) order.

Keys that depend only on the source (``W_a h_s`` for ``general``, ``W_k h_s`` for
``concat``) are computed once per sentence by :meth:`LuongAttention.precompute_keys`.

:class:`AdditiveAttention` (Bahdanau, Cho & Bengio 2015, appendix A.1.2):
``e_j = v_a . tanh(W_a s_{i-1} + U_a h_j)``, softmax over real positions.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from nmtkit.models.gemm import Linear, LoopWeight, tanh

ATTENTION_TYPES = ("none", "global", "local-m", "local-p")
SCORE_FUNCTIONS = ("dot", "general", "concat", "location")


def masked_softmax(scores: Tensor, valid: Tensor) -> Tensor:
    """Softmax over the last dim where ``valid``; invalid entries are exactly 0.

    Callers guarantee every row has a valid entry (every sentence has its ``</s>``)."""
    return scores.masked_fill(~valid, float("-inf")).softmax(dim=-1)


class LuongAttention(nn.Module):
    """Global or local attention with one of the four score functions (see module doc)."""

    def __init__(
        self,
        hidden_size: int,
        attention: str = "global",
        score: str = "general",
        window: int = 10,
        max_source_positions: int = 100,
        key_size: Optional[int] = None,
    ) -> None:
        """``key_size``: the size of a source annotation (default ``hidden_size``, the query's)."""
        super().__init__()
        if attention not in ("global", "local-m", "local-p"):
            raise ValueError(f"attention type must be global, local-m or local-p, got {attention!r}")
        if score not in SCORE_FUNCTIONS:
            raise ValueError(f"score must be one of {SCORE_FUNCTIONS}, got {score!r}")
        if attention != "global" and window < 1:
            raise ValueError(f"local attention needs window >= 1, got {window}")
        self.attention = attention
        self.score = score
        self.window = window
        self.max_source_positions = max_source_positions
        h = hidden_size
        k = key_size or h
        if score == "dot" and k != h:
            raise ValueError(f"the dot score needs annotations of the query's size, got {k} and {h}")
        if score == "general":
            self.W_a = Linear(k, h, bias=False)
        elif score == "concat":
            self.W_q = Linear(h, h, bias=False)
            self.W_k = Linear(k, h, bias=False)
            self.v_a = Linear(h, 1, bias=False)
        elif score == "location":
            self.W_loc = Linear(h, max_source_positions, bias=False)
        if attention == "local-p":
            self.W_p = Linear(h, h, bias=False)
            self.v_p = Linear(h, 1, bias=False)

    def precompute_keys(self, states: Tensor) -> Optional[Tensor]:
        """``[B, S, H]`` annotations -> per-sentence keys, or None when the score needs none."""
        if self.score == "general":
            return self.W_a(states)
        if self.score == "concat":
            return self.W_k(states)
        return None

    def loop_products(self, states: Tensor, keys: Optional[Tensor]) -> tuple[Optional[LoopWeight], LoopWeight]:
        """For a step loop over one batch (the teacher-forced decoder): the score product
        ``q K^T`` (dot, general) and the context product ``a H`` as :class:`LoopWeight` s, whose
        gradients with respect to the keys and states are summed over the steps in one product."""
        score = None
        if self.score in ("dot", "general"):
            score = LoopWeight(states if self.score == "dot" else (self.W_a(states) if keys is None else keys))
        return score, LoopWeight(states.transpose(1, 2))

    def scores(self, query: Tensor, states: Tensor, keys: Optional[Tensor],
               score_product: Optional[LoopWeight] = None) -> Tensor:
        """``[B, T, H]`` queries against ``[B, S, H]`` states -> raw scores ``[B, T, S]``."""
        if score_product is not None:
            return score_product(query)
        if self.score == "dot":
            return torch.bmm(query, states.transpose(1, 2))
        if self.score == "general":
            keys = self.W_a(states) if keys is None else keys
            return torch.bmm(query, keys.transpose(1, 2))
        if self.score == "concat":
            keys = self.W_k(states) if keys is None else keys
            hidden = tanh(self.W_q(query).unsqueeze(2) + keys.unsqueeze(1))  # [B,T,S,H]
            return self.v_a(hidden).squeeze(-1)
        # location: one score per absolute position, independent of the annotations
        src_len = states.size(1)
        loc = self.W_loc(query)  # [B, T, P]
        if src_len <= self.max_source_positions:
            return loc[..., :src_len]
        return nn.functional.pad(loc, (0, src_len - self.max_source_positions))

    def window_centers(self, query: Tensor, mask: Tensor, steps: Optional[Tensor]) -> Tensor:
        """Aligned positions ``p_t`` ``[B, T]`` (float) for local attention.

        ``steps`` ``[B, T]``: the 0-based target step of each query (used by local-m)."""
        lengths = mask.sum(dim=1, keepdim=True).to(query.dtype)  # [B, 1]
        if self.attention == "local-m":
            if steps is None:
                raise ValueError("local-m attention needs the target step of each query")
            return torch.minimum(steps.to(query.dtype), lengths - 1)
        gate = torch.sigmoid(self.v_p(tanh(self.W_p(query)))).squeeze(-1)  # [B, T]
        return lengths * gate

    def forward(
        self,
        query: Tensor,
        states: Tensor,
        mask: Tensor,
        keys: Optional[Tensor] = None,
        steps: Optional[Tensor] = None,
        products: Optional[tuple[Optional[LoopWeight], LoopWeight]] = None,
        values: Optional[Tensor] = None,
    ) -> tuple[Tensor, Tensor]:
        """Attend: query ``[B, T, H]``, states ``[B, S, H]``, mask ``[B, S]`` (True = real),
        keys from :meth:`precompute_keys`, steps ``[B, T]`` (local-m), a step loop's
        :meth:`loop_products` -> (context ``[B, T, H]``, weights ``[B, T, S]``).  ``values``
        ``[B, S, V]``: what the weights average instead of the states (a linear map of them,
        made once per sentence), giving a context ``[B, T, V]``."""
        bsz, tgt_len, _ = query.shape
        src_len = states.size(1)
        score_product, context_product = products if products is not None else (None, None)
        scores = self.scores(query, states, keys, score_product)
        valid = mask[:, None, :].expand(bsz, tgt_len, src_len)
        positions = torch.arange(src_len, device=query.device)
        if self.score == "location" and src_len > self.max_source_positions:
            valid = valid & (positions < self.max_source_positions)
        gauss = None
        if self.attention != "global":
            centers = self.window_centers(query, mask, steps)  # [B, T]
            dist = positions.to(query.dtype)[None, None, :] - centers.unsqueeze(-1)  # [B, T, S]
            valid = valid & (dist.abs() <= self.window)
            if self.attention == "local-p":
                sigma = self.window / 2.0
                gauss = torch.exp(-dist.pow(2) / (2.0 * sigma * sigma))
        weights = masked_softmax(scores, valid)
        if gauss is not None:
            weights = weights * gauss
        if values is not None:
            return torch.bmm(weights, values), weights
        context = torch.bmm(weights, states) if context_product is None else context_product(weights)
        return context, weights


class AdditiveAttention(nn.Module):
    """Bahdanau et al.'s alignment model, scored from the previous decoder state."""

    def __init__(self, query_size: int, key_size: int, attention_dim: int) -> None:
        super().__init__()
        self.W_a = Linear(query_size, attention_dim, bias=False)
        self.U_a = Linear(key_size, attention_dim, bias=False)
        self.v_a = Linear(attention_dim, 1, bias=False)

    def precompute_keys(self, states: Tensor) -> Tensor:
        """``U_a h_j`` for every annotation, once per sentence: ``[B, S, A]``."""
        return self.U_a(states)

    def forward(self, query: Tensor, states: Tensor, mask: Tensor, keys: Tensor,
                context_product: Optional[LoopWeight] = None) -> tuple[Tensor, Tensor]:
        """query ``[B, Q]``, annotations ``[B, S, K]``, mask ``[B, S]``, keys ``[B, S, A]`` ->
        (context ``[B, K]``, weights ``[B, S]``).  A query ``[B, G, Q]`` (G queries per
        sentence: beam hypotheses, or every target step at once) gives context ``[B, G, K]`` and
        weights ``[B, G, S]``.  A step loop passes ``LoopWeight(states.transpose(1, 2))`` as
        ``context_product`` (see :meth:`LuongAttention.loop_products`)."""
        grouped = query.dim() == 3
        q = query if grouped else query.unsqueeze(1)
        energy = self.v_a(tanh(self.W_a(q).unsqueeze(2) + keys.unsqueeze(1))).squeeze(-1)  # [B, G, S]
        weights = masked_softmax(energy, mask.unsqueeze(1))
        context = torch.bmm(weights, states) if context_product is None else context_product(weights)
        return (context, weights) if grouped else (context.squeeze(1), weights.squeeze(1))

