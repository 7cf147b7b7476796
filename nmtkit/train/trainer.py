"""The training loop: batches, updates, validation, checkpoints, resume, early stopping.

Exact resume: the batches of an epoch are a pure function of ``(seed, epoch)``; a checkpoint
stores the epoch, how many of its batches were done, the optimizer and schedule state and
the Python/NumPy/torch RNG states.  Rerunning the same command continues from there and, on
CPU, reproduces an uninterrupted run bit for bit.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import signal
import time
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn, Optional

import numpy as np
import torch

from nmtkit.data.dataset import DataDir, PaddingCounter, ParallelDataset, collate, make_batches
from nmtkit.data.dictionary import PAD_ID
from nmtkit.errors import NmtkitError
from nmtkit.train import distributed as distmod
from nmtkit.train.divergence import DivergenceGuard, Diverged, weights_problem
from nmtkit.checkpoint import epoch_checkpoints, load_checkpoint, model_payload, save_checkpoint
from nmtkit.train.guided import gold_alignment_matrix, guided_alignment_loss
from nmtkit.train.loss import sequence_loss
from nmtkit.train.optim import LRSchedule, build_optimizer
from nmtkit.utils.amp import autocast, resolve_amp
from nmtkit.utils.memory import allocation_guard, model_size_hint
from nmtkit.utils.tempfiles import remove_stale_temps
from nmtkit.train.display import TrainDisplay
from nmtkit.train.options import TrainOptions
from nmtkit.train.resume_policy import (
    LOG_HISTORY_EVENTS,
    RESUME_EPOCH_BOUNDARY,
    RESUME_MUST_NOT_CHANGE,
    RESUME_NOT_COMPARED,
    effective_lr,
    flag,
    fmt,
    option_defaults,
)
from nmtkit.train.state import TrainState, rng_state, seed_everything, set_rng_state
from nmtkit.train.trainlog import append_record
from nmtkit.utils.textio import atomic_write, ensure_dir


class StopTraining(Exception):
    pass


class _StopNow(Exception):
    """Raised by the signal handler inside an interruptible phase (validation)."""


def _interruptible(method):  # noqa: ANN001, ANN201
    """Marks a phase that changes no training state (validation, BLEU): a SIGINT/SIGTERM ends it
    at once instead of after minutes on a large valid set; the run then writes
    checkpoint_last.pt as of the last update and stops."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if self._stop_signal is not None:
            raise _StopNow
        outer = self._interruptible_depth
        self._interruptible_depth = outer + 1
        try:
            return method(self, *args, **kwargs)
        finally:
            self._interruptible_depth = outer

    return wrapper


