"""What a training checkpoint holds, and which epoch checkpoints are kept.

Why apart from :mod:`nmtkit.checkpoint`: that module is shared with generation and knows only
the model; this one adds what an exact resume needs (:mod:`nmtkit.train.resume` reads it back):
the training options, the training data's fingerprint, the position in the run, optimizer,
schedule, loss-scaler and RNG states, and how many train_log.jsonl records that state wrote.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from nmtkit.checkpoint import epoch_checkpoints, model_payload
from nmtkit.train.state import rng_state

#: The :class:`nmtkit.train.trainer.Trainer` whose state is read (not imported: the trainer imports
#: this module, and a type-only import back would still be a cycle in the house's layout).
Trainer = Any


def training_payload(trainer: Trainer) -> dict:
    """Everything :func:`nmtkit.checkpoint.save_checkpoint` writes for ``trainer``'s current state."""
    data = trainer.data
    payload = model_payload(trainer.model, trainer.opt.arch, data.pipeline(data.src_lang), data.pipeline(data.tgt_lang))
    ema = trainer.ema
    if ema is not None:  # the checkpoint's weights are the average; the raw ones go on training
        with ema.swapped_in(trainer.model):
            averaged = {k: v.detach().cpu().clone() for k, v in trainer.model.state_dict().items()}
        raw, payload["model"] = payload["model"], averaged
    payload["data_dir"] = str(data.path.resolve())
    payload["train_options"] = asdict(trainer.opt)
    payload["train_data"] = trainer.train_data_fingerprint()
    payload["train_state"] = {
        "log_records": trainer.run_log.count(),  # how much of train_log.jsonl this state has written
        "state": asdict(trainer.state),
        "optimizer": trainer.optimizer.state_dict(),
        "schedule": trainer.schedule.state_dict(),
        "scaler": trainer.scaler.state_dict() if trainer.scaler is not None else None,
        "rng": rng_state(),
        "ema": {"updates": ema.updates, "decay": ema.decay, "raw_model": raw} if ema is not None else None,
    }
    return payload


def inference_payload(payload: dict) -> dict:
    """A training payload without what only resuming reads (the training state: optimizer,
    schedule, RNG and raw EMA weights): what ``checkpoint_best.pt`` and ``checkpoint{epoch}.pt``
    hold.  Translate, score, align and ``nmtkit-average`` need only the model; resuming reads
    ``checkpoint_last.pt``, which keeps everything.  The training options stay (they are small and
    say how the weights were trained)."""
    return {k: v for k, v in payload.items() if k != "train_state"}


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def saved_sizes(save_dir: Path, written: dict[str, int]) -> str:
    """``wrote checkpoint_last.pt 45.1 MB, checkpoint3.pt 15.0 MB; ckpt holds 120.3 MB``: what a
    save wrote and what the save dir's checkpoints take in all (pruned by --keep-last)."""
    total = sum(p.stat().st_size for p in Path(save_dir).glob("checkpoint*.pt") if p.is_file())
    files = ", ".join(f"{name} {_mb(size)}" for name, size in written.items())
    return f"wrote {files}; {save_dir} holds {_mb(total)} of checkpoints"


def prune_epoch_checkpoints(save_dir: Path, keep_last: int) -> None:
    """``--keep-last N``: delete ``checkpoint{epoch}.pt`` files older than the last N (0: keep all)."""
    if keep_last <= 0:
        return
    for path in epoch_checkpoints(save_dir)[:-keep_last]:
        path.unlink(missing_ok=True)
