"""Resuming a run from ``checkpoint_last.pt``: the policy for changed options and applying it.

The command line of a resumed run is compared with the training options saved in the
checkpoint (docs/guide/training.md, "Resuming").  An option missing from an older checkpoint counts as its
default.  Options in none of the tables below are applied to the resumed run and announced,
one line each (``max_epoch 5 -> 8 (from --max-epoch)``); a new ``--lr`` replaces the current
(possibly decayed) lr.  The tables hold the exceptions; a new option that must not change
mid-run goes into one of them.
"""
from __future__ import annotations

from dataclasses import MISSING, asdict, fields
from pathlib import Path
from typing import Any, Optional


from nmtkit.checkpoint import load_checkpoint, load_weights
from nmtkit.errors import NmtkitError
from nmtkit.train.ema import WeightAverage
from nmtkit.train.optim import DEFAULT_LR
from nmtkit.train.options import TrainOptions, flag_of
from nmtkit.train.run import TrainingRun
from nmtkit.train.state import TrainState, set_rng_state
from nmtkit.utils.tempfiles import remove_stale_temps

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


def option_defaults() -> dict[str, Any]:
    """Every training option's default: what an option missing from an older checkpoint was."""
    out: dict[str, Any] = {}
    for f in fields(TrainOptions):
        if f.default is not MISSING:
            out[f.name] = f.default
        elif f.default_factory is not MISSING:  # type: ignore[misc]
            out[f.name] = f.default_factory()  # type: ignore[misc]
    return out


def effective_lr(options: dict[str, Any]) -> float:
    """The starting lr of ``options``: ``--lr``, or the optimizer's default when it is unset."""
    lr = options.get("lr")
    return float(DEFAULT_LR.get(str(options.get("optimizer")), 0.0) if lr is None else lr)


def fmt(value: Any) -> str:
    """An option's value as the resume messages show it (``unset`` for None)."""
    if value is None:
        return "unset"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def flag(name: str) -> str:
    """The command-line flag of option ``name``."""
    declared = flag_of(name) if name in TrainOptions.__dataclass_fields__ else None
    return (declared.name if declared is not None else "") or "--" + name.replace("_", "-")


# ------------------------------------------------------------------ applying the policy


