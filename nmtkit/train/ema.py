"""An exponential moving average of the weights (``nmtkit-train --ema-decay``).

Why: the average of the weights over the last few thousand updates translates better than the
weights of any one update, and it can be had at no cost in training updates (Marian's
``--exponential-smoothing``, OpenNMT-py's ``average_decay``, fairseq's ``--ema-decay``).
Validation, ``--eval-bleu`` and every checkpoint's ``model`` use the average, so
checkpoint_best.pt is chosen by and holds what nmtkit-translate will load; the raw weights,
which training goes on from, travel in the checkpoint's training state for an exact resume.

The decay is warmed up as ``min(decay, (1 + n) / (10 + n))`` after ``n`` updates, so the early
average is not dominated by the random initialisation.
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import ContextManager, Iterator, Optional, Sequence

import torch
from torch import nn

from nmtkit.train.stop_signals import StopNow


class WeightAverage:
    """Float32 shadow copies of a model's parameters, averaged after every update."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f"the EMA decay must be in (0, 1), got {decay}")
        self.decay = decay
        self.updates = 0
        self.shadow = {name: p.detach().float().clone() for name, p in model.named_parameters()}

    def rate(self) -> float:
        """The decay used by the next update (warmed up over the first updates)."""
        n = self.updates + 1
        return min(self.decay, (1.0 + n) / (10.0 + n))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """shadow = d * shadow + (1 - d) * weights, after an optimizer step."""
        d = self.rate()
        self.updates += 1
        for name, p in model.named_parameters():
            self.shadow[name].lerp_(p.detach().float(), 1.0 - d)

    @contextmanager
    def swapped_in(self, model: nn.Module) -> Iterator[None]:
        """Run the block with the averaged weights in ``model``; the raw ones come back after."""
        names = [name for name, _ in model.named_parameters()]
        params = [p for _, p in model.named_parameters()]
        raw = [p.detach().clone() for p in params]  # a signal while cloning changes nothing yet
        try:
            # One call per swap: a signal's handler (StopNow, in validation) runs between Python
            # instructions, so it lands before or after a swap, never with some weights swapped.
            _copy_all(params, [self.shadow[name] for name in names])
            yield
        finally:
            pending: Optional[BaseException] = None
            while True:  # a second signal before the restore: restore anyway, then raise it
                try:
                    _copy_all(params, raw)
                    break
                except (StopNow, KeyboardInterrupt) as exc:
                    pending = exc
            if pending is not None:
                raise pending

    def load(self, averaged: dict[str, torch.Tensor], updates: int) -> None:
        """Restore the average from a checkpoint's ``model`` weights (which hold it) on resume."""
        for name in self.shadow:
            self.shadow[name] = averaged[name].detach().float().clone().to(self.shadow[name].device)
        self.updates = updates


def _copy_all(targets: Sequence[torch.Tensor], sources: Sequence[torch.Tensor]) -> None:
    """``t.copy_(s)`` for every pair, in one call."""
    with torch.no_grad():
        torch._foreach_copy_(list(targets), list(sources))


def averaged(ema: Optional[WeightAverage], model: nn.Module) -> ContextManager[None]:
    """The block runs on the averaged weights with --ema-decay, on the model's own without."""
    return ema.swapped_in(model) if ema is not None else nullcontext()
