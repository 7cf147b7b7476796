"""The training loop: batches, updates, validation, checkpoints, early stopping.

Exact resume: the batches of an epoch are a pure function of ``(seed, epoch)``; a checkpoint
stores the epoch, how many of its batches were done, the optimizer and schedule state and
the Python/NumPy/torch RNG states.  Rerunning the same command continues from there and, on
CPU, reproduces an uninterrupted run bit for bit.

The run's state is a :class:`~nmtkit.train.run.TrainingRun`, built by
:func:`~nmtkit.train.run.build_run`; the loop's helpers take it: :mod:`~nmtkit.train.resume`
(what a resumed run may change), :mod:`~nmtkit.train.checkpoints` (what a checkpoint holds,
writing it), :mod:`~nmtkit.train.budget` (--stop-time-hours),
:mod:`~nmtkit.train.run_log` (train_log.jsonl), :mod:`~nmtkit.train.stop_signals`
(SIGINT/SIGTERM) and :mod:`~nmtkit.train.validation`.
"""
from __future__ import annotations

import math
import time
from contextlib import nullcontext
from typing import Any, Callable, NoReturn, Optional

from nmtkit.data.dataset import PaddingCounter, collate, make_batches
from nmtkit.train import checkpoints, resume, validation
from nmtkit.train import distributed as distmod
from nmtkit.train.budget import TimeBudget
from nmtkit.train.checkpoints import prune_epoch_checkpoints, saved_sizes
from nmtkit.train.display import TrainDisplay, UpdateWindow, padding_summary, plot_learning_curve
from nmtkit.train.guided import batch_alignment_loss
from nmtkit.train.loss import teacher_forced_loss
from nmtkit.train.optim import normalize_and_clip
from nmtkit.train.options import TrainOptions
from nmtkit.train.run import build_run
from nmtkit.train.state import TrainState
from nmtkit.train.stop_signals import StopNow, StopSignals, interruptible
from nmtkit.train.validation import record_best
from nmtkit.utils.amp import autocast, precision_name
from nmtkit.utils.heap import PeriodicRelease
from nmtkit.utils.textio import ensure_dir


class StopTraining(Exception):
    """The run has nothing left to do (--max-epoch, --max-update or --patience already reached)."""


