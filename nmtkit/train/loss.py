"""Token-level cross-entropy with optional label smoothing, summed (callers normalize)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from nmtkit.data.dictionary import PAD_ID


def sequence_loss(logits: Tensor, target: Tensor, label_smoothing: float = 0.0) -> tuple[Tensor, Tensor]:
    """Return (training loss summed over real tokens, NLL summed over real tokens).

    The NLL (without smoothing) is what perplexity is computed from, so validation numbers
    stay comparable whatever smoothing was used in training.
    """
    lprobs = F.log_softmax(logits.float(), dim=-1).view(-1, logits.size(-1))
    flat = target.reshape(-1)
    mask = flat != PAD_ID
    nll = -lprobs.gather(1, flat.unsqueeze(1)).squeeze(1)
    nll = torch.where(mask, nll, torch.zeros_like(nll))
    nll_sum = nll.sum()
    if label_smoothing <= 0:
        return nll_sum, nll_sum
    smooth = -lprobs.mean(dim=-1)
    smooth = torch.where(mask, smooth, torch.zeros_like(smooth))
    loss = (1.0 - label_smoothing) * nll_sum + label_smoothing * smooth.sum()
    return loss, nll_sum
