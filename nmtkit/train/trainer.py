"""The training loop: batches, updates, validation, checkpoints, early stopping.

Exact resume: the batches of an epoch are a pure function of ``(seed, epoch)``; a checkpoint
stores the epoch, how many of its batches were done, the optimizer and schedule state and
the Python/NumPy/torch RNG states.  Rerunning the same command continues from there and, on
CPU, reproduces an uninterrupted run bit for bit.

The loop's helpers have modules of their own: :mod:`~nmtkit.train.resume` (what a resumed run
may change), :mod:`~nmtkit.train.checkpoints` (what a checkpoint holds),
:mod:`~nmtkit.train.run_log` (train_log.jsonl), :mod:`~nmtkit.train.stop_signals`
(SIGINT/SIGTERM) and :mod:`~nmtkit.train.validation`.
"""
from __future__ import annotations

import math
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable, NoReturn, Optional

import torch

from nmtkit.checkpoint import save_checkpoint
from nmtkit.data.dataset import DataDir, PaddingCounter, ParallelDataset, collate, make_batches
from nmtkit.data.dictionary import PAD_ID
from nmtkit.errors import NmtkitError
from nmtkit.train import distributed as distmod
from nmtkit.train import resume
from nmtkit.train.checkpoints import inference_payload, prune_epoch_checkpoints, saved_sizes, training_payload
from nmtkit.train.display import TrainDisplay
from nmtkit.train.ema import WeightAverage, averaged
from nmtkit.train.divergence import DivergenceGuard, Diverged, weights_problem
from nmtkit.train.guided import check_guided_alignment, gold_alignment_matrix, guided_alignment_loss
from nmtkit.train.loss import sequence_loss
from nmtkit.train.optim import LRSchedule, build_optimizer, normalize_and_clip
from nmtkit.utils.heap import keep_freed_memory
from nmtkit.utils.memory import allocation_guard, model_size_hint
from nmtkit.train.options import TrainOptions
from nmtkit.train.run_log import RunLog
from nmtkit.train.tensorboard import TensorBoardLog
from nmtkit.train.state import TrainState, seed_everything
from nmtkit.train.stop_signals import StopNow, StopSignals, interruptible
from nmtkit.train.validation import record_best, valid_loss
from nmtkit.utils.amp import autocast, resolve_amp
from nmtkit.utils.textio import ensure_dir, refuse_linked_output


class StopTraining(Exception):
    """The run has nothing left to do (--max-epoch, --max-update or --patience already reached)."""