def resume_if_possible(run: TrainingRun, reset_optimizer: bool = False, reset_lr_scheduler: bool = False,
                       reset_dataloader: bool = False) -> Optional[str]:
    """Load ``checkpoint_last.pt`` into ``run`` when it exists; returns a message saying what
    resumed and every option that changed.  Call it holding the save dir's lock
    (:mod:`nmtkit.train.lock`).

    Changes to :data:`RESUME_MUST_NOT_CHANGE`, to the training data, and to batching in the
    middle of an epoch are refused in one error listing every difference.  The resets start a
    part fresh on purpose: ``reset_optimizer`` a new optimizer (state and lr from the options),
    ``reset_lr_scheduler`` the schedule's state with the lr back at ``--lr`` (or the optimizer's
    default), ``reset_dataloader`` the current epoch again from its first batch (no sentence of
    it is skipped; the ones done are seen twice) and allows another seed, train subset or
    training data.

    Leftovers of a killed run are cleared first: temporary checkpoint files; the records of
    train_log.jsonl written after checkpoint_last.pt (updates this run will redo) are marked
    superseded, never deleted (:mod:`nmtkit.train.run_log`).
    """
    last = run.save_dir / "checkpoint_last.pt"
    if run.dist.is_main:
        for path in remove_stale_temps(run.save_dir):
            run.console.print(f"removed {path} (a temporary file left by a killed run)")
    run.run_log.check()  # refused before anything else: a link, a line nmtkit did not write
    if not last.exists():  # (a link, dangling or not, was refused by the trainer, which replaces these files)
        _refuse_another_runs_checkpoints(run.save_dir)
        marked = run.run_log.supersede(0, None)  # a run starting over redoes every update of an old log
        if marked:
            run.console.print(f"starting over: {marked}")
        return None
    ckpt = load_checkpoint(last, mmap=False)
    _check_same_model(run, ckpt, last)
    try:
        ts = ckpt["train_state"]
        state = TrainState(**ts["state"])
    except (KeyError, TypeError) as exc:
        raise NmtkitError(f"{last}: not a resumable training checkpoint (its training state is missing or malformed: "
                          f"{type(exc).__name__} {exc})") from None
    resets = {name for name, on in (("--reset-optimizer", reset_optimizer), ("--reset-lr-scheduler", reset_lr_scheduler),
                                    ("--reset-dataloader", reset_dataloader)) if on}
    old = {**option_defaults(), **(ckpt.get("train_options") or {})}
    notes, refused = resume_differences(run, ckpt, old, state, resets)
    if refused:
        raise NmtkitError(f"{last} cannot continue with changed options: {'; '.join(refused)}. "
                          "Rerun with the checkpoint's options, start that part fresh with the flag named, or use another --save-dir")
    notes += _restore_weights(run, ckpt, ts, state.update, last)
    notes += _restore_optimizer_and_lr(run, ts, old, reset_optimizer, reset_lr_scheduler)
    if old.get("best_checkpoint_metric") != run.opt.best_checkpoint_metric:
        # the schedule's best value and the patience count were kept in the old metric's units
        run.schedule.best_valid, run.schedule.bad_epochs, state.bad_epochs = None, 0, 0
        notes.append(f"best-checkpoint metric changed: the plateau schedule and --patience start counting afresh "
                     f"in {run.opt.best_checkpoint_metric}")
    notes += _restart_best_if_validation_changed(run, ckpt, old, state)
    if reset_dataloader and state.batches_done > 0:
        notes.append(f"epoch {state.epoch} starts again from its first batch ({state.batches_done} were done; --reset-dataloader)")
        state.batches_done = 0
        state.epoch_nll = state.epoch_tokens = 0.0
    run.state = state
    run.last_checkpoint_update = state.update
    set_rng_state(ts["rng"])
    marked = run.run_log.supersede(ts.get("log_records"), state.update)
    if marked:
        notes.append(marked)
    lr = run.optimizer.param_groups[0]["lr"]
    head = (f"resuming from {last}: epoch {state.epoch} ({state.batches_done} batches done), "
            f"update {state.update}, lr {lr:g}")
    return "\n".join([head, *(f"  {n}" for n in notes)])


def _restore_weights(run: TrainingRun, ckpt: dict, ts: dict, update: int, path: Path) -> list[str]:
    """The weights training goes on from, and the --ema-decay average; returns the notes.  A
    checkpoint written with --ema-decay holds the average as its weights and the raw ones in its
    training state (nmtkit.train.ema)."""
    saved_ema = ts.get("ema")
    load_weights(run.model, saved_ema["raw_model"] if saved_ema else ckpt["model"], path, ckpt.get("model_name", "?"))
    if run.ema is None:
        return ["--ema-decay 0: the weight average ends here; training goes on from the raw weights"] if saved_ema else []
    if saved_ema:
        run.ema.load(ckpt["model"], saved_ema["updates"])
        return []
    run.ema = WeightAverage(run.model, run.ema.decay)  # from the weights just loaded
    return [f"--ema-decay {run.ema.decay:g}: the weight average starts at update {update}"]


def _check_same_model(run: TrainingRun, ckpt: dict, last: Path) -> None:
    """Refuse a checkpoint of another model, other dictionaries, or without training state."""
    saved_cfg = _completed_config(ckpt.get("model_name"), ckpt.get("model_config") or {})
    if ckpt.get("model_name") != run.model_name or saved_cfg != asdict(run.cfg):
        diffs = _config_diff(ckpt.get("model_name"), saved_cfg, run.model_name, asdict(run.cfg))
        raise NmtkitError(
            f"{last} was trained with different model options ({diffs}); use another --save-dir or the same options"
        )
    if ckpt["src_dict"] != run.data.src_dict.symbols or ckpt["tgt_dict"] != run.data.tgt_dict.symbols:
        raise NmtkitError(f"{last} was trained with other dictionaries than {run.data.path}")
    if ckpt.get("train_state") is None:
        raise NmtkitError(f"{last} holds no training state (cannot resume)")


