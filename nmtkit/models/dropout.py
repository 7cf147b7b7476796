"""Dropout whose mask comes from 16-bit integers rather than torch's Bernoulli sampler, on CPU.

Why: on CPU, ``torch.nn.functional.dropout`` draws its mask with ``bernoulli_`` one element at a
time, several times slower than the rest of dropout.  A small Transformer's dropout touches every
residual stream, and a recurrent model draws masks at every decoder step (``bench/profile_train.py``
shows the share); every model of nmtkit drops out through this module.  One 64-bit draw of the
same generator gives four uniform 16-bit integers, and comparing them with a threshold gives the
mask: four elements per draw, then two vectorised passes.

The drop rate is ``p`` rounded to a multiple of 2^-16 (an error below 2^-17), and the kept values
are scaled by the exact inverse of the realised keep rate, so the expectation of every output is
its input, as with ``F.dropout``.  The random stream is torch's default generator, so a seeded run
repeats, and a checkpoint's saved generator state resumes it exactly.  Other devices use
``F.dropout`` (fused there).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_LEVELS = 1 << 16


class _MaskedScale(torch.autograd.Function):
    """``x * keep * scale``, saving only the boolean mask for the backward pass."""

    @staticmethod
    def forward(ctx, x: Tensor, keep: Tensor, scale: float) -> Tensor:  # noqa: ANN001
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return x.mul(keep).mul_(scale)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:  # noqa: ANN001
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None, None


def keep_mask(shape: torch.Size, p: float, device: torch.device) -> tuple[Tensor, float]:
    """(boolean mask of ``shape``, 1 / realised keep rate): each element kept with probability
    ``1 - round(p * 2^16) / 2^16``, from torch's default generator."""
    n = math.prod(shape)
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(-(1 << 63), None)  # every bit uniform
    drop = round(p * _LEVELS)
    keep = words.view(torch.int16)[:n] >= drop - _LEVELS // 2  # int16 spans [-2^15, 2^15)
    return keep.view(shape), _LEVELS / (_LEVELS - drop)


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """``F.dropout(x, p, training)`` in distribution (module docstring)."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or round(p * _LEVELS) >= _LEVELS:
        return F.dropout(x, p, training=True)
    keep, scale = keep_mask(x.shape, p, x.device)
    return _MaskedScale.apply(x, keep, scale)


class Dropout(nn.Module):
    """``nn.Dropout`` through :func:`dropout`."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