class Trainer:
    """The loop of one training run (its state: :class:`~nmtkit.train.run.TrainingRun`)."""

    def __init__(self, opt: TrainOptions, model_overrides: dict[str, Any], console, dist: distmod.DistInfo) -> None:  # noqa: ANN001
        self.run = build_run(opt, model_overrides, console, dist)
        self.stop_signals = StopSignals()
        #: The wall clock of the --stop-time-hours budget; tests replace it with a simulated one.
        self.clock: Callable[[], float] = time.perf_counter
        self.budget = TimeBudget(self.run, lambda: self.clock())
        self._padding: Optional[PaddingCounter] = None  # the padding share of the run's batches, once the loop begins
        #: the CPU heap keeps freed memory (run._device): its free pages go back every so many updates
        self.heap = PeriodicRelease(enabled=self.run.device.type == "cpu")

    # what the command line and the benchmarks read of the run
    model = property(lambda self: self.run.model)
    train_set = property(lambda self: self.run.train_set)
    device = property(lambda self: self.run.device)
    state = property(lambda self: self.run.state)

    def resume_if_possible(self, reset_optimizer: bool = False, reset_lr_scheduler: bool = False,
                           reset_dataloader: bool = False) -> Optional[str]:
        """Continue from ``checkpoint_last.pt`` if there is one (:func:`nmtkit.train.resume.resume_if_possible`)."""
        return resume.resume_if_possible(self.run, reset_optimizer, reset_lr_scheduler, reset_dataloader)

    def save(self, names: list[str]) -> bool:
        """Write the checkpoints ``names`` (:func:`nmtkit.train.checkpoints.save`)."""
        return checkpoints.save(self.run, names, self.budget.local())

    # -- one update -------------------------------------------------------------------------
    def _backward(self, indices: list[int], sync: bool) -> tuple[float, float, float, float]:
        """Forward and backward of one batch with the loss *summed* (times the world size,
        since DistributedDataParallel averages gradients over processes); returns
        (global NLL sum, global target tokens, sentences, global guided-alignment loss sum, 0
        without --guided-alignment-weight).  The gradients are normalised
        once per update, in :meth:`train_step`, by tokens or sentences of all its batches."""
        local = distmod.shard(indices, self.run.dist)
        empty = not local
        if empty:  # fewer sentences than processes: take part in the all-reduce with zero loss
            local = indices[:1]
        batch = collate([self.run.train_set[i] for i in local], local).to(self.run.device)
        ntok_global = distmod.all_reduce_sum(0.0 if empty else float(batch.ntokens), self.run.dist, self.run.device)
        self.run.ddp_model.train()
        no_sync = getattr(self.run.ddp_model, "no_sync", None)
        with (nullcontext() if sync or no_sync is None else no_sync()):
            with autocast(self.run.device, self.run.amp_dtype):
                guided = self.run.opt.guided_alignment_weight > 0
                loss, nll, attn = teacher_forced_loss(self.run.ddp_model, self.run.model, batch,
                                                      self.run.opt.label_smoothing, need_attention=guided)
            align = None
            if guided:
                assert self.run.train_set.alignments is not None and attn is not None
                align = batch_alignment_loss(self.run.train_set.alignments, batch, attn, self.run.opt.guided_alignment_loss)
                loss = loss + self.run.opt.guided_alignment_weight * align
            obj = loss * ((0.0 if empty else 1.0) * self.run.dist.world_size)
            if self.run.scaler is not None:
                self.run.scaler.scale(obj).backward()
            else:
                obj.backward()
        nll_sum = distmod.all_reduce_sum(0.0 if empty else float(nll.detach()), self.run.dist, self.run.device)
        align_sum = 0.0
        if align is not None:
            align_sum = distmod.all_reduce_sum(0.0 if empty else float(align.detach()), self.run.dist, self.run.device)
        return nll_sum, ntok_global, float(len(indices)), align_sum

    def train_step(self, group: list[list[int]]) -> dict:
        """One update from ``group`` (``--update-freq`` batches of sentence indices)."""
        nll_sum = ntokens = sentences = align_sum = 0.0
        for k, indices in enumerate(group):
            n, t, s, a = self._backward(indices, sync=k == len(group) - 1)
            nll_sum, ntokens, sentences, align_sum = nll_sum + n, ntokens + t, sentences + s, align_sum + a
        if self.run.scaler is not None:
            self.run.scaler.unscale_(self.run.optimizer)
        denominator = max(ntokens if self.run.opt.loss_norm == "token" else sentences, 1.0)
        clip = self.run.opt.clip_norm if self.run.opt.clip_norm > 0 else float("inf")
        gnorm = normalize_and_clip(self.run.model.parameters(), denominator, clip)
        loss_scale = None
        if self.run.scaler is not None:
            loss_scale = float(self.run.scaler.get_scale())  # the scale of this update, before update() changes it
            self.run.scaler.step(self.run.optimizer)
            self.run.scaler.update()
        elif math.isfinite(gnorm) and math.isfinite(nll_sum + align_sum):
            self.run.optimizer.step()
        if self.run.ema is not None and math.isfinite(gnorm) and math.isfinite(nll_sum + align_sum):
            self.run.ema.update(self.run.model)
        self.run.optimizer.zero_grad(set_to_none=True)
        return {"nll": nll_sum, "ntokens": ntokens, "gnorm": gnorm, "sentences": int(sentences), "align": align_sum,
                "loss_scale": loss_scale}

    # -- validation -------------------------------------------------------------------------
    @interruptible
    def validate(self) -> Optional[dict]:
        """Loss and perplexity on the valid split (:func:`~nmtkit.train.validation.validate`); None
        without one.  A signal ends it at once."""
        return validation.validate(self.run)

    # -- the loop ---------------------------------------------------------------------------
    def train(self) -> TrainState:
        """Run until --max-epoch, --max-update, early stopping or a signal."""
        opt = self.run.opt
        if self.run.dist.is_main:
            ensure_dir(self.run.save_dir)  # "X is a file, not a directory" rather than "File exists"
        previous_handlers = self.stop_signals.install()
        try:
            return self._train(opt)
        except StopNow:
            self._stop()
        finally:
            self.stop_signals.restore(previous_handlers)
            self.run.tensorboard.close()

    def _train(self, opt: TrainOptions) -> TrainState:
        self.budget.start()
        self._padding = PaddingCounter(self.run.train_set.src_sizes, self.run.train_set.tgt_sizes)
        display = TrainDisplay(self.run.console, enabled=self.run.dist.is_main and not opt.no_progress, is_main=self.run.dist.is_main)
        finished = resume.nothing_left(opt, self.run.state)
        if finished:
            raise StopTraining(finished)
        self.run.log({"event": "start", "epoch": self.run.state.epoch, "update": self.run.state.update, "arch": opt.arch,
                  "model": self.run.model_name, "parameters": self.run.model.num_parameters(), "world_size": self.run.dist.world_size,
                      "precision": precision_name(self.run.amp_dtype)})
        with display:
            while opt.max_epoch <= 0 or self.run.state.epoch <= opt.max_epoch:
                if self.stop_signals.received:  # e.g. arrived while the epoch's checkpoints were written
                    self._stop()
                completed = self._train_epoch(display)
                if not completed:
                    break
                if self._end_of_epoch(display):
                    break
                if self.budget.reached():  # the epoch's validation may have spent the rest: no update after it
                    display.message(self.budget.stop_message())
                    break
        if self.run.guard.streak:  # stopped (--max-update, --max-epoch ...) while updates were non-finite
            checkpoints.diverged(self.run, f"{self.run.guard.describe(self.run.state.update)} at the end of the run")
        self.run.log({"event": "end", "epoch": self.run.state.epoch, "update": self.run.state.update, **padding_summary(self.run, self._padding)})
        plot_learning_curve(self.run)
        return self.run.state

    def _train_epoch(self, display: TrainDisplay) -> bool:
        """Train the rest of the current epoch; False when stopped early (max-update/signal)."""
        opt, st = self.run.opt, self.run.state
        batches = make_batches(self.run.train_set.src_sizes, self.run.train_set.tgt_sizes, opt.max_tokens, opt.batch_size, seed=opt.seed, epoch=st.epoch)
        display.start_epoch(st.epoch, len(batches), st.batches_done)
        win = UpdateWindow()
        assert self._padding is not None  # made by _train
        for k in range(st.batches_done, len(batches), opt.update_freq):
            group = batches[k : k + opt.update_freq]
            for b in group:
                self._padding.add(b)
            self.run.schedule.before_update(self.run.optimizer, self.budget.used(k, len(batches)), self.run.state.update)
            out = self.train_step(group)
            st.batches_done = k + len(group)
            st.update += 1
            self.heap.after_update(st.update)
            diverged = self.run.guard.after_update(st.update, out["nll"] + out["align"], out["gnorm"], out["loss_scale"])
            st.epoch_nll += out["nll"]
            st.epoch_tokens += out["ntokens"]
            win.add(out)
            stats = win.stats(st.epoch, st.update, self.run.optimizer.param_groups[0]["lr"], opt.guided_alignment_weight > 0)
            display.update(stats, advance=len(group))
            if st.update % opt.log_interval == 0:
                self.run.log({"event": "train", **stats})
                display.log_line(stats)
                win = UpdateWindow()
            if diverged:
                checkpoints.diverged(self.run, diverged)
            last_of_epoch = st.batches_done >= len(batches)
            if self.budget.reached():
                if last_of_epoch:  # the epoch's end validates and writes the checkpoints, then the run stops
                    return True
                if self._end_inside_epoch(display):
                    display.message(self.budget.stop_message())
                return False
            if opt.validate_interval_updates and st.update % opt.validate_interval_updates == 0 and not last_of_epoch:
                # (on the epoch's last update the epoch's end validates: not twice in a row)
                v = self.validate()
                if v:
                    self.run.log({"event": "valid", "epoch": st.epoch, "update": st.update, **v})
                    display.message(f"update {st.update}: valid loss {v['valid_loss']:.3f} ppl {v['valid_ppl']:.2f}")
                if self.budget.reached():  # spent during this validation: stop on its scores, without another
                    if self._end_inside_epoch(display, validated=v):
                        display.message(self.budget.stop_message())
                    return False
            if opt.save_interval_updates and st.update % opt.save_interval_updates == 0:
                self.save(["checkpoint_last.pt"])
            if opt.max_update > 0 and st.update >= opt.max_update:
                if self._end_inside_epoch(display):
                    display.message(f"reached --max-update {opt.max_update}; "
                                    + saved_sizes(self.run.save_dir, self.run.written))
                return False
            if self.stop_signals.received:
                self._stop()
        return True

    def _stop(self) -> NoReturn:
        """After SIGINT/SIGTERM: make sure checkpoint_last.pt holds the current state (unless the
        latest updates were non-finite: then it keeps the last good one and :meth:`save` says so),
        and raise KeyboardInterrupt (the command exits with status 130)."""
        st = self.run.state
        wrote = self.run.saved_at == (st.epoch, st.batches_done, st.update) or self.save(["checkpoint_last.pt"])
        name = self.stop_signals.name
        if self.run.dist.is_main and wrote:
            self.run.console.print(f"{name}: wrote {self.run.save_dir / 'checkpoint_last.pt'} at update {st.update}; rerun the same command to resume")
        self.run.log({"event": "interrupted", "signal": name, "update": st.update, **padding_summary(self.run, self._padding)})
        raise KeyboardInterrupt(name)

    @interruptible
    def _valid_bleu(self, display: TrainDisplay) -> Optional[dict]:
        """``--eval-bleu``: beam-search BLEU on the valid split (:func:`nmtkit.train.eval_bleu.run_valid_bleu`)."""
        if not self.run.opt.eval_bleu or self.run.valid_set is None:
            return None
        from nmtkit.train.eval_bleu import run_valid_bleu

        return run_valid_bleu(self.run, display.message)

    def _end_inside_epoch(self, display: TrainDisplay, validated: Optional[dict] = None) -> bool:
        """--max-update or --stop-time-hours reached: validate the weights the run ends with, as at
        an epoch's end, and write checkpoint_last.pt (and checkpoint_best.pt when they are the best).

        Why: the last updates of a run (under ``--lr-schedule anneal`` the ones at the smallest
        learning rate) would otherwise never be validated, and checkpoint_best.pt could not be
        them; fairseq validates at --max-update too.  The plateau schedule and --patience count
        whole epochs, so they are left alone.  ``validated``: the scores of a validation of these
        weights just done (--validate-interval-updates), used instead of validating again.  False
        when the checkpoints were held back (:meth:`save`)."""
        st = self.run.state
        v = validated if validated is not None else self.validate()
        names = ["checkpoint_last.pt"]
        if v:
            if validated is None:
                v.update(self._valid_bleu(display) or {})
                self.run.log({"event": "valid", "epoch": st.epoch, "update": st.update, "inside_epoch": True, **v})
                shown = f"valid BLEU {v['valid_bleu']:.2f}" if "valid_bleu" in v else f"valid loss {v['valid_loss']:.3f} ppl {v['valid_ppl']:.2f}"
                display.message(f"update {st.update}: {shown}")
            if record_best(st, v, self.run.opt.best_checkpoint_metric):
                names.append("checkpoint_best.pt")
        return self.save(names)

    def _end_of_epoch(self, display: TrainDisplay) -> bool:
        """Validate, step the schedule, write checkpoints; True when training should stop."""
        st, opt = self.run.state, self.run.opt
        v = self.validate()
        if v:
            v.update(self._valid_bleu(display) or {})
        record, improved = validation.end_epoch(self.run, v)
        display.end_epoch(record, improved)
        epoch = st.epoch
        self.run.schedule.end_of_epoch(self.run.optimizer, epoch, validation.schedule_metric(v, opt.best_checkpoint_metric))
        st.epoch += 1
        st.batches_done = 0
        st.epoch_nll = st.epoch_tokens = 0.0
        saved = self.save(checkpoints.end_of_epoch_names(self.run, epoch, improved, validated=v is not None))
        if self.run.dist.is_main:
            prune_epoch_checkpoints(self.run.save_dir, opt.keep_last)
            if saved:
                display.message(saved_sizes(self.run.save_dir, self.run.written))
        plot_learning_curve(self.run)
        if opt.patience > 0 and st.bad_epochs >= opt.patience:
            display.message(f"early stopping: validation {opt.best_checkpoint_metric} did not improve for {opt.patience} epochs")
            self.run.log({"event": "early_stop", "epoch": epoch})
            return True
        return False