def _refuse_another_runs_checkpoints(save_dir: Path) -> None:
    """A save dir with checkpoints but no ``checkpoint_last.pt`` (which every save writes first)
    holds another run, or one whose last checkpoint was removed: starting over would replace its
    ``checkpoint_best.pt`` and leave its other epoch files beside the new ones, where
    ``nmtkit-average --last N`` would pick them up."""
    found = sorted(p.name for p in save_dir.glob("checkpoint*.pt"))
    if found:
        shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        raise NmtkitError(f"{save_dir} holds checkpoints ({shown}) but no checkpoint_last.pt to resume from; "
                          "a new run would overwrite them: use another --save-dir or remove them")


def _restore_optimizer_and_lr(run: TrainingRun, ts: dict, old: dict[str, Any], reset_optimizer: bool,
                              reset_lr_scheduler: bool) -> list[str]:
    """Load (or reset) the optimizer, loss scaler and lr schedule; set the lr; returns the notes."""
    opt, optimizer, notes = run.opt, run.optimizer, []
    if reset_optimizer:
        notes.append(f"optimizer: fresh {opt.optimizer} state (--reset-optimizer)")
    else:
        optimizer.load_state_dict(ts["optimizer"])
        if run.scaler is not None and ts.get("scaler"):
            run.scaler.load_state_dict(ts["scaler"])
    if reset_lr_scheduler:
        notes.append(f"lr schedule: fresh {opt.lr_schedule} state (--reset-lr-scheduler)")
    else:
        run.schedule.load_state_dict(ts["schedule"])
    old_lr, new_lr = effective_lr(old), effective_lr(asdict(opt))
    current = optimizer.param_groups[0]["lr"]
    if reset_optimizer or reset_lr_scheduler or new_lr != old_lr:
        for group in optimizer.param_groups:
            group["lr"] = new_lr
    if new_lr != old_lr:
        source = "from --lr" if opt.lr is not None else f"the {opt.optimizer} default"
        decayed = f"; the schedule had brought it to {current:g}" if current != old_lr and not reset_optimizer else ""
        notes.append(f"lr {old_lr:g} -> {new_lr:g} ({source}{decayed})")
    elif (reset_optimizer or reset_lr_scheduler) and current != new_lr:
        notes.append(f"lr {current:g} -> {new_lr:g} (back to the starting lr)")
    if opt.lr_schedule == "anneal":
        notes.append(f"lr schedule anneal: each update's lr follows the share of the budget used, from {new_lr:g} "
                     f"down to {opt.min_lr:g} over its last {opt.anneal_fraction:g}")
    return notes


def _data_moved(run: TrainingRun, ckpt: dict) -> bool:
    """Whether this run reads another data directory than the checkpoint's run did."""
    return bool(ckpt.get("data_dir")) and ckpt["data_dir"] != str(run.data.path.resolve())


def _restart_best_if_validation_changed(run: TrainingRun, ckpt: dict, old: dict[str, Any], state: TrainState) -> list[str]:
    """Scores on another validation set (another split or data directory, another BLEU beam or
    sentence count) cannot be compared with the old best: the best scores, and what follows the
    best-checkpoint metric (the plateau schedule, --patience), start afresh."""
    opt = run.opt
    split_changed = _data_moved(run, ckpt) or old.get("valid_subset") != opt.valid_subset
    bleu_changed = split_changed or any(old.get(n) != getattr(opt, n) for n in ("eval_bleu_beam", "eval_bleu_max_sentences"))
    if not bleu_changed or run.valid_set is None or (state.best_valid_loss is None and state.best_valid_bleu is None):
        return []  # (without validation now, the validated best stays: nothing is compared with it)
    what = ["the best BLEU"]
    state.best_valid_bleu = None
    if split_changed:
        state.best_valid_loss = None
        what = ["the best loss and BLEU"]
    if split_changed or opt.best_checkpoint_metric == "bleu":
        run.schedule.best_valid, run.schedule.bad_epochs, state.bad_epochs = None, 0, 0
        what.append("the plateau schedule and --patience")
    return [f"validation differs from the checkpoint's: {' and '.join(what)} start afresh "
            "(checkpoint_best.pt is replaced at the next validation)"]