class Trainer:
    """Owns the model, optimizer, schedule and data of one training run."""

    def __init__(self, opt: TrainOptions, model_overrides: dict[str, Any], console, dist: distmod.DistInfo) -> None:  # noqa: ANN001
        from nmtkit.utils.device import parse_device
        from nmtkit.models import registry

        self.opt = opt
        self.console = console
        self.dist = dist
        self.save_dir = Path(opt.save_dir)
        for name in ("checkpoint_last.pt", "checkpoint_best.pt", "train_log.jsonl", "learning_curve.png"):
            if (self.save_dir / name).is_dir():  # found now, not when the first epoch ends
                raise NmtkitError(f"{self.save_dir / name} is a directory, where training writes a file")
        for path in [self.save_dir / "train_log.jsonl", self.save_dir / "learning_curve.png",
                     *sorted(self.save_dir.glob("checkpoint*.pt"))]:  # replaced on every save: never through a link
            refuse_linked_output(path, appended=path.name == "train_log.jsonl")
        self.data = DataDir(opt.data)
        self.train_set = self.data.load_split(opt.train_subset)
        valid_split = self.data.validation_split(opt.valid_subset)  # an unknown name is an error
        self.valid_set: Optional[ParallelDataset] = self.data.load_split(valid_split) if valid_split else None
        if opt.eval_bleu and self.valid_set is not None:  # its references: missing or short, say so now, not after an epoch
            self.valid_set.tokens_text(self.data.tgt_lang)
        if self.valid_set is None and dist.is_main:
            idle = [flag for flag, on in (("--patience", opt.patience > 0), ("--lr-schedule plateau", opt.lr_schedule == "plateau"),
                                          ("--eval-bleu", opt.eval_bleu),
                                          ("--validate-interval-updates", opt.validate_interval_updates > 0)) if on]
            if idle:  # each follows the validation scores, so without them it does nothing
                console.print(f"[yellow]warning:[/yellow] {', '.join(idle)} need a validation split, and there is none "
                              f"({self.data.path} has no valid split, or --valid-subset none): "
                              f"{'they do' if len(idle) > 1 else 'it does'} nothing in this run")
        if opt.max_tokens is None and opt.batch_size is None:
            raise NmtkitError("give --max-tokens or --batch-size")
        self.device = parse_device(opt.device)
        if self.device.type == "cuda" and dist.enabled:
            self.device = torch.device("cuda", dist.local_rank)
        if opt.threads > 0:
            torch.set_num_threads(opt.threads)
        if self.device.type == "cpu":
            keep_freed_memory()  # big per-step tensors reuse memory instead of page-faulting afresh
        self.model_name, self.cfg = registry.resolve_config(opt.arch, model_overrides)
        seed_everything(opt.seed)
        with allocation_guard(f"building {opt.arch} on {self.device} ({model_size_hint(self.cfg)})"):
            self.model = registry.build_model(self.model_name, self.cfg, self.data.src_dict, self.data.tgt_dict).to(self.device)
        if opt.cuda_graphs:
            if dist.enabled:  # DistributedDataParallel's hooks with graphed loops are untested on several GPUs
                raise NmtkitError("--cuda-graphs is for one process: not with distributed training (torchrun) yet")
            if opt.update_freq > 1:  # autograd may adopt a graph's gradient buffer as .grad, which its next replay overwrites
                raise NmtkitError("--cuda-graphs needs one batch per update: not with --update-freq above 1 "
                                  "(raise --max-tokens instead)")
            if self.device.type != "cuda":
                raise NmtkitError(f"--cuda-graphs needs a CUDA device (this run is on {self.device})")
            if "train" not in self.model.cuda_graph_support:
                raise NmtkitError(f"--cuda-graphs replays a recurrent decoder's step loop; {opt.arch} ({self.model_name}) "
                                  "has none (it trains all target positions at once): train without --cuda-graphs")
            from nmtkit.models.loop_graphs import LoopGraphs

            self.model.loop_graphs = LoopGraphs()
        check_guided_alignment(opt.guided_alignment_weight, opt.arch, self.model, self.train_set.alignments is not None,
                               f"{self.data.path} has no alignments for split {opt.train_subset!r}")
        self.optimizer = build_optimizer(opt.optimizer, self.model.parameters(), opt.lr, opt.adam_betas)
        self.ema = WeightAverage(self.model, opt.ema_decay) if opt.ema_decay > 0 else None
        self.schedule = LRSchedule(opt.lr_schedule, opt.halve_after, opt.lr_shrink, opt.plateau_patience, opt.min_lr,
                                   opt.anneal_fraction, base_lr=self.optimizer.param_groups[0]["lr"],
                                   warmup_updates=opt.warmup_updates)
        self.state = TrainState()
        self.amp_dtype = resolve_amp(self.opt.amp, self.device, training=True)
        self.scaler = torch.amp.GradScaler("cuda") if self.amp_dtype == torch.float16 else None
        self.ddp_model: torch.nn.Module = self.model
        if dist.enabled:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            self.ddp_model = DistributedDataParallel(self.model, device_ids=ids)
        self.stop_signals = StopSignals()
        self._saved_at: Optional[tuple[int, int, int]] = None  # (epoch, batches_done, update) of the last save
        self.written: dict[str, int] = {}  # file name -> bytes, of the last save
        self.last_checkpoint_update: Optional[int] = None  # the update checkpoint_last.pt holds (None: no file)
        self.guard = DivergenceGuard(opt.max_nonfinite_updates)
        self.run_log = RunLog(self.save_dir / "train_log.jsonl", enabled=dist.is_main)
        self.tensorboard = TensorBoardLog(opt.tensorboard_logdir, enabled=dist.is_main)  # the same records, as curves
        self._train_fingerprint: Optional[dict] = None
        self._t_start: Optional[float] = None  # clock() when this run's training began
        self._wall_before = 0.0  # budget seconds spent by earlier runs of this save dir
        #: The wall clock of the --stop-time-hours budget; tests replace it with a simulated one.
        self.clock: Callable[[], float] = time.perf_counter

    # -- setup ------------------------------------------------------------------------------
    def resume_if_possible(self, reset_optimizer: bool = False, reset_lr_scheduler: bool = False,
                           reset_dataloader: bool = False) -> Optional[str]:
        """Continue from ``checkpoint_last.pt`` if there is one (:func:`nmtkit.train.resume.resume_if_possible`)."""
        return resume.resume_if_possible(self, reset_optimizer, reset_lr_scheduler, reset_dataloader)

    def train_data_fingerprint(self) -> dict:
        """:func:`nmtkit.train.resume.train_data_fingerprint` of the training split, computed once."""
        if self._train_fingerprint is None:
            self._train_fingerprint = resume.train_data_fingerprint(self.train_set)
        return self._train_fingerprint

    # -- checkpoints ------------------------------------------------------------------------
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
        self.state.budget_wall_s = self._local_wall()
        payload = training_payload(self)
        weights_only = inference_payload(payload)
        self.written = {}
        for name in names:
            # only checkpoint_last.pt is resumed from: the best and epoch ones leave out the
            # optimizer state (two thirds of an Adam checkpoint) and the rest of the training state
            save_checkpoint(self.save_dir / name, payload if name == "checkpoint_last.pt" else weights_only)
            self.written[name] = (self.save_dir / name).stat().st_size
        self._saved_at = (self.state.epoch, self.state.batches_done, update)
        if "checkpoint_last.pt" in names:
            self.last_checkpoint_update = update
        return True

    def _diverged(self, reason: str) -> NoReturn:
        """Stop training (exit 1), logging why and saying which checkpoint is kept."""
        self.log({"event": "diverged", "update": self.state.update, "reason": reason})
        last = self.save_dir / "checkpoint_last.pt"
        kept = ("no checkpoint was written" if self.last_checkpoint_update is None
                else f"{last} (update {self.last_checkpoint_update}) is kept")
        raise Diverged(f"training diverged: {reason}; {kept}; try a lower --lr or --clip-norm")

    # -- logging ----------------------------------------------------------------------------
    def log(self, record: dict) -> None:
        """Append ``record`` to train_log.jsonl (main process only)."""
        self.run_log.append(record)
        self.tensorboard.record(record)

    # -- one update -------------------------------------------------------------------------
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
            with autocast(self.device, self.amp_dtype):
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
        clip = self.opt.clip_norm if self.opt.clip_norm > 0 else float("inf")
        gnorm = normalize_and_clip(self.model.parameters(), denominator, clip)
        loss_scale = None
        if self.scaler is not None:
            loss_scale = float(self.scaler.get_scale())  # the scale of this update, before update() changes it
            self.scaler.step(self.optimizer)
            self.scaler.update()
        elif math.isfinite(gnorm) and math.isfinite(nll_sum + align_sum):
            self.optimizer.step()
        if self.ema is not None and math.isfinite(gnorm) and math.isfinite(nll_sum + align_sum):
            self.ema.update(self.model)
        self.optimizer.zero_grad(set_to_none=True)
        return {"nll": nll_sum, "ntokens": ntokens, "gnorm": gnorm, "sentences": int(sentences), "align": align_sum,
                "loss_scale": loss_scale}

    # -- validation -------------------------------------------------------------------------
    @interruptible
    def validate(self) -> Optional[dict]:
        """Loss and perplexity on the valid split; None without one.  A signal ends it at once."""
        if self.valid_set is None:
            return None
        with averaged(self.ema, self.model):
            return valid_loss(self.model, self.valid_set, self.opt.max_tokens, self.opt.batch_size, self.device, self.amp_dtype)

    # -- the loop ---------------------------------------------------------------------------
    def train(self) -> TrainState:
        """Run until --max-epoch, --max-update, early stopping or a signal."""
        opt = self.opt
        if self.dist.is_main:
            ensure_dir(self.save_dir)  # "X is a file, not a directory" rather than "File exists"
        previous_handlers = self.stop_signals.install()
        try:
            return self._train(opt)
        except StopNow:
            self._stop()
        finally:
            self.stop_signals.restore(previous_handlers)
            self.tensorboard.close()

    def _train(self, opt: TrainOptions) -> TrainState:
        self._t_start = self.clock()
        # --stop-time-hours is the total over every run of this save dir: a resumed run gets the rest
        self._wall_before = self.state.budget_wall_s
        self._wall = self._budget_wall()
        self._padding = PaddingCounter(self.train_set.src_sizes, self.train_set.tgt_sizes)
        display = TrainDisplay(self.console, enabled=self.dist.is_main and not opt.no_progress, is_main=self.dist.is_main)
        finished = resume.nothing_left(opt, self.state)
        if finished:
            raise StopTraining(finished)
        self.log({"event": "start", "epoch": self.state.epoch, "update": self.state.update, "arch": opt.arch,
                  "model": self.model_name, "parameters": self.model.num_parameters(), "world_size": self.dist.world_size})
        with display:
            while opt.max_epoch <= 0 or self.state.epoch <= opt.max_epoch:
                if self.stop_signals.received:  # e.g. arrived while the epoch's checkpoints were written
                    self._stop()
                finished = self._train_epoch(display)
                if not finished:
                    break
                if self._end_of_epoch(display):
                    break
                if self._budget_reached():  # the epoch's validation may have spent the rest: no update after it
                    display.message(self._time_stop_message())
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
            self.schedule.before_update(self.optimizer, self._budget_used(k, len(batches), self._wall), self.state.update)
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
            last_of_epoch = st.batches_done >= len(batches)
            if self._budget_reached():
                if last_of_epoch:  # the epoch's end validates and writes the checkpoints, then the run stops
                    return True
                if self._end_inside_epoch(display):
                    display.message(self._time_stop_message())
                return False
            if opt.validate_interval_updates and st.update % opt.validate_interval_updates == 0 and not last_of_epoch:
                # (on the epoch's last update the epoch's end validates: not twice in a row)
                v = self.validate()
                if v:
                    self.log({"event": "valid", "epoch": st.epoch, "update": st.update, **v})
                    display.message(f"update {st.update}: valid loss {v['valid_loss']:.3f} ppl {v['valid_ppl']:.2f}")
                if self._budget_reached():  # spent during this validation: stop on its scores, without another
                    if self._end_inside_epoch(display, validated=v):
                        display.message(self._time_stop_message())
                    return False
            if opt.save_interval_updates and st.update % opt.save_interval_updates == 0:
                self.save(["checkpoint_last.pt"])
            if opt.max_update > 0 and st.update >= opt.max_update:
                if self._end_inside_epoch(display):
                    display.message(f"reached --max-update {opt.max_update}; wrote {self.save_dir / 'checkpoint_last.pt'}")
                return False
            if self.stop_signals.received:
                self._stop()
        return True

    def _budget_reached(self) -> bool:
        """Whether --stop-time-hours is spent (reads the clock: call it at the same points on every rank)."""
        if self.opt.stop_time_hours <= 0:
            return False
        self._wall = self._budget_wall()
        return self._wall >= self.opt.stop_time_hours * 3600

    def _time_stop_message(self) -> str:
        return (f"reached --stop-time-hours {self.opt.stop_time_hours:g} ({self._wall / 3600:.3g} h in all); wrote "
                f"{self.save_dir / 'checkpoint_last.pt'} (raise --stop-time-hours and rerun the command to continue)")

    def _budget_wall(self) -> float:
        """Wall seconds spent in the current --stop-time-hours budget (0 without one): earlier,
        interrupted runs' time plus this run's.  Under torchrun every rank takes the main
        process's clock, so that all stop and anneal at the same update."""
        if self.opt.stop_time_hours <= 0:
            return 0.0
        wall = self._local_wall()
        if self.dist.enabled:
            wall = distmod.all_reduce_sum(wall if self.dist.is_main else 0.0, self.dist, self.device)
        return wall

    def _local_wall(self) -> float:
        """This process's count of the budget's wall seconds (what a checkpoint keeps)."""
        if self._t_start is None:  # not training yet
            return self.state.budget_wall_s
        return self._wall_before + self.clock() - self._t_start

    def _budget_used(self, batch: int, epoch_batches: int, wall: float) -> float:
        """The share (0..1) of the run's budget spent before batch ``batch`` of the current epoch:
        the largest of the wall-time (``wall`` seconds, see :meth:`_budget_wall`), update and epoch
        shares that have a limit."""
        opt, st = self.opt, self.state
        used = 0.0
        if opt.stop_time_hours > 0:
            used = wall / (opt.stop_time_hours * 3600)
        if opt.max_update > 0:
            used = max(used, st.update / opt.max_update)
        if opt.max_epoch > 0:
            used = max(used, (st.epoch - 1 + batch / max(epoch_batches, 1)) / opt.max_epoch)
        return min(used, 1.0)

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
        """After SIGINT/SIGTERM: make sure checkpoint_last.pt holds the current state (unless the
        latest updates were non-finite: then it keeps the last good one and :meth:`save` says so),
        and raise KeyboardInterrupt (the command exits with status 130)."""
        st = self.state
        wrote = self._saved_at == (st.epoch, st.batches_done, st.update) or self.save(["checkpoint_last.pt"])
        name = self.stop_signals.name
        if self.dist.is_main and wrote:
            self.console.print(f"{name}: wrote {self.save_dir / 'checkpoint_last.pt'} at update {st.update}; rerun the same command to resume")
        self.log({"event": "interrupted", "signal": name, "update": st.update, **self._padding_summary()})
        raise KeyboardInterrupt(name)

    @interruptible
    def _valid_bleu(self, display: TrainDisplay) -> Optional[dict]:
        """``--eval-bleu``: beam-search BLEU on the valid split (see ``nmtkit.train.eval_bleu``)."""
        if not self.opt.eval_bleu or self.valid_set is None:
            return None
        from nmtkit.train.eval_bleu import valid_bleu

        t0 = time.perf_counter()
        display.message(f"translating {self.valid_set.split} for BLEU (beam {self.opt.eval_bleu_beam})...")
        with averaged(self.ema, self.model):
            r = valid_bleu(self.model, self.valid_set, self.data.pipeline(self.data.tgt_lang), self.device,
                           beam=self.opt.eval_bleu_beam, max_sentences=self.opt.eval_bleu_max_sentences or None,
                           amp_dtype=resolve_amp(self.opt.amp, self.device))  # what nmtkit-translate --amp would use
        return {"valid_bleu": round(r.bleu, 2), "valid_bleu_sentences": r.sentences,
                "valid_bleu_seconds": round(time.perf_counter() - t0, 1)}

    def _end_inside_epoch(self, display: TrainDisplay, validated: Optional[dict] = None) -> bool:
        """--max-update or --stop-time-hours reached: validate the weights the run ends with, as at
        an epoch's end, and write checkpoint_last.pt (and checkpoint_best.pt when they are the best).

        Why: the last updates of a run (under ``--lr-schedule anneal`` the ones at the smallest
        learning rate) would otherwise never be validated, and checkpoint_best.pt could not be
        them; fairseq validates at --max-update too.  The plateau schedule and --patience count
        whole epochs, so they are left alone.  ``validated``: the scores of a validation of these
        weights just done (--validate-interval-updates), used instead of validating again.  False
        when the checkpoints were held back (:meth:`save`)."""
        st = self.state
        v = validated if validated is not None else self.validate()
        names = ["checkpoint_last.pt"]
        if v:
            if validated is None:
                v.update(self._valid_bleu(display) or {})
                self.log({"event": "valid", "epoch": st.epoch, "update": st.update, "inside_epoch": True, **v})
                shown = f"valid BLEU {v['valid_bleu']:.2f}" if "valid_bleu" in v else f"valid loss {v['valid_loss']:.3f} ppl {v['valid_ppl']:.2f}"
                display.message(f"update {st.update}: {shown}")
            if record_best(st, v, self.opt.best_checkpoint_metric):
                names.append("checkpoint_best.pt")
        return self.save(names)

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
        improved = record_best(st, v, opt.best_checkpoint_metric)
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
        if improved or (v is None and st.best_valid_loss is None and st.best_valid_bleu is None):
            # without validation the newest is the best, unless a validated best exists (a resumed run)
            names.append("checkpoint_best.pt")
        saved = self.save(names)
        if self.dist.is_main:
            prune_epoch_checkpoints(self.save_dir, opt.keep_last)
            if saved:
                display.message(saved_sizes(self.save_dir, self.written))
        self._plot_curve()
        if opt.patience > 0 and st.bad_epochs >= opt.patience:
            display.message(f"early stopping: validation {opt.best_checkpoint_metric} did not improve for {opt.patience} epochs")
            self.log({"event": "early_stop", "epoch": epoch})
            return True
        return False

    def _plot_curve(self) -> None:
        if self.dist.is_main and self.state.finished_epochs:
            from nmtkit.evaluate.plots import plot_epoch_records

            plot_epoch_records(self.save_dir / "learning_curve.png", self.state.finished_epochs, f"{self.opt.arch} on {self.data.pair}")
