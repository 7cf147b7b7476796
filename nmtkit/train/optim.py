"""Optimizers and learning-rate schedules of the two papers (and Adam).

* ``sgd`` with Luong et al.'s schedule: lr 1.0, halved after every epoch once epoch K is done
  (``--lr-schedule halving --halve-after K``).
* ``adadelta`` (rho 0.95, eps 1e-6) as in Bahdanau et al.
* ``adam`` for everything else.
* ``--lr-schedule plateau`` halves (``--lr-shrink``) when validation loss stops improving.
* ``--lr-schedule anneal`` holds the lr, then lowers it linearly to ``--min-lr`` over the last
  ``--anneal-fraction`` of the run's budget (``--stop-time-hours``, ``--max-update`` or
  ``--max-epoch``, whichever runs out first), so a run with a fixed budget ends annealed.  A
  weight average (``--ema-decay``) keeps the validation loss falling, so ``plateau`` may never
  shrink the lr of a short run; this schedule does not depend on it.
* ``--lr-schedule inverse_sqrt`` (Vaswani et al. 2017, section 5.3, in fairseq's form): the lr
  rises linearly from 0 to ``--lr`` over ``--warmup-updates`` updates, then falls as
  ``lr * sqrt(warmup / update)``.  It is set before every update from the update count, so it
  resumes exactly.  The Transformer presets train with it and Adam's β = (0.9, 0.98).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

import torch

from nmtkit.errors import NmtkitError

OPTIMIZERS = ("sgd", "adadelta", "adam")
SCHEDULES = ("fixed", "halving", "plateau", "anneal", "inverse_sqrt")
DEFAULT_LR = {"sgd": 1.0, "adadelta": 1.0, "adam": 1e-3}


def build_optimizer(name: str, params: Iterable[torch.nn.Parameter], lr: Optional[float],
                    betas: tuple[float, float] = (0.9, 0.999)) -> torch.optim.Optimizer:
    """``betas``: Adam's (β1, β2); the other optimizers have none."""
    lr = DEFAULT_LR[name] if lr is None else lr
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if name == "adadelta":
        return torch.optim.Adadelta(params, lr=lr, rho=0.95, eps=1e-6)
    if name == "adam":
        params = list(params)
        # one fused kernel over each tensor instead of about ten elementwise passes (CPU and CUDA;
        # torch's own implementation, the same update)
        fused = all(p.device.type in ("cpu", "cuda") and p.dtype in (torch.float32, torch.float64) for p in params)
        return torch.optim.Adam(params, lr=lr, betas=betas, fused=fused or None)
    raise NmtkitError(f"unknown optimizer {name!r} (choose {', '.join(OPTIMIZERS)})")


def normalize_and_clip(params: Iterable[torch.nn.Parameter], denominator: float, max_norm: float) -> float:
    """Divide the gradients by ``denominator`` and clip their total L2 norm to ``max_norm``, as
    ``p.grad.div_(denominator)`` followed by ``clip_grad_norm_``, in one pass over the gradients
    instead of two; returns the norm after the division (what ``clip_grad_norm_`` returns)."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return 0.0
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))) / denominator
    scale = (max_norm / (norm + 1e-6)).clamp(max=1.0) / denominator
    torch._foreach_mul_(grads, scale)
    return float(norm)


@dataclass
class LRSchedule:
    """Learning-rate control after every epoch (halving, plateau) or before every update
    (anneal); its state is saved in every checkpoint."""

    kind: str = "fixed"
    halve_after: int = 5  # halving: halve after every epoch > K
    shrink: float = 0.5
    plateau_patience: int = 0
    min_lr: float = 0.0
    anneal_fraction: float = 0.2  # anneal: the final share of the budget over which the lr falls
    base_lr: Optional[float] = None  # anneal: the lr it starts from; inverse_sqrt: the peak (--lr)
    warmup_updates: int = 4000  # inverse_sqrt: updates of the linear warm-up
    best_valid: Optional[float] = None
    bad_epochs: int = 0

    def __post_init__(self) -> None:
        if self.kind not in SCHEDULES:
            raise NmtkitError(f"unknown --lr-schedule {self.kind!r} (choose {', '.join(SCHEDULES)})")
        if not 0.0 < self.anneal_fraction <= 1.0:
            raise NmtkitError(f"--anneal-fraction must be in (0, 1], got {self.anneal_fraction}")
        if self.kind in ("anneal", "inverse_sqrt") and self.base_lr is None:
            raise NmtkitError(f"--lr-schedule {self.kind} needs the lr it starts from (base_lr)")
        if self.kind == "inverse_sqrt" and self.warmup_updates < 1:
            raise NmtkitError(f"--warmup-updates must be at least 1 for --lr-schedule inverse_sqrt, got {self.warmup_updates}")

    def before_update(self, optimizer: torch.optim.Optimizer, progress: float, update: int = 0) -> None:
        """Set the lr of the next update: ``anneal`` from the share of the budget used so far
        (``progress``), ``inverse_sqrt`` from the number of updates already done (``update``)."""
        if self.kind == "inverse_sqrt":
            assert self.base_lr is not None
            step = update + 1
            lr = self.base_lr * min(step / self.warmup_updates, (self.warmup_updates / step) ** 0.5)
        elif self.kind == "anneal":
            assert self.base_lr is not None
            into = min(max((progress - (1.0 - self.anneal_fraction)) / self.anneal_fraction, 0.0), 1.0)
            lr = max(self.min_lr, self.base_lr + (self.min_lr - self.base_lr) * into)
        else:
            return
        for group in optimizer.param_groups:
            group["lr"] = lr

    def end_of_epoch(self, optimizer: torch.optim.Optimizer, epoch: int, valid_loss: Optional[float]) -> float:
        """Apply the schedule after ``epoch`` finished; returns the lr for the next epoch."""
        factor = 1.0
        if self.kind == "halving" and epoch >= self.halve_after:
            factor = self.shrink
        elif self.kind == "plateau" and valid_loss is not None:
            if self.best_valid is None or valid_loss < self.best_valid:
                self.best_valid, self.bad_epochs = valid_loss, 0
            else:
                self.bad_epochs += 1
                if self.bad_epochs > self.plateau_patience:
                    factor, self.bad_epochs = self.shrink, 0
        for group in optimizer.param_groups:
            group["lr"] = max(self.min_lr, group["lr"] * factor)
        return optimizer.param_groups[0]["lr"]

    def state_dict(self) -> dict:
        return {"best_valid": self.best_valid, "bad_epochs": self.bad_epochs}

    def load_state_dict(self, state: dict) -> None:
        self.best_valid = state.get("best_valid")
        self.bad_epochs = state.get("bad_epochs", 0)
