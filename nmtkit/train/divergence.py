"""Divergence: a run of non-finite updates stops training instead of being skipped silently.

Why: with too high a learning rate the weights blow up, every later loss is NaN, and the
optimizer step is skipped for each, so a run used to finish "successfully" with useless
weights and checkpoints.  fairseq stops on a non-finite gradient norm (fp16: on its loss-scale
floor); Marian has ``--throw-on-divergence``.  nmtkit's policy (docs/guide/errors.md, "Diverging training"):

- an update is *non-finite* when its training loss or its gradient norm is NaN or infinite.  Its
  optimizer step is skipped, so the weights stay those of the last finite update.  With fp16
  loss scaling, non-finite gradients are GradScaler's normal overflow signal (it halves the
  scale and retries): they count only once the scale is down to 1 or less, where the scale
  cannot be what overflows.  The loss (computed in float32) always counts.
- more than ``--max-nonfinite-updates`` such updates in a row stop training with one error line
  (exit 1).  A run that ends by --max-update or --max-epoch in the middle of such a run of
  updates is an error too; one stopped by a signal keeps the last good checkpoint, says that it
  is not writing a newer one, and exits 130 like any interrupted run.
- while the updates are non-finite, no checkpoint is written: a checkpoint always holds a state
  whose last update was finite, so the checkpoint files on disk are the last good ones.
- weights that are not finite are never written (training stops).  Huge but finite weights are
  not a criterion: no threshold fits every model, and such weights make the next loss
  non-finite (overflowing logits), which is caught above.
"""
from __future__ import annotations

import math
from typing import Iterable, Optional

import torch

from nmtkit.errors import NmtkitError


class Diverged(NmtkitError):
    """Training stopped because its updates or weights became non-finite (exit status 1)."""


def nonfinite_update(loss: float, gnorm: float, loss_scale: Optional[float] = None) -> bool:
    """Whether an update signals divergence (see the module docstring for the fp16 rule).

    ``loss``: the summed training loss of the update; ``gnorm``: its gradient norm after
    unscaling; ``loss_scale``: GradScaler's scale used for it (None without fp16 scaling)."""
    if not math.isfinite(loss):
        return True
    if math.isfinite(gnorm):
        return False
    return loss_scale is None or loss_scale <= 1.0


class DivergenceGuard:
    """Counts consecutive non-finite updates against ``limit`` (``--max-nonfinite-updates``).

    The count is not saved in checkpoints: none is written while it is above 0."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.streak = 0  # consecutive non-finite updates up to the latest one
        self.last: tuple[float, float] = (0.0, 0.0)  # (loss, gradient norm) of the latest non-finite update

    def after_update(self, update: int, loss: float, gnorm: float, loss_scale: Optional[float] = None) -> Optional[str]:
        """Count update number ``update``; the reason to stop once the limit is passed, else None."""
        if not nonfinite_update(loss, gnorm, loss_scale):
            self.streak = 0
            return None
        self.streak += 1
        self.last = (loss, gnorm)
        if self.streak > self.limit:
            return self.describe(update, f"; --max-nonfinite-updates {self.limit}")
        return None

    def describe(self, update: int, note: str = "") -> str:
        """``11 consecutive updates (3-13) with a non-finite loss or gradient norm (last: loss nan, ...)``,
        ``note`` added inside the parentheses."""
        first = update - self.streak + 1
        which = f"update {update}" if self.streak == 1 else f"{self.streak} consecutive updates ({first}-{update})"
        loss, gnorm = self.last
        return f"{which} with a non-finite loss or gradient norm (last: loss {loss:g}, gradient norm {gnorm:g}{note})"


def weights_problem(named_weights: Iterable[tuple[str, torch.Tensor]]) -> Optional[str]:
    """``weights not finite (a, b, c and 2 more)``, or None when every weight is finite."""
    bad = [name for name, t in named_weights if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if not bad:
        return None
    return "weights not finite (" + ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "") + ")"
