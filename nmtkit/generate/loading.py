"""Load ``a.pt:b.pt`` checkpoint lists as one :class:`EnsembleModel`.

Why a shared loader: translate, score and align all accept an ensemble as a colon-separated
``--path``; parsing it, checking every file exists and reporting a bad one by name should
happen the same way everywhere.
"""
from __future__ import annotations

import os
from typing import Any, Optional

import torch

from nmtkit.errors import InputError, NmtkitError
from nmtkit.generate.ensemble import EnsembleModel


def split_checkpoint_paths(paths: str) -> list[str]:
    """``"a.pt:b.pt"`` -> ``["a.pt", "b.pt"]``; every file must exist."""
    items = [p for p in paths.split(":") if p]
    if not items:
        raise NmtkitError("--path needs at least one checkpoint file")
    for p in items:
        if not os.path.isfile(p):
            raise InputError(p, None, "no such checkpoint file")
    return items


def load_ensemble(paths: str, device: Optional[torch.device] = None) -> tuple[EnsembleModel, list[dict[str, Any]]]:
    """Load every checkpoint of ``paths`` (colon-separated) onto ``device`` as one ensemble.

    Returns the ensemble (eval mode) and the checkpoint dictionaries in the same order
    (the first one's text pipelines are the ensemble's: members share dictionaries).
    """
    from nmtkit.checkpoint import load_model

    items = split_checkpoint_paths(paths)
    loaded = [load_model(p, device) for p in items]
    model = EnsembleModel([m for m, _ in loaded], names=items)
    ckpts = [c for _, c in loaded]
    for name, ckpt in zip(items[1:], ckpts[1:]):
        for side in ("src_pipeline", "tgt_pipeline"):
            if ckpt.get(side) != ckpts[0].get(side):
                which = "source" if side == "src_pipeline" else "target"
                raise NmtkitError(f"cannot ensemble {items[0]} and {name}: their {which} text pipelines "
                                  "(tokenizer, lowercasing or BPE codes) differ")
    return model, ckpts
