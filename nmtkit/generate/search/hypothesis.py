"""What a search returns: finished hypotheses and the length penalty that ranks them.

Both searches (:mod:`nmtkit.generate.beam`, eager, and :mod:`nmtkit.generate.static_search`, in
fixed shapes for CUDA graphs) build these, so they live apart from either.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from torch import Tensor

from nmtkit.errors import NmtkitError
from nmtkit.generate.search_options import LENPEN_FORMS
from nmtkit.utils.checks import one_of_message


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


def length_penalty(length: int, lenpen: float, form: str) -> float:
    """The divisor applied to a cumulative log-probability of ``length`` steps."""
    if form == "fairseq":
        return float(length) ** lenpen
    if form == "gnmt":
        return ((5.0 + length) / 6.0) ** lenpen
    raise NmtkitError(one_of_message("--lenpen-form", form, LENPEN_FORMS))
