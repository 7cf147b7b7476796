"""What a search returns: finished hypotheses.

Both executors (:mod:`.eager`, and :mod:`.fixed_shape` for CUDA graphs) build these through
:func:`nmtkit.generate.search.rules.finished`, so they live apart from either.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from torch import Tensor


@dataclass
class Hypothesis:
    """One finished translation.

    ``tokens``: output ids **without** the final ``</s>``.  ``positional_scores``: float
    tensor ``[len(tokens) + 1]``, the model log-probability of each output token and of
    ``</s>``.  ``attention``: ``[len(tokens) + 1, src_len]`` (rows: output tokens then the
    ``</s>`` step; columns: the real source positions including the source ``</s>``, padding
    cut off) or ``None`` when no model has attention.  ``length``: ``len(tokens) + 1``, the
    length the penalty uses.  ``score``: the length-normalized score used for ranking.
    All tensors are on the CPU.
    """

    tokens: list[int]
    score: float
    positional_scores: Tensor
    attention: Optional[Tensor]
    length: int

    @property
    def log_prob(self) -> float:
        """Total model log-probability of the output including ``</s>``."""
        return float(self.positional_scores.sum())
