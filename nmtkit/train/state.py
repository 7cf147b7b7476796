"""What a checkpoint needs for an exact resume besides weights and optimizer state: the
position in the run (:class:`TrainState`) and every random generator's state."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch


@dataclass
class TrainState:
    """What resuming needs besides weights and optimizer state."""

    epoch: int = 1  # the epoch in progress (or next to start)
    batches_done: int = 0  # batches of ``epoch`` already trained on
    update: int = 0
    best_valid_loss: Optional[float] = None
    best_valid_bleu: Optional[float] = None
    bad_epochs: int = 0  # epochs without improvement of the best-checkpoint metric (early stopping)
    epoch_nll: float = 0.0  # training NLL summed over the current epoch so far
    epoch_tokens: float = 0.0
    finished_epochs: list[dict] = field(default_factory=list)  # validation history
    #: wall seconds of training (validation included) spent by every run of this save dir, so that
    #: a resumed run stops (and anneals) with the rest of the --stop-time-hours budget
    budget_wall_s: float = 0.0

    @property
    def epochs_done(self) -> int:
        return self.epoch - 1


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def rng_state() -> dict:
    """All RNG states as plain lists and tensors (loadable with ``weights_only=True``)."""
    py = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": [py[0], list(py[1]), py[2]],
        "numpy": [name, torch.from_numpy(np.asarray(keys, dtype=np.int64)), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
