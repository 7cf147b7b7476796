"""How to train: every option of ``nmtkit-train`` that is not a model option, and how the
command line, the preset's training defaults and the built-in defaults combine."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from nmtkit.errors import NmtkitError
from nmtkit.train.guided import GUIDED_LOSSES


@dataclass
class TrainOptions:
    """Everything about *how* to train (the model's options live in its Config)."""

    data: str
    save_dir: str = "checkpoints"
    arch: str = "luong_tiny"
    max_tokens: Optional[int] = 4000
    batch_size: Optional[int] = None
    max_epoch: int = 10
    max_update: int = 0
    stop_time_hours: float = 0.0
    seed: int = 1
    optimizer: str = "adam"
    lr: Optional[float] = None
    lr_schedule: str = "fixed"
    halve_after: int = 5
    lr_shrink: float = 0.5
    plateau_patience: int = 0
    min_lr: float = 0.0
    anneal_fraction: float = 0.2
    #: inverse_sqrt: updates over which the lr rises linearly to --lr.
    warmup_updates: int = 4000
    #: Adam's (β1, β2); the Transformer presets use the paper's (0.9, 0.98).
    adam_betas: tuple[float, float] = (0.9, 0.999)
    clip_norm: float = 5.0
    label_smoothing: float = 0.0
    patience: int = 0
    validate_interval_updates: int = 0
    save_interval_updates: int = 0
    keep_epoch_checkpoints: bool = True
    log_interval: int = 50
    train_subset: str = "train"
    valid_subset: str = "valid"
    device: str = "auto"
    amp: str = "auto"  # auto|none|bf16|fp16
    threads: int = 0
    #: Replay the decoder's step loop as CUDA graphs (nmtkit.models.loop_graphs); CUDA only.
    cuda_graphs: bool = False
    no_progress: bool = False
    #: Accumulate the gradients of this many batches per update.
    update_freq: int = 1
    #: token: the loss is averaged over target tokens; sentence: summed over each sentence and
    #: averaged over sentences (both papers; their clipping thresholds assume it).
    loss_norm: str = "token"
    #: Translate the valid split after each validation and log cased detokenized BLEU.
    eval_bleu: bool = False
    eval_bleu_beam: int = 5
    eval_bleu_max_sentences: int = 0  # 0: the whole split
    #: loss | bleu: what checkpoint_best.pt, --patience and the plateau schedule follow.
    best_checkpoint_metric: str = "loss"
    #: Keep only the last N checkpoint{epoch}.pt files (0: keep all); 5 leaves nmtkit-average --last 5 its inputs.
    keep_last: int = 5
    #: λ of guided alignment (0: off): adds λ times an attention-vs-links loss (nmtkit.train.guided);
    #: needs data preprocessed with --alignfile and a model with attention.
    guided_alignment_weight: float = 0.0
    #: ce | mse (see nmtkit.train.guided).
    guided_alignment_loss: str = "ce"
    #: Stop (exit 1) after more than this many consecutive updates with a non-finite loss or
    #: gradient norm (0: at the first); see nmtkit.train.divergence.
    max_nonfinite_updates: int = 10
    #: Keep an exponential moving average of the weights with this decay (0: off); validation and
    #: checkpoints use it (nmtkit.train.ema).
    ema_decay: float = 0.0
    #: Also write the training curves as TensorBoard event files here (nmtkit.train.tensorboard).
    tensorboard_logdir: Optional[str] = None

    def validate(self, distributed: bool = False) -> None:
        """One-line errors for option combinations no single click type can check
        (``distributed``: the run has several processes, under torchrun)."""
        if self.max_tokens is None and self.batch_size is None:
            raise NmtkitError("give --max-tokens or --batch-size")
        if self.cuda_graphs and distributed:  # DistributedDataParallel's hooks with graphed loops are untested on several GPUs
            raise NmtkitError("--cuda-graphs is for one process: not with distributed training (torchrun) yet")
        if self.cuda_graphs and self.update_freq > 1:  # autograd may adopt a graph's gradient buffer as .grad, which its next replay overwrites
            raise NmtkitError("--cuda-graphs needs one batch per update: not with --update-freq above 1 "
                              "(raise --max-tokens instead)")
        if self.loss_norm not in LOSS_NORMS:
            raise NmtkitError(f"--loss-norm must be one of {', '.join(LOSS_NORMS)}, got {self.loss_norm!r}")
        if self.best_checkpoint_metric not in BEST_METRICS:
            raise NmtkitError(f"--best-checkpoint-metric must be one of {', '.join(BEST_METRICS)}, got {self.best_checkpoint_metric!r}")
        if self.best_checkpoint_metric == "bleu" and not self.eval_bleu:
            raise NmtkitError("--best-checkpoint-metric bleu needs --eval-bleu")
        if self.guided_alignment_loss not in GUIDED_LOSSES:
            raise NmtkitError(f"--guided-alignment-loss must be one of {', '.join(GUIDED_LOSSES)}, got {self.guided_alignment_loss!r}")
        if not 0.0 <= self.ema_decay < 1.0:
            raise NmtkitError(f"--ema-decay must be in [0, 1), got {self.ema_decay}")
        if self.lr_schedule == "anneal" and self.max_epoch <= 0 and self.max_update <= 0 and self.stop_time_hours <= 0:
            raise NmtkitError("--lr-schedule anneal lowers the lr towards the end of the run: give --max-epoch, --max-update "
                              "or --stop-time-hours")
        if self.lr_schedule == "anneal":
            from nmtkit.train.optim import DEFAULT_LR

            lr = self.lr if self.lr is not None else DEFAULT_LR.get(self.optimizer, 0.0)
            if self.min_lr >= lr:
                raise NmtkitError(f"--lr-schedule anneal lowers the lr from {lr:g} to --min-lr, which is {self.min_lr:g}: "
                                  "give a --min-lr below --lr")
        if self.lr_schedule == "inverse_sqrt" and self.warmup_updates < 1:
            raise NmtkitError(f"--lr-schedule inverse_sqrt needs --warmup-updates of at least 1, got {self.warmup_updates}")
        if not all(0.0 <= b < 1.0 for b in self.adam_betas):
            raise NmtkitError(f"--adam-betas must both be in [0, 1), got {self.adam_betas[0]:g} {self.adam_betas[1]:g}")
        if self.guided_alignment_weight < 0:
            raise NmtkitError(f"--guided-alignment-weight must be >= 0, got {self.guided_alignment_weight}")


LOSS_NORMS = ("token", "sentence")
BEST_METRICS = ("loss", "bleu")
#: Training options a preset may set (``register_arch(..., train_defaults=...)``).
PRESET_TRAIN_OPTIONS = ("optimizer", "lr", "lr_schedule", "halve_after", "clip_norm", "loss_norm", "warmup_updates",
                        "adam_betas")


#: Preset training options that only make sense with the preset's own optimiser.
OPTIMIZER_BOUND_OPTIONS = ("lr", "lr_schedule", "halve_after", "warmup_updates", "adam_betas")


def resolve_train_options(data: str, given: dict[str, Any]) -> TrainOptions:
    """Command-line values -> :class:`TrainOptions`.  Options left unset (None) among
    :data:`PRESET_TRAIN_OPTIONS` take the preset's training default (the papers' optimiser,
    clipping, loss normalisation), else the :class:`TrainOptions` default."""
    from nmtkit.models import registry

    values = dict(given)
    preset = registry.train_defaults(values.get("arch") or TrainOptions.arch)
    if values.get("optimizer") is not None and values["optimizer"] != preset.get("optimizer", values["optimizer"]):
        # the preset's lr and schedule belong to its optimiser (SGD's lr 1.0 would wreck Adam)
        preset = {k: v for k, v in preset.items() if k not in OPTIMIZER_BOUND_OPTIONS}
    defaults = TrainOptions(data=data)
    for name in PRESET_TRAIN_OPTIONS:
        if values.get(name) is None:
            values[name] = preset.get(name, getattr(defaults, name))
    opt = TrainOptions(data=data, **values)
    opt.validate()
    return opt
