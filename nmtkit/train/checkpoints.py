"""What a training checkpoint holds, and which epoch checkpoints are kept.

Why apart from :mod:`nmtkit.checkpoint`: that module is shared with generation and knows only
the model; this one adds what an exact resume needs (:mod:`nmtkit.train.resume` reads it back):
the training options, the training data's fingerprint, the position in the run, optimizer,
schedule, loss-scaler and RNG states, and how many train_log.jsonl records that state wrote.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import NoReturn

from nmtkit.checkpoint import epoch_checkpoints, model_payload, save_checkpoint
from nmtkit.train.divergence import Diverged, weights_problem
from nmtkit.train.run import TrainingRun
from nmtkit.train.state import rng_state


def save(run: TrainingRun, names: list[str], budget_wall_s: float) -> bool:
    """Write the checkpoints ``names`` of ``run``'s current state (``budget_wall_s``: the
    --stop-time-hours seconds spent so far, which checkpoint_last.pt keeps); False when held
    back because the latest updates were non-finite (:mod:`nmtkit.train.divergence`: the files
    keep the last good state)."""
    update = run.state.update
    problem = weights_problem(run.model.state_dict().items())  # on every rank: the same weights
    if problem:
        diverged(run, f"{problem} after update {update}")
    if run.guard.streak:
        if run.dist.is_main:
            run.console.print(f"[yellow]warning:[/yellow] not writing {', '.join(names)}: {run.guard.describe(update)}")
        return False
    if not run.dist.is_main:
        return True
    run.state.budget_wall_s = budget_wall_s
    payload = training_payload(run)
    weights_only = inference_payload(payload)
    run.written = {}
    for name in names:
        # only checkpoint_last.pt is resumed from: the best and epoch ones leave out the
        # optimizer state (two thirds of an Adam checkpoint) and the rest of the training state
        save_checkpoint(run.save_dir / name, payload if name == "checkpoint_last.pt" else weights_only)
        run.written[name] = (run.save_dir / name).stat().st_size
    run.saved_at = (run.state.epoch, run.state.batches_done, update)
    if "checkpoint_last.pt" in names:
        run.last_checkpoint_update = update
    return True


def end_of_epoch_names(run: TrainingRun, epoch: int, improved: bool, validated: bool) -> list[str]:
    """What the end of ``epoch`` writes: checkpoint_last.pt, checkpoint{epoch}.pt with
    ``--keep-epoch-checkpoints``, and checkpoint_best.pt when the epoch improved on the best;
    without validation the newest is the best, unless a validated best exists (a resumed run)."""
    st = run.state
    names = ["checkpoint_last.pt"]
    if run.opt.keep_epoch_checkpoints:
        names.append(f"checkpoint{epoch}.pt")
    if improved or (not validated and st.best_valid_loss is None and st.best_valid_bleu is None):
        names.append("checkpoint_best.pt")
    return names


def diverged(run: TrainingRun, reason: str) -> NoReturn:
    """Stop training (exit 1), logging why and saying which checkpoint is kept."""
    run.log({"event": "diverged", "update": run.state.update, "reason": reason})
    last = run.save_dir / "checkpoint_last.pt"
    kept = ("no checkpoint was written" if run.last_checkpoint_update is None
            else f"{last} (update {run.last_checkpoint_update}) is kept")
    raise Diverged(f"training diverged: {reason}; {kept}; try a lower --lr or --clip-norm")


def training_payload(run: TrainingRun) -> dict:
    """Everything :func:`nmtkit.checkpoint.save_checkpoint` writes for ``run``'s current state."""
    data = run.data
    payload = model_payload(run.model, run.opt.arch, data.pipeline(data.src_lang), data.pipeline(data.tgt_lang))
    ema = run.ema
    if ema is not None:  # the checkpoint's weights are the average; the raw ones go on training
        with ema.swapped_in(run.model):
            averaged = {k: v.detach().cpu().clone() for k, v in run.model.state_dict().items()}
        raw, payload["model"] = payload["model"], averaged
    payload["data_dir"] = str(data.path.resolve())
    payload["train_options"] = asdict(run.opt)
    payload["train_data"] = run.train_data_fingerprint()
    payload["train_state"] = {
        "log_records": run.run_log.count(),  # how much of train_log.jsonl this state has written
        "state": asdict(run.state),
        "optimizer": run.optimizer.state_dict(),
        "schedule": run.schedule.state_dict(),
        "scaler": run.scaler.state_dict() if run.scaler is not None else None,
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