class Trainer:
    """Owns the model, optimizer, schedule and data of one training run."""

    def __init__(self, opt: TrainOptions, model_overrides: dict[str, Any], console, dist: distmod.DistInfo) -> None:  # noqa: ANN001
        from nmtkit.utils.device import parse_device
        from nmtkit.models import registry

        self.opt = opt
        self.console = console
        self.dist = dist
        self.save_dir = Path(opt.save_dir)
        self.data = DataDir(opt.data)
        self.train_set = self.data.load_split(opt.train_subset)
        valid_split = self.data.validation_split(opt.valid_subset)  # an unknown name is an error
        self.valid_set: Optional[ParallelDataset] = self.data.load_split(valid_split) if valid_split else None
        if opt.max_tokens is None and opt.batch_size is None:
            raise NmtkitError("give --max-tokens or --batch-size")
        self.device = parse_device(opt.device)
        if self.device.type == "cuda" and dist.enabled:
            self.device = torch.device("cuda", dist.local_rank)
        if opt.threads > 0:
            torch.set_num_threads(opt.threads)
        self.model_name, self.cfg = registry.resolve_config(opt.arch, model_overrides)
        seed_everything(opt.seed)
        with allocation_guard(f"building {opt.arch} on {self.device} ({model_size_hint(self.cfg)})"):
            self.model = registry.build_model(self.model_name, self.cfg, self.data.src_dict, self.data.tgt_dict).to(self.device)
        self._check_guided_alignment()
        self.optimizer = build_optimizer(opt.optimizer, self.model.parameters(), opt.lr)
        self.schedule = LRSchedule(opt.lr_schedule, opt.halve_after, opt.lr_shrink, opt.plateau_patience, opt.min_lr)
        self.state = TrainState()
        self.amp_dtype = resolve_amp(self.opt.amp, self.device)
        self.scaler = torch.amp.GradScaler("cuda") if self.amp_dtype == torch.float16 else None
        self.ddp_model: torch.nn.Module = self.model
        if dist.enabled:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            self.ddp_model = DistributedDataParallel(self.model, device_ids=ids)
        self._stop_signal: Optional[int] = None
        self._interruptible_depth = 0  # > 0 inside validation: a signal stops at once
        self._saved_at: Optional[tuple[int, int, int]] = None  # (epoch, batches_done, update) of the last save
        self._last_checkpoint_update: Optional[int] = None  # the update checkpoint_last.pt holds (None: no file)
        self.guard = DivergenceGuard(opt.max_nonfinite_updates)
        self.log_path = self.save_dir / "train_log.jsonl"
        self._log_records: Optional[int] = None  # lines in train_log.jsonl, counted on first use
        self._train_fingerprint: Optional[dict] = None

    # -- setup ------------------------------------------------------------------------------
    def _check_guided_alignment(self) -> None:
        """``--guided-alignment-weight`` needs stored links and attention: refuse it at once otherwise;
        an alignment head learns only from it."""
        if self.opt.guided_alignment_weight <= 0:
            if getattr(self.cfg, "alignment_head", False):
                raise NmtkitError("--alignment-head is trained only by the guided-alignment loss: "
                                  "give --guided-alignment-weight (and data preprocessed with --alignfile)")
            return
        if self.train_set.alignments is None:
            raise NmtkitError(f"--guided-alignment-weight: {self.data.path} has no alignments for split "
                              f"{self.opt.train_subset!r} (run nmtkit-preprocess with --alignfile)")
        if not self.model.has_attention:
            raise NmtkitError(f"--guided-alignment-weight: {self.opt.arch} ({self.model_name}) has no attention to guide")

    def resume_if_possible(self, reset_optimizer: bool = False, reset_lr_scheduler: bool = False,
                           reset_dataloader: bool = False) -> Optional[str]:
        """Load ``checkpoint_last.pt`` when it exists; returns a message saying what resumed and
        every option that changed.  Call it holding the save dir's lock (:mod:`nmtkit.train.lock`).

        Policy: options in :data:`RESUME_MAY_CHANGE` (and any unclassified one) are applied and
        announced; a new ``--lr`` replaces the current (possibly decayed) lr and later schedule
        steps start from it.  Changes to :data:`RESUME_MUST_NOT_CHANGE`, to the training data, and
        to batching in the middle of an epoch are refused in one error listing every difference.
        The resets start a part fresh on purpose: ``reset_optimizer`` a new optimizer (state and
        lr from the options), ``reset_lr_scheduler`` the schedule's state with the lr back at
        ``--lr`` (or the optimizer's default), ``reset_dataloader`` the current epoch again from
        its first batch (no sentence of it is skipped; the ones done are seen twice) and allows
        another seed, train subset or training data.

        Leftovers of a killed run are cleared first: temporary checkpoint files, and the records of
        train_log.jsonl written after checkpoint_last.pt (updates this run will redo).
        """
        last = self.save_dir / "checkpoint_last.pt"
        if self.dist.is_main:
            for path in remove_stale_temps(self.save_dir):
                self.console.print(f"removed {path} (a temporary file left by a killed run)")
        if not last.exists():
            self._prune_log(0, None)  # a run starting over redoes every update of an old log
            return None
        ckpt = load_checkpoint(last)
        saved_cfg = _completed_config(ckpt.get("model_name"), ckpt.get("model_config") or {})
        if ckpt.get("model_name") != self.model_name or saved_cfg != asdict(self.cfg):
            diffs = _config_diff(ckpt.get("model_name"), saved_cfg, self.model_name, asdict(self.cfg))
            raise NmtkitError(
                f"{last} was trained with different model options ({diffs}); use another --save-dir or the same options"
            )
        if ckpt["src_dict"] != self.data.src_dict.symbols or ckpt["tgt_dict"] != self.data.tgt_dict.symbols:
            raise NmtkitError(f"{last} was trained with other dictionaries than {self.data.path}")
        if ckpt.get("train_state") is None:
            raise NmtkitError(f"{last} holds no training state (cannot resume)")
        ts = ckpt["train_state"]
        state = TrainState(**ts["state"])
        resets = {name for name, on in (("--reset-optimizer", reset_optimizer), ("--reset-lr-scheduler", reset_lr_scheduler),
                                        ("--reset-dataloader", reset_dataloader)) if on}
        old = {**option_defaults(), **(ckpt.get("train_options") or {})}
        notes, refused = self._resume_differences(ckpt, old, state, resets)
        if refused:
            raise NmtkitError(f"{last} cannot continue with changed options: {'; '.join(refused)}. "
                              "Rerun with the checkpoint's options, start that part fresh with the flag named, or use another --save-dir")
        self.model.load_state_dict(ckpt["model"])
        if reset_optimizer:
            notes.append(f"optimizer: fresh {self.opt.optimizer} state (--reset-optimizer)")
        else:
            self.optimizer.load_state_dict(ts["optimizer"])
            if self.scaler is not None and ts.get("scaler"):
                self.scaler.load_state_dict(ts["scaler"])
        if reset_lr_scheduler:
            notes.append(f"lr schedule: fresh {self.opt.lr_schedule} state (--reset-lr-scheduler)")
        else:
            self.schedule.load_state_dict(ts["schedule"])
        old_lr, new_lr = effective_lr(old), effective_lr(asdict(self.opt))
        current = self.optimizer.param_groups[0]["lr"]
        if reset_optimizer or reset_lr_scheduler or new_lr != old_lr:
            for group in self.optimizer.param_groups:
                group["lr"] = new_lr
        if new_lr != old_lr:
            source = "from --lr" if self.opt.lr is not None else f"the {self.opt.optimizer} default"
            decayed = f"; the schedule had brought it to {current:g}" if current != old_lr and not reset_optimizer else ""
            notes.append(f"lr {old_lr:g} -> {new_lr:g} ({source}{decayed})")
        elif (reset_optimizer or reset_lr_scheduler) and current != new_lr:
            notes.append(f"lr {current:g} -> {new_lr:g} (back to the starting lr)")
        if old.get("best_checkpoint_metric") != self.opt.best_checkpoint_metric:
            # the schedule's best value and the patience count were kept in the old metric's units
            self.schedule.best_valid, self.schedule.bad_epochs, state.bad_epochs = None, 0, 0
            notes.append(f"best-checkpoint metric changed: the plateau schedule and --patience start counting afresh "
                         f"in {self.opt.best_checkpoint_metric}")
        if reset_dataloader and state.batches_done > 0:
            notes.append(f"epoch {state.epoch} starts again from its first batch ({state.batches_done} were done; --reset-dataloader)")
            state.batches_done = 0
            state.epoch_nll = state.epoch_tokens = 0.0
        self.state = state
        self._last_checkpoint_update = state.update
        set_rng_state(ts["rng"])
        dropped = self._prune_log(ts.get("log_records"), state.update)
        if dropped:
            notes.append(f"dropped {dropped} record(s) of {self.log_path.name} written after the checkpoint (updates redone now)")
        lr = self.optimizer.param_groups[0]["lr"]
        head = (f"resuming from {last}: epoch {self.state.epoch} ({self.state.batches_done} batches done), "
                f"update {self.state.update}, lr {lr:g}")
        return "\n".join([head, *(f"  {n}" for n in notes)])

    def _resume_differences(self, ckpt: dict, old: dict[str, Any], state: TrainState, resets: set[str]) -> tuple[list[str], list[str]]:
        """(announcements, refusals): the checkpoint's training options against this run's."""
        new = asdict(self.opt)
        notes: list[str] = []
        refused: list[str] = []
        mid_epoch = 0 < state.batches_done < self._epoch_batch_count(old, state.epoch) and "--reset-dataloader" not in resets
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
        before, now = ckpt.get("train_data"), self.train_data_fingerprint()
        if before is not None and before != now:
            change = (f"training data {before.get('sentences')} sentences / {before.get('tokens')} tokens -> "
                      f"{now['sentences']} / {now['tokens']}")
            if "--reset-dataloader" in resets:
                notes.append(f"{change} (--reset-dataloader)")
            else:
                refused.append(f"{change} (needs --reset-dataloader)")
        elif ckpt.get("data_dir") and ckpt["data_dir"] != str(self.data.path.resolve()):
            notes.append(f"data {ckpt['data_dir']} -> {self.data.path.resolve()} (same dictionaries"
                         f"{', same training data' if before is not None else ''})")
        return notes, refused

    def _epoch_batch_count(self, options: dict[str, Any], epoch: int) -> int:
        """How many batches ``epoch`` has under the batching ``options`` (those of the checkpoint)."""
        return len(make_batches(self.train_set.src_sizes, self.train_set.tgt_sizes, options.get("max_tokens"),
                                options.get("batch_size"), seed=options.get("seed", self.opt.seed), epoch=epoch))

    def train_data_fingerprint(self) -> dict:
        """Sentence and token counts and a hash of the sentence lengths of the training split:
        cheap, and different for any other corpus in practice (saved in every checkpoint)."""
        if self._train_fingerprint is None:
            src, tgt = np.asarray(self.train_set.src_sizes, dtype=np.int64), np.asarray(self.train_set.tgt_sizes, dtype=np.int64)
            digest = hashlib.sha1(src.tobytes() + tgt.tobytes()).hexdigest()[:16]
            self._train_fingerprint = {"sentences": int(len(src)), "tokens": int(src.sum() + tgt.sum()), "sizes_sha1": digest}
        return self._train_fingerprint

    def _prune_log(self, kept_records: Optional[int], update: Optional[int]) -> int:
        """Drop the records of train_log.jsonl that describe updates the resumed run will redo.

        After ``kill -9`` the log holds records written after checkpoint_last.pt; the resumed run
        writes them again.  Checkpoints store how many records the log had (``kept_records``):
        later ones are dropped, except the run-history events (:data:`LOG_HISTORY_EVENTS`).  For
        a checkpoint without that count, records with an update beyond the checkpoint's go.  A
        record torn by the kill (no final newline) always goes.  Returns how many were dropped.
        """
        if not self.dist.is_main or not self.log_path.is_file():
            return 0
        parts = self.log_path.read_bytes().split(b"\n")
        complete, torn = parts[:-1], parts[-1]
        keep: list[bytes] = []
        for i, line in enumerate(complete):
            if kept_records is not None and i < kept_records:
                keep.append(line)
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if not isinstance(rec, dict):
                continue
            redone = kept_records is not None or (update is not None and (rec.get("update") or 0) > update)
            if rec.get("event") in LOG_HISTORY_EVENTS or not redone:
                keep.append(line)
        dropped = len(complete) - len(keep) + (1 if torn.strip() else 0)
        if dropped:
            with atomic_write(self.log_path, "wb") as fh:
                fh.write(b"".join(line + b"\n" for line in keep))
        self._log_records = len(keep)
        return dropped

    # -- checkpoints ------------------------------------------------------------------------
    def _payload(self) -> dict:
        payload = model_payload(self.model, self.opt.arch, self.data.pipeline(self.data.src_lang), self.data.pipeline(self.data.tgt_lang))
        payload["data_dir"] = str(self.data.path.resolve())
        payload["train_options"] = asdict(self.opt)
        payload["train_data"] = self.train_data_fingerprint()
        payload["train_state"] = {
            "log_records": self._log_count(),  # how much of train_log.jsonl this state has written
            "state": asdict(self.state),
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.schedule.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "rng": rng_state(),
        }
        return payload

    def save(self, names: list[str]) -> bool:
        """Write the checkpoints ``names``; False when held back because the latest updates were
        non-finite (:mod:`nmtkit.train.divergence`: the files keep the last good state)."""
        update = self.state.update
        problem = weights_problem(self.model.state_dict().items())  # on every rank: the same weights
        if problem:
            self._diverged(f"{problem} after update {update}")
        if self.guard.streak:
            if self.dist.is_main:
                self.console.print(f"[yellow]warning:[/yellow] not writing {', '.join(names)}: {self.guard.describe(update)}")
            return False
        if not self.dist.is_main:
            return True
        payload = self._payload()
        for name in names:
            save_checkpoint(self.save_dir / name, payload)
        self._saved_at = (self.state.epoch, self.state.batches_done, update)
        if "checkpoint_last.pt" in names:
            self._last_checkpoint_update = update
        return True

    def _diverged(self, reason: str) -> NoReturn:
        """Stop training (exit 1), logging why and saying which checkpoint is kept."""
        self.log({"event": "diverged", "update": self.state.update, "reason": reason})
        last = self.save_dir / "checkpoint_last.pt"
        kept = ("no checkpoint was written" if self._last_checkpoint_update is None
                else f"{last} (update {self._last_checkpoint_update}) is kept")
        raise Diverged(f"training diverged: {reason}; {kept}; try a lower --lr or --clip-norm")

    # -- logging ----------------------------------------------------------------------------
    def log(self, record: dict) -> None:
        if not self.dist.is_main:
            return
        count = self._log_count()
        append_record(self.log_path, {"time": round(time.time(), 3), **record})  # never overwritten
        self._log_records = count + 1

    def _log_count(self) -> int:
        """Complete records in train_log.jsonl (counted once, then kept up to date)."""
        if self._log_records is None:
            try:
                self._log_records = self.log_path.read_bytes().count(b"\n")
            except OSError:
                self._log_records = 0
        return self._log_records

    # -- one update -------------------------------------------------------------------------
    def _autocast(self):  # noqa: ANN202
        return autocast(self.device, self.amp_dtype)

    def _backward(self, indices: list[int], sync: bool) -> tuple[float, float, float, float]:
        """Forward and backward of one batch with the loss *summed* (times the world size,
        since DistributedDataParallel averages gradients over processes); returns
        (global NLL sum, global target tokens, sentences, global guided-alignment loss sum, 0
        without --guided-alignment-weight).  The gradients are normalised
        once per update, in :meth:`train_step`, by tokens or sentences of all its batches."""
        local = distmod.shard(indices, self.dist)
        empty = not local
        if empty:  # fewer sentences than processes: take part in the all-reduce with zero loss
            local = indices[:1]
        batch = collate([self.train_set[i] for i in local], local).to(self.device)
        ntok_global = distmod.all_reduce_sum(0.0 if empty else float(batch.ntokens), self.dist, self.device)
        self.ddp_model.train()
        no_sync = getattr(self.ddp_model, "no_sync", None)
        with (nullcontext() if sync or no_sync is None else no_sync()):
            with self._autocast():
                logits, attn = self.ddp_model(batch.src_tokens, batch.src_lengths, batch.prev_output_tokens)
            loss, nll = sequence_loss(logits, batch.target, self.opt.label_smoothing)
            align = None
            if self.opt.guided_alignment_weight > 0:  # links in the batch's order (batch.ids), not the corpus's
                assert self.train_set.alignments is not None and attn is not None
                gold = gold_alignment_matrix([self.train_set.alignments[int(i)] for i in batch.ids], batch.src_lengths,
                                             batch.target.ne(PAD_ID).sum(dim=1), tuple(attn.shape[1:])).to(self.device)
                align = guided_alignment_loss(attn, gold, self.opt.guided_alignment_loss)
                loss = loss + self.opt.guided_alignment_weight * align
            obj = loss * ((0.0 if empty else 1.0) * self.dist.world_size)
            if self.scaler is not None:
                self.scaler.scale(obj).backward()
            else:
                obj.backward()
        nll_sum = distmod.all_reduce_sum(0.0 if empty else float(nll.detach()), self.dist, self.device)
        align_sum = 0.0
        if align is not None:
            align_sum = distmod.all_reduce_sum(0.0 if empty else float(align.detach()), self.dist, self.device)
        return nll_sum, ntok_global, float(len(indices)), align_sum

    def train_step(self, group: list[list[int]]) -> dict:
        """One update from ``group`` (``--update-freq`` batches of sentence indices)."""
        nll_sum = ntokens = sentences = align_sum = 0.0
        for k, indices in enumerate(group):
            n, t, s, a = self._backward(indices, sync=k == len(group) - 1)
            nll_sum, ntokens, sentences, align_sum = nll_sum + n, ntokens + t, sentences + s, align_sum + a
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        denominator = max(ntokens if self.opt.loss_norm == "token" else sentences, 1.0)
        for p in self.model.parameters():
            if p.grad is not None:
                p.grad.div_(denominator)
        clip = self.opt.clip_norm if self.opt.clip_norm > 0 else float("inf")
        gnorm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip))
        loss_scale = None
        if self.scaler is not None:
            loss_scale = float(self.scaler.get_scale())  # the scale of this update, before update() changes it
            self.scaler.step(self.optimizer)
            self.scaler.update()
        elif math.isfinite(gnorm) and math.isfinite(nll_sum + align_sum):
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return {"nll": nll_sum, "ntokens": ntokens, "gnorm": gnorm, "sentences": int(sentences), "align": align_sum,
                "loss_scale": loss_scale}

    # -- validation -------------------------------------------------------------------------
    @_interruptible
    @torch.inference_mode()
    def validate(self) -> Optional[dict]:
        if self.valid_set is None:
            return None
        self.model.eval()
        tot_nll, tot_tok = 0.0, 0
        batches = make_batches(self.valid_set.src_sizes, self.valid_set.tgt_sizes, self.opt.max_tokens, self.opt.batch_size, shuffle=False)
        for b in batches:
            batch = collate([self.valid_set[i] for i in b], b).to(self.device)
            with self._autocast():
                logits, _ = self.model(batch.src_tokens, batch.src_lengths, batch.prev_output_tokens)
            _, nll = sequence_loss(logits, batch.target)
            tot_nll += float(nll)
            tot_tok += batch.ntokens
        loss = tot_nll / max(tot_tok, 1)
        return {"valid_loss": loss, "valid_ppl": math.exp(min(loss, 50.0)), "valid_tokens": tot_tok}

    # -- the loop ---------------------------------------------------------------------------
    def _install_signal_handlers(self) -> dict:
        """SIGINT/SIGTERM finish the current update or checkpoint write, write checkpoint_last.pt,
        then stop (status 130); during validation (which changes no training state) they stop at once."""

        def handler(signum, frame):  # noqa: ANN001, ARG001
            self._stop_signal = signum
            if self._interruptible_depth > 0:
                raise _StopNow

        previous = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                previous[sig] = signal.signal(sig, handler)
            except ValueError:  # not in the main thread
                pass
        return previous

    def train(self) -> TrainState:
        """Run until --max-epoch, --max-update, early stopping or a signal."""
        opt = self.opt
        if self.dist.is_main:
            ensure_dir(self.save_dir)  # "X is a file, not a directory" rather than "File exists"
        previous_handlers = self._install_signal_handlers()
        try:
            return self._train(opt)
        except _StopNow:
            self._stop()
        finally:
            for sig, h in previous_handlers.items():
                signal.signal(sig, h)

    def _train(self, opt: TrainOptions) -> TrainState:
        self._t_start = time.perf_counter()
        self._padding = PaddingCounter(self.train_set.src_sizes, self.train_set.tgt_sizes)
        display = TrainDisplay(self.console, enabled=self.dist.is_main and not opt.no_progress, is_main=self.dist.is_main)
        if opt.max_epoch > 0 and self.state.epochs_done >= opt.max_epoch and self.state.batches_done == 0:
            raise StopTraining(f"already reached --max-epoch {opt.max_epoch} (checkpoint_last.pt is at the end of epoch {self.state.epochs_done}); raise --max-epoch to train further")
        if opt.max_update > 0 and self.state.update >= opt.max_update:
            raise StopTraining(f"already reached --max-update {opt.max_update} (checkpoint_last.pt is at update {self.state.update}); raise --max-update to train further")
        if opt.patience > 0 and self.state.bad_epochs >= opt.patience and self.state.batches_done == 0:
            raise StopTraining(f"already stopped early: validation {opt.best_checkpoint_metric} did not improve for "
                               f"{self.state.bad_epochs} epochs (--patience {opt.patience}); raise --patience to train further")
        self.log({"event": "start", "epoch": self.state.epoch, "update": self.state.update, "arch": opt.arch,
                  "model": self.model_name, "parameters": self.model.num_parameters(), "world_size": self.dist.world_size})
        with display:
            while opt.max_epoch <= 0 or self.state.epoch <= opt.max_epoch:
                if self._stop_signal is not None:  # e.g. arrived while the epoch's checkpoints were written
                    self._stop()
                finished = self._train_epoch(display)
                if not finished:
                    break
                if self._end_of_epoch(display):
                    break
        if self.guard.streak:  # stopped (--max-update, --max-epoch ...) while updates were non-finite
            self._diverged(f"{self.guard.describe(self.state.update)} at the end of the run")
        self.log({"event": "end", "epoch": self.state.epoch, "update": self.state.update, **self._padding_summary()})
        self._plot_curve()
        return self.state

    def _train_epoch(self, display: TrainDisplay) -> bool:
        """Train the rest of the current epoch; False when stopped early (max-update/signal)."""
        opt, st = self.opt, self.state
        batches = make_batches(self.train_set.src_sizes, self.train_set.tgt_sizes, opt.max_tokens, opt.batch_size, seed=opt.seed, epoch=st.epoch)
        display.start_epoch(st.epoch, len(batches), st.batches_done)
        win = {"nll": 0.0, "ntokens": 0.0, "sentences": 0, "t0": time.perf_counter(), "gnorm": 0.0, "n": 0, "align": 0.0}
        for k in range(st.batches_done, len(batches), opt.update_freq):
            group = batches[k : k + opt.update_freq]
            for b in group:
                self._padding.add(b)
            out = self.train_step(group)
            st.batches_done = k + len(group)
            st.update += 1
            diverged = self.guard.after_update(st.update, out["nll"] + out["align"], out["gnorm"], out["loss_scale"])
            st.epoch_nll += out["nll"]
            st.epoch_tokens += out["ntokens"]
            for key in ("nll", "ntokens", "sentences", "align"):
                win[key] += out[key]
            win["gnorm"] += out["gnorm"]
            win["n"] += 1
            elapsed = time.perf_counter() - win["t0"]
            stats = {
                "epoch": st.epoch, "update": st.update, "loss": win["nll"] / max(win["ntokens"], 1),
                "lr": self.optimizer.param_groups[0]["lr"], "gnorm": win["gnorm"] / win["n"],
                "tok_per_s": win["ntokens"] / max(elapsed, 1e-9), "sent_per_s": win["sentences"] / max(elapsed, 1e-9),
            }
            stats["ppl"] = math.exp(min(stats["loss"], 50.0))
            if opt.guided_alignment_weight > 0:  # per target token, before λ (train_log.jsonl only)
                stats["align_loss"] = win["align"] / max(win["ntokens"], 1)
            display.update(stats, advance=len(group))
            if st.update % opt.log_interval == 0:
                self.log({"event": "train", **stats})
                display.log_line(stats)
                win = {"nll": 0.0, "ntokens": 0.0, "sentences": 0, "t0": time.perf_counter(), "gnorm": 0.0, "n": 0, "align": 0.0}
            if diverged:
                self._diverged(diverged)
            if opt.validate_interval_updates and st.update % opt.validate_interval_updates == 0:
                v = self.validate()
                if v:
                    self.log({"event": "valid", "epoch": st.epoch, "update": st.update, **v})
                    display.message(f"update {st.update}: valid loss {v['valid_loss']:.3f} ppl {v['valid_ppl']:.2f}")
            if opt.save_interval_updates and st.update % opt.save_interval_updates == 0:
                self.save(["checkpoint_last.pt"])
            if opt.stop_time_hours > 0 and time.perf_counter() - self._t_start >= opt.stop_time_hours * 3600:
                if self.save(["checkpoint_last.pt"]):
                    display.message(f"reached --stop-time-hours {opt.stop_time_hours:g}; wrote {self.save_dir / 'checkpoint_last.pt'} "
                                    "(rerun the same command to continue)")
                return False
            if opt.max_update > 0 and st.update >= opt.max_update:
                if self.save(["checkpoint_last.pt"]):
                    display.message(f"reached --max-update {opt.max_update}; wrote {self.save_dir / 'checkpoint_last.pt'}")
                return False
            if self._stop_signal is not None:
                self._stop()
        return True

    def _padding_summary(self) -> dict:
        """Print (main process) and return the padding share of this run's batches."""
        counter = getattr(self, "_padding", None)
        if counter is None:
            return {}
        pad_src, pad_tgt = counter.fractions()
        if self.dist.is_main and counter.slots.any():
            self.console.print(f"padding: {100 * pad_src:.1f}% of the source and {100 * pad_tgt:.1f}% of the target "
                               "positions in this run's batches")
        return {"padding_src": round(pad_src, 4), "padding_tgt": round(pad_tgt, 4)}

    def _stop(self) -> None:
        """After SIGINT/SIGTERM: make sure checkpoint_last.pt holds the current state, say so, and
        raise KeyboardInterrupt (the command exits with status 130)."""
        st = self.state
        wrote = self._saved_at == (st.epoch, st.batches_done, st.update) or self.save(["checkpoint_last.pt"])
        name = signal.Signals(self._stop_signal).name if self._stop_signal is not None else "interrupt"
        if self.dist.is_main and wrote:
            self.console.print(f"{name}: wrote {self.save_dir / 'checkpoint_last.pt'} at update {st.update}; rerun the same command to resume")
        self.log({"event": "interrupted", "signal": name, "update": st.update, **self._padding_summary()})
        raise KeyboardInterrupt(name)

    @_interruptible
    def _valid_bleu(self, display: TrainDisplay) -> Optional[dict]:
        """``--eval-bleu``: beam-search BLEU on the valid split (see ``nmtkit.train.eval_bleu``)."""
        if not self.opt.eval_bleu or self.valid_set is None:
            return None
        from nmtkit.train.eval_bleu import valid_bleu

        t0 = time.perf_counter()
        display.message(f"translating {self.valid_set.split} for BLEU (beam {self.opt.eval_bleu_beam})...")
        r = valid_bleu(self.model, self.valid_set, self.data.pipeline(self.data.tgt_lang), self.device,
                       beam=self.opt.eval_bleu_beam, max_sentences=self.opt.eval_bleu_max_sentences or None)
        return {"valid_bleu": round(r.bleu, 2), "valid_bleu_sentences": r.sentences,
                "valid_bleu_seconds": round(time.perf_counter() - t0, 1)}

    def _improved(self, v: Optional[dict]) -> bool:
        """Update the best loss/BLEU; True when the ``--best-checkpoint-metric`` improved."""
        st = self.state
        if not v:
            return False
        finite = math.isfinite(v["valid_loss"])  # a NaN loss would become the best and stay it (NaN < x is False)
        loss_better = finite and (st.best_valid_loss is None or v["valid_loss"] < st.best_valid_loss)
        if loss_better:
            st.best_valid_loss = v["valid_loss"]
        bleu = v.get("valid_bleu")
        bleu_better = bleu is not None and (st.best_valid_bleu is None or bleu > st.best_valid_bleu)
        if bleu_better:
            st.best_valid_bleu = bleu
        return bleu_better if self.opt.best_checkpoint_metric == "bleu" else loss_better

    def _prune_epoch_checkpoints(self) -> None:
        """``--keep-last N``: delete ``checkpoint{epoch}.pt`` files older than the last N."""
        if self.opt.keep_last <= 0 or not self.dist.is_main:
            return
        for path in epoch_checkpoints(self.save_dir)[: -self.opt.keep_last]:
            path.unlink(missing_ok=True)

    def _end_of_epoch(self, display: TrainDisplay) -> bool:
        """Validate, step the schedule, write checkpoints; True when training should stop."""
        st, opt = self.state, self.opt
        v = self.validate()
        if v:
            v.update(self._valid_bleu(display) or {})
        train_loss = st.epoch_nll / max(st.epoch_tokens, 1.0)
        record = {"epoch": st.epoch, "update": st.update, "lr": self.optimizer.param_groups[0]["lr"],
                  "train_loss": train_loss, "train_ppl": math.exp(min(train_loss, 50.0)), **(v or {})}
        st.finished_epochs.append(record)
        self.log({"event": "valid", **record})
        improved = self._improved(v)
        if improved:
            st.bad_epochs = 0
        elif v:
            st.bad_epochs += 1
        display.end_epoch(record, improved)
        epoch = st.epoch
        # the plateau schedule follows the same metric as checkpoint_best.pt (lower is better)
        metric = None
        if v:
            metric = -v["valid_bleu"] if opt.best_checkpoint_metric == "bleu" else v["valid_loss"]
        self.schedule.end_of_epoch(self.optimizer, epoch, metric)
        st.epoch += 1
        st.batches_done = 0
        st.epoch_nll = st.epoch_tokens = 0.0
        names = ["checkpoint_last.pt"]
        if opt.keep_epoch_checkpoints:
            names.append(f"checkpoint{epoch}.pt")
        if improved or v is None:
            names.append("checkpoint_best.pt")
        self.save(names)
        self._prune_epoch_checkpoints()
        self._plot_curve()
        if opt.patience > 0 and st.bad_epochs >= opt.patience:
            display.message(f"early stopping: validation {opt.best_checkpoint_metric} did not improve for {opt.patience} epochs")
            self.log({"event": "early_stop", "epoch": epoch})
            return True
        return False

    def _plot_curve(self) -> None:
        if not self.dist.is_main or not self.state.finished_epochs:
            return
        from nmtkit.evaluate.plots import plot_learning_curve

        hist = [r for r in self.state.finished_epochs if "valid_ppl" in r]
        if hist:
            bleu = [r.get("valid_bleu") for r in hist]
            plot_learning_curve(
                self.save_dir / "learning_curve.png",
                [r["valid_ppl"] for r in hist],
                train_ppl=[r["train_ppl"] for r in hist],
                epochs=[r["epoch"] for r in hist],
                title=f"{self.opt.arch} on {self.data.pair}",
                valid_bleu=bleu if any(b is not None for b in bleu) else None,
            )


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


def _config_diff(name_a, cfg_a: dict, name_b, cfg_b: dict) -> str:  # noqa: ANN001
    parts = []
    if name_a != name_b:
        parts.append(f"model {name_a} vs {name_b}")
    for k in sorted(set(cfg_a) | set(cfg_b)):
        if cfg_a.get(k) != cfg_b.get(k):
            parts.append(f"{k}: checkpoint {cfg_a.get(k)!r}, now {cfg_b.get(k)!r}")
    return "; ".join(parts) or "no differences"