def resume_differences(run: TrainingRun, ckpt: dict, old: dict[str, Any], state: TrainState,
                       resets: set[str]) -> tuple[list[str], list[str]]:
    """(announcements, refusals): the checkpoint's training options against this run's."""
    new = asdict(run.opt)
    notes: list[str] = []
    refused: list[str] = []
    # Any batch done means the epoch is not closed (closing it sets batches_done to 0): with all
    # of its batches done, the other batching would still train the epoch's tail once more.
    mid_epoch = state.batches_done > 0 and "--reset-dataloader" not in resets
    for name, value in new.items():
        if name in RESUME_NOT_COMPARED or name == "lr" or old.get(name) == value:
            continue
        change = f"{name} {fmt(old.get(name))} -> {fmt(value)}"
        if name in RESUME_MUST_NOT_CHANGE:
            reset_flag = RESUME_MUST_NOT_CHANGE[name]
            if reset_flag in resets:
                notes.append(f"{change} ({reset_flag})")
            else:
                refused.append(f"{change} (needs {reset_flag})")
        elif name in RESUME_EPOCH_BOUNDARY and mid_epoch:
            refused.append(f"{change} in the middle of epoch {state.epoch} ({state.batches_done} batches done: "
                           "finish the epoch with the old batching, or --reset-dataloader)")
        else:
            notes.append(f"{change} (from {flag(name)})")
    before, now = ckpt.get("train_data"), run.train_data_fingerprint()
    if before is not None and before != now:
        change = (f"training data {before.get('sentences')} sentences / {before.get('tokens')} tokens -> "
                  f"{now['sentences']} / {now['tokens']}")
        if "--reset-dataloader" in resets:
            notes.append(f"{change} (--reset-dataloader)")
        else:
            refused.append(f"{change} (needs --reset-dataloader)")
    elif _data_moved(run, ckpt):
        notes.append(f"data {ckpt['data_dir']} -> {run.data.path.resolve()} (same dictionaries"
                     f"{', same training data' if before is not None else ''})")
    return notes, refused


def _completed_config(model_name: Optional[str], saved: dict) -> dict:
    """A checkpoint's model options with the defaults of options added since it was written
    (an older checkpoint lacks them), so that resuming it with the same command works.  This is
    right as long as a new option's default is the behaviour from before it existed, which is
    the rule for adding model options."""
    from nmtkit.models import registry

    try:
        return asdict(registry.config_from_dict(model_name, saved)) if model_name else saved
    except NmtkitError:  # unknown model or option: compared as saved, the error lists the differences
        return saved


def _config_diff(name_a: Optional[str], cfg_a: dict, name_b: Optional[str], cfg_b: dict) -> str:
    """The model differences between a checkpoint (``a``) and this run (``b``), for the error."""
    parts = []
    if name_a != name_b:
        parts.append(f"model {name_a} vs {name_b}")
    for k in sorted(set(cfg_a) | set(cfg_b)):
        if cfg_a.get(k) != cfg_b.get(k):
            parts.append(f"{k}: checkpoint {cfg_a.get(k)!r}, now {cfg_b.get(k)!r}")
    return "; ".join(parts) or "no differences"


def nothing_left(opt: TrainOptions, state: TrainState) -> Optional[str]:
    """Why a resumed run has nothing to train (--max-epoch, --max-update, --stop-time-hours or
    --patience already reached), or None.  Said instead of rewriting the same checkpoint with no update."""
    if opt.max_epoch > 0 and state.epochs_done >= opt.max_epoch:  # the epoch loop would not run at all
        where = (f"at the end of epoch {state.epochs_done}" if state.batches_done == 0 else
                 f"inside epoch {state.epoch}, after {state.batches_done} batches")
        return (f"already reached --max-epoch {opt.max_epoch} (checkpoint_last.pt is {where}); "
                "raise --max-epoch to train further")
    if opt.max_update > 0 and state.update >= opt.max_update:
        return (f"already reached --max-update {opt.max_update} (checkpoint_last.pt is at update {state.update}); "
                "raise --max-update to train further")
    if opt.stop_time_hours > 0 and state.budget_wall_s >= opt.stop_time_hours * 3600:
        return (f"already reached --stop-time-hours {opt.stop_time_hours:g} (the runs of this save dir trained "
                f"{state.budget_wall_s / 3600:.3g} h in all); raise --stop-time-hours to train further")
    if opt.patience > 0 and state.bad_epochs >= opt.patience and state.batches_done == 0:
        return (f"already stopped early: validation {opt.best_checkpoint_metric} did not improve for "
                f"{state.bad_epochs} epochs (--patience {opt.patience}); raise --patience to train further")
    return None
