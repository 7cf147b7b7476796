"""The resume policy: which training options a resumed run may change (applied and announced),
which it may not (refused, naming the ``--reset-*`` flag), and how differences are worded.
See README "Resuming"."""
from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from nmtkit.train.optim import DEFAULT_LR
from nmtkit.train.options import TrainOptions

# Resume policy (README "Resuming"): the command line of a resumed run is compared with the
# training options saved in checkpoint_last.pt.  An option missing from an older checkpoint
# counts as its default.  New options go into one of these tables; an option in none of them
# is treated as RESUME_MAY_CHANGE.

#: Applied to the resumed run and announced, one line each (``lr 0.001 -> 0.0005 (from --lr)``).
RESUME_MAY_CHANGE = frozenset({
    "lr", "max_epoch", "max_update", "stop_time_hours", "patience", "validate_interval_updates",
    "save_interval_updates", "keep_epoch_checkpoints", "keep_last", "log_interval", "valid_subset",
    "device", "amp", "threads", "no_progress", "clip_norm", "label_smoothing", "halve_after", "lr_shrink",
    "plateau_patience", "min_lr", "update_freq", "loss_norm", "eval_bleu", "eval_bleu_beam",
    "eval_bleu_max_sentences", "best_checkpoint_metric", "guided_alignment_weight", "guided_alignment_loss",
    "max_nonfinite_updates",
})
#: Refused (every difference in one error): another run, not a continuation of this one.  Each
#: names the ``--reset-*`` flag that starts that part fresh on purpose.
RESUME_MUST_NOT_CHANGE = {
    "optimizer": "--reset-optimizer",  # its state (Adam moments, ...) does not fit another optimizer
    "lr_schedule": "--reset-lr-scheduler",
    "seed": "--reset-dataloader",  # the batches of an epoch are a function of (seed, epoch)
    "train_subset": "--reset-dataloader",
}
#: Batching: may change at an epoch boundary (announced); refused in the middle of an epoch,
#: whose remaining batches would be cut differently (sentences skipped or seen twice).
RESUME_EPOCH_BOUNDARY = ("max_tokens", "batch_size")
#: Not compared here: the model's options and dictionaries are checked on their own, the training
#: data by its fingerprint, and the save dir is where the checkpoint was found.
RESUME_NOT_COMPARED = ("data", "save_dir", "arch")
#: Flags whose name is not ``--`` + the option's name.
FLAG_NAMES = {"keep_epoch_checkpoints": "--no-epoch-checkpoints"}
#: train_log.jsonl events that record the history of runs rather than work of an update: kept
#: when a resumed run drops the records of updates it redoes.
LOG_HISTORY_EVENTS = ("start", "end", "interrupted", "early_stop", "diverged")


def option_defaults() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(TrainOptions):
        if f.default is not MISSING:
            out[f.name] = f.default
        elif f.default_factory is not MISSING:  # type: ignore[misc]
            out[f.name] = f.default_factory()  # type: ignore[misc]
    return out


def effective_lr(options: dict[str, Any]) -> float:
    lr = options.get("lr")
    return float(DEFAULT_LR.get(options.get("optimizer"), 0.0) if lr is None else lr)


def fmt(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def flag(name: str) -> str:
    return FLAG_NAMES.get(name, "--" + name.replace("_", "-"))
