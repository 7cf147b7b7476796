"""The state of one training run, and the one function that builds it.

Why an object of its own: the loop (:mod:`nmtkit.train.trainer`), resuming
(:mod:`nmtkit.train.resume`) and checkpoints (:mod:`nmtkit.train.checkpoints`) all read and write
the same things (model, optimizer, schedule, loss scaler, weight average, position in the run,
log, data, options, save dir).  Held by a :class:`TrainingRun` they take the run, typed, instead
of the whole trainer; what the loop keeps for itself (signals, clocks, the display) stays in it.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from nmtkit.data.dataset import DataDir, ParallelDataset
from nmtkit.errors import NmtkitError
from nmtkit.train import distributed as distmod
from nmtkit.train.divergence import DivergenceGuard
from nmtkit.train.ema import WeightAverage
from nmtkit.train.guided import check_guided_alignment
from nmtkit.train.optim import LRSchedule, build_optimizer
from nmtkit.train.options import TrainOptions
from nmtkit.train.run_log import RunLog
from nmtkit.train.state import TrainState, seed_everything
from nmtkit.train.tensorboard import TensorBoardLog
from nmtkit.utils.amp import resolve_amp
from nmtkit.utils.heap import keep_freed_memory
from nmtkit.utils.memory import allocation_guard, model_size_hint
from nmtkit.utils.textio import refuse_linked_output


@dataclass
class TrainingRun:
    """Everything one training run reads and writes (built by :func:`build_run`)."""

    opt: TrainOptions
    console: Any  # a rich Console
    dist: distmod.DistInfo
    save_dir: Path
    data: DataDir
    train_set: ParallelDataset
    valid_set: Optional[ParallelDataset]
    device: torch.device
    model_name: str
    cfg: Any  # the model's Config
    model: Any  # a Seq2SeqModel
    ddp_model: torch.nn.Module  # the model, or its DistributedDataParallel wrapper
    optimizer: torch.optim.Optimizer
    schedule: LRSchedule
    scaler: Optional[torch.amp.GradScaler]
    ema: Optional[WeightAverage]
    amp_dtype: Optional[torch.dtype]
    run_log: RunLog
    tensorboard: TensorBoardLog
    guard: DivergenceGuard
    state: TrainState = field(default_factory=TrainState)
    #: The update checkpoint_last.pt holds (None: no file yet).
    last_checkpoint_update: Optional[int] = None
    #: (epoch, batches_done, update) of the last save, and file name -> bytes it wrote.
    saved_at: Optional[tuple[int, int, int]] = None
    written: dict[str, int] = field(default_factory=dict)
    _train_fingerprint: Optional[dict] = None

    def log(self, record: dict) -> None:
        """Append ``record`` to train_log.jsonl and the TensorBoard curves (main process only)."""
        self.run_log.append(record)
        self.tensorboard.record(record)

    def train_data_fingerprint(self) -> dict:
        """:func:`data_fingerprint` of the training split, computed once (saved in every
        checkpoint; resuming compares it)."""
        if self._train_fingerprint is None:
            self._train_fingerprint = data_fingerprint(self.train_set)
        return self._train_fingerprint


def data_fingerprint(train_set: ParallelDataset) -> dict:
    """Sentence and token counts and a hash of the sentence lengths of a split: cheap, and
    different for any other corpus in practice."""
    src, tgt = np.asarray(train_set.src_sizes, dtype=np.int64), np.asarray(train_set.tgt_sizes, dtype=np.int64)
    digest = hashlib.sha1(src.tobytes() + tgt.tobytes()).hexdigest()[:16]
    return {"sentences": int(len(src)), "tokens": int(src.sum() + tgt.sum()), "sizes_sha1": digest}


def build_run(opt: TrainOptions, model_overrides: dict[str, Any], console: Any, dist: distmod.DistInfo) -> TrainingRun:
    """The run ``opt`` describes: save dir checked, data loaded, model built on its device, and
    the optimizer, schedule, scaler, weight average and logs around it (a fresh state; resuming
    loads a checkpoint into it).  Refusals that need the data, the device or the model are made
    here; the options' own are :meth:`TrainOptions.validate`'s."""
    from nmtkit.models import registry

    opt.validate(distributed=dist.enabled)
    save_dir = Path(opt.save_dir)
    _check_save_dir(save_dir)
    data, train_set, valid_set = _load_data(opt, console, dist)
    device = _device(opt, dist)
    model_name, cfg = registry.resolve_config(opt.arch, model_overrides)
    seed_everything(opt.seed)
    with allocation_guard(f"building {opt.arch} on {device} ({model_size_hint(cfg)})"):
        model = registry.build_model(model_name, cfg, data.src_dict, data.tgt_dict).to(device)
    _use_cuda_graphs(opt, model, model_name, device)
    _check_lengths_fit(model, data.path, {opt.train_subset: train_set, opt.valid_subset: valid_set})
    check_guided_alignment(opt.guided_alignment_weight, opt.arch, model, train_set.alignments is not None,
                           f"{data.path} has no alignments for split {opt.train_subset!r}")
    optimizer = build_optimizer(opt.optimizer, model.parameters(), opt.lr, opt.adam_betas)
    schedule = LRSchedule(opt.lr_schedule, opt.halve_after, opt.lr_shrink, opt.plateau_patience, opt.min_lr,
                          opt.anneal_fraction, base_lr=optimizer.param_groups[0]["lr"], warmup_updates=opt.warmup_updates)
    amp_dtype = resolve_amp(opt.amp, device, training=True)
    ddp_model: torch.nn.Module = model
    if dist.enabled:
        from torch.nn.parallel import DistributedDataParallel

        ddp_model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    return TrainingRun(
        opt=opt, console=console, dist=dist, save_dir=save_dir, data=data, train_set=train_set, valid_set=valid_set,
        device=device, model_name=model_name, cfg=cfg, model=model, ddp_model=ddp_model, optimizer=optimizer,
        schedule=schedule, scaler=torch.amp.GradScaler("cuda") if amp_dtype == torch.float16 else None,
        ema=WeightAverage(model, opt.ema_decay) if opt.ema_decay > 0 else None, amp_dtype=amp_dtype,
        run_log=RunLog(save_dir / "train_log.jsonl", enabled=dist.is_main),
        tensorboard=TensorBoardLog(opt.tensorboard_logdir, enabled=dist.is_main),  # the same records, as curves
        guard=DivergenceGuard(opt.max_nonfinite_updates))


def _check_lengths_fit(model: Any, data_path: Path, splits: dict[str, Optional[ParallelDataset]]) -> None:
    """A model with bounded positions (learned positions) fails on a longer sentence: say so now,
    naming the split, rather than at the batch that holds it (for validation, after an epoch)."""
    for side, bound in (("source", model.max_source_len()), ("target", model.max_target_len())):
        for name, split in splits.items():
            if bound is None or split is None or len(split) == 0:
                continue
            longest = int(max(split.src_sizes if side == "source" else split.tgt_sizes)) - 1  # without </s>
            if longest > bound:
                raise NmtkitError(f"{data_path}: split {name!r} has a {side} sentence of {longest} pieces, more than the "
                                  f"model's {bound} positions (raise --max-positions, or preprocess with a lower --max-len)")


def _check_save_dir(save_dir: Path) -> None:
    """The files training replaces: found now, not when the first epoch ends; never through a link."""
    for name in ("checkpoint_last.pt", "checkpoint_best.pt", "train_log.jsonl", "learning_curve.png"):
        if (save_dir / name).is_dir():
            raise NmtkitError(f"{save_dir / name} is a directory, where training writes a file")
    for path in [save_dir / "train_log.jsonl", save_dir / "learning_curve.png", *sorted(save_dir.glob("checkpoint*.pt"))]:
        refuse_linked_output(path, appended=path.name == "train_log.jsonl")


def _load_data(opt: TrainOptions, console: Any, dist: distmod.DistInfo
               ) -> tuple[DataDir, ParallelDataset, Optional[ParallelDataset]]:
    data = DataDir(opt.data)
    train_set = data.load_split(opt.train_subset)
    valid_split = data.validation_split(opt.valid_subset)  # an unknown name is an error
    valid_set = data.load_split(valid_split) if valid_split else None
    if opt.eval_bleu and valid_set is not None:  # its references: missing or short, say so now, not after an epoch
        valid_set.tokens_text(data.tgt_lang)
    if valid_set is None and dist.is_main:
        idle = [flag for flag, on in (("--patience", opt.patience > 0), ("--lr-schedule plateau", opt.lr_schedule == "plateau"),
                                      ("--eval-bleu", opt.eval_bleu),
                                      ("--validate-interval-updates", opt.validate_interval_updates > 0)) if on]
        if idle:  # each follows the validation scores, so without them it does nothing
            console.print(f"[yellow]warning:[/yellow] {', '.join(idle)} need a validation split, and there is none "
                          f"({data.path} has no valid split, or --valid-subset none): "
                          f"{'they do' if len(idle) > 1 else 'it does'} nothing in this run")
    return data, train_set, valid_set


def _device(opt: TrainOptions, dist: distmod.DistInfo) -> torch.device:
    """The run's device (a rank's own GPU under torchrun), its threads and CPU heap set."""
    from nmtkit.utils.device import parse_device

    device = parse_device(opt.device)
    if device.type == "cuda" and dist.enabled:
        device = torch.device("cuda", dist.local_rank)
    if opt.threads > 0:
        torch.set_num_threads(opt.threads)
    if device.type == "cpu":
        keep_freed_memory()  # big per-step tensors reuse memory instead of page-faulting afresh
    return device


def _use_cuda_graphs(opt: TrainOptions, model: Any, model_name: str, device: torch.device) -> None:
    """``--cuda-graphs``: the decoder's step loop replayed as CUDA graphs, where the device and model allow."""
    if not opt.cuda_graphs:
        return
    if device.type != "cuda":
        raise NmtkitError(f"--cuda-graphs needs a CUDA device (this run is on {device})")
    if "train" not in model.cuda_graph_support:
        raise NmtkitError(f"--cuda-graphs replays a recurrent decoder's step loop; {opt.arch} ({model_name}) "
                          "has none (it trains all target positions at once): train without --cuda-graphs")
    from nmtkit.models.loop_graphs import LoopGraphs

    model.loop_graphs = LoopGraphs()
