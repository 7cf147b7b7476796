"""How to train: every option of ``nmtkit-train`` that is not a model option, and how the
command line, the preset's training defaults and the built-in defaults combine."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from nmtkit.errors import NmtkitError
from nmtkit.train.guided import GUIDED_LOSSES
from nmtkit.train.optim import OPTIMIZERS, SCHEDULES


@dataclass(frozen=True)
class Flag:
    """How ``nmtkit-train`` offers a training option (:mod:`nmtkit.cli.train_options` makes the
    click option from it): its help, and the range or choices its type checks.  The type itself
    is the default's (int, float, str, bool; a pair for ``nargs=2``)."""

    help: str = ""
    lo: Optional[float] = None  # the smallest value (``lo_open``: excluded)
    hi: Optional[float] = None  # the largest value (``hi_open``: excluded)
    lo_open: bool = False
    hi_open: bool = False
    choices: tuple[str, ...] = ()
    #: Unset on the command line (None): the ``--arch`` preset's value, else the default (the
    #: help says both; :data:`PRESET_TRAIN_OPTIONS`).
    preset: bool = False
    name: str = ""  # the flag when it is not ``--field-name`` (a bool ``--no-x`` turns the option off)
    metavar: Optional[str] = None
    nargs: int = 1
    kind: str = ""  # "dir": a directory path; "seed", "beam": the command line's own types of those


def option(default: Any, help: str = "", **flag: Any) -> Any:  # noqa: A002 - click's name
    """A training option with its command-line flag (:class:`Flag`), declared once, here."""
    return field(default=default, metadata={"flag": Flag(help=help, **flag)})


@dataclass
class TrainOptions:
    """Everything about *how* to train (the model's options live in its Config).  Each field
    with a :class:`Flag` is a flag of ``nmtkit-train`` (its default, help and range from here);
    the others (the data, ``--arch``, batching, device) are declared by the command."""

    data: str
    save_dir: str = option("checkpoints", kind="dir")
    arch: str = "luong_tiny"
    max_tokens: Optional[int] = 4000
    batch_size: Optional[int] = None
    #: Unset (None on the command line): 10, or no limit when --max-update or --stop-time-hours sets
    #: the run's length (:func:`default_max_epoch`).
    max_epoch: int = option(10, "[10; no limit with --max-update or --stop-time-hours] Stop after this many epochs "
                            "(0: no limit).", lo=0, preset=True)
    max_update: int = option(0, "Stop after this many updates (0: no limit).", lo=0)
    stop_time_hours: float = option(
        0.0, "Stop (writing checkpoint_last.pt) after this much wall time of training, validation included, in all "
        "runs of --save-dir (0: no limit): a resumed run gets the rest; raise it to train further. Checked after each "
        "update and validation: a run overshoots by at most one update and one validation.", lo=0)
    seed: int = option(1, kind="seed")
    optimizer: str = option("adam", "[adam; the paper presets: theirs]", choices=OPTIMIZERS, preset=True)
    lr: Optional[float] = option(None, "Learning rate [sgd 1.0, adadelta 1.0, adam 0.001].", lo=0, lo_open=True,
                                 preset=True)
    lr_schedule: str = option(
        "fixed", "[fixed] halving: Luong et al.'s halve-every-epoch after --halve-after; plateau: shrink when the "
        "--best-checkpoint-metric stalls; anneal: hold, then fall linearly to --min-lr over the last --anneal-fraction "
        "of the budget (--stop-time-hours, --max-update or --max-epoch, whichever ends first).",
        choices=SCHEDULES, preset=True)
    halve_after: int = option(5, "[5] Epoch K after which the lr halves every epoch.", lo=0, preset=True)
    lr_shrink: float = option(0.5, lo=0, hi=1, lo_open=True)
    plateau_patience: int = option(0, lo=0)
    min_lr: float = option(0.0, lo=0)
    anneal_fraction: float = option(0.2, "anneal: the final share of the run's budget over which the lr falls.",
                                    lo=0, hi=1, lo_open=True)
    #: inverse_sqrt: updates over which the lr rises linearly to --lr.
    warmup_updates: int = option(4000, "[4000; Transformer presets: theirs] inverse_sqrt: updates of the linear lr "
                                 "warm-up.", lo=1, preset=True)
    #: Adam's (β1, β2); the Transformer presets use the paper's (0.9, 0.98).
    adam_betas: tuple[float, float] = option((0.9, 0.999), "[0.9 0.999; Transformer presets 0.9 0.98] Adam's beta1 "
                                             "beta2.", lo=0, hi=1, hi_open=True, nargs=2, preset=True)
    clip_norm: float = option(5.0, "[5; Bahdanau presets 1] Gradient-norm clipping (0: off).", lo=0, preset=True)
    label_smoothing: float = option(0.0, lo=0, hi=1, hi_open=True)
    patience: int = option(0, "Early stopping: epochs without validation improvement (0: off).", lo=0)
    validate_interval_updates: int = option(0, "Also validate every N updates.", lo=0)
    save_interval_updates: int = option(0, "Also write checkpoint_last.pt every N updates.", lo=0)
    keep_epoch_checkpoints: bool = option(True, "Do not keep checkpoint{epoch}.pt files.", name="--no-epoch-checkpoints")
    log_interval: int = option(50, lo=1)
    train_subset: str = option("train")
    valid_subset: str = option("valid")
    device: str = "auto"
    amp: str = "auto"  # auto|none|bf16|fp16
    threads: int = 0
    #: Replay the decoder's step loop as CUDA graphs (nmtkit.models.loop_graphs); CUDA only.
    cuda_graphs: bool = option(
        False, "On CUDA, replay each batch shape's decoder step loop (forward and backward) as a CUDA graph, batches "
        "padded to buckets (Luong with input feeding, RNNsearch; bench/README.md, \"GPU\").")
    no_progress: bool = option(False, "No progress display or log lines.")
    #: Accumulate the gradients of this many batches per update.
    update_freq: int = option(1, "Accumulate gradients over N batches per update.", lo=1)
    #: token: the loss is averaged over target tokens; sentence: summed over each sentence and
    #: averaged over sentences (both papers; their clipping thresholds assume it).
    loss_norm: str = option("token", "[token; paper presets sentence] Average the loss over target tokens, or sum it "
                            "per sentence and average over sentences (the papers).", choices=("token", "sentence"),
                            preset=True)
    #: Translate the valid split after each validation and log cased detokenized BLEU.
    eval_bleu: bool = option(False, "After each validation, translate the valid split and log cased detokenized BLEU.")
    eval_bleu_beam: int = option(5, kind="beam")
    eval_bleu_max_sentences: int = option(0, "Translate only the first N valid sentences (0: all).", lo=0)
    #: loss | bleu: what checkpoint_best.pt, --patience and the plateau schedule follow.
    best_checkpoint_metric: str = option("loss", "What checkpoint_best.pt, --patience and the plateau schedule follow "
                                         "(bleu needs --eval-bleu).", choices=("loss", "bleu"))
    #: Keep only the last N checkpoint{epoch}.pt files (0: keep all); 5 leaves nmtkit-average --last 5 its inputs.
    keep_last: int = option(5, "Keep only the last N checkpoint{epoch}.pt files (0: all); enough for nmtkit-average "
                            "--last 5. Epoch and best checkpoints hold the weights only; checkpoint_last.pt also the "
                            "optimizer state.", lo=0)
    #: λ of guided alignment (0: off): adds λ times an attention-vs-links loss (nmtkit.train.guided);
    #: needs data preprocessed with --alignfile and a model with attention.
    guided_alignment_weight: float = option(0.0, "Guided alignment: add this weight times a loss between the attention "
                                            "and the links stored by nmtkit-preprocess --alignfile (0: off).", lo=0)
    #: ce | mse (see nmtkit.train.guided).
    guided_alignment_loss: str = option("ce", "Guided-alignment loss: cross-entropy against the row-normalised links, "
                                        "or squared error.", choices=GUIDED_LOSSES)
    #: Stop (exit 1) after more than this many consecutive updates with a non-finite loss or
    #: gradient norm (0: at the first); see nmtkit.train.divergence.
    max_nonfinite_updates: int = option(10, "Divergence: stop (exit 1) after more than N consecutive updates with a "
                                        "NaN/inf loss or gradient norm (0: at the first). Such updates are skipped and "
                                        "no checkpoint is written while they last; fp16 loss-scale overflows do not "
                                        "count.", lo=0)
    #: Keep an exponential moving average of the weights with this decay (0: off); validation and
    #: checkpoints use it (nmtkit.train.ema).
    ema_decay: float = option(0.0, "Average the weights over the updates (exponential moving average with this decay, "
                              "e.g. 0.9999; 0: off). Validation, --eval-bleu and the checkpoints' weights use the "
                              "average, as Marian's --exponential-smoothing does; training goes on from the raw "
                              "weights.", lo=0, hi=1, hi_open=True)
    #: Also write the training curves as TensorBoard event files here (nmtkit.train.tensorboard).
    tensorboard_logdir: Optional[str] = option(
        None, "Also write loss, perplexity, lr, gradient norm, tokens/s and validation loss/BLEU as TensorBoard event "
        "files here (pip install 'nmtkit[tensorboard]'); train_log.jsonl is written as always.", kind="dir",
        metavar="DIR")

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


def flag_of(name: str) -> Optional[Flag]:
    """The command-line flag of training option ``name`` (None: the command declares it itself)."""
    return TrainOptions.__dataclass_fields__[name].metadata.get("flag")
#: Training options a preset may set (``register_arch(..., train_defaults=...)``).
PRESET_TRAIN_OPTIONS = ("optimizer", "lr", "lr_schedule", "halve_after", "clip_norm", "loss_norm", "warmup_updates",
                        "adam_betas")


#: Preset training options that only make sense with the preset's own optimiser.
OPTIMIZER_BOUND_OPTIONS = ("lr", "lr_schedule", "halve_after", "warmup_updates", "adam_betas")


def default_max_epoch(max_update: int, stop_time_hours: float) -> int:
    """--max-epoch when it is not given: no limit (0) when --max-update or --stop-time-hours says how
    long the run is, else 10.  Why: ``--max-update 8000`` on Multi30k stopped silently at epoch 10,
    after about 600 updates, in a newcomer's Transformer run; fairseq and OpenNMT-py stop at the
    update count they are given."""
    return 0 if max_update > 0 or stop_time_hours > 0 else TrainOptions.max_epoch


def resolve_train_options(data: str, given: dict[str, Any]) -> TrainOptions:
    """Command-line values -> :class:`TrainOptions`.  Options left unset (None) among
    :data:`PRESET_TRAIN_OPTIONS` take the preset's training default (the papers' optimiser,
    clipping, loss normalisation), else the :class:`TrainOptions` default."""
    from nmtkit.models import registry

    values = dict(given)
    if values.get("max_epoch") is None:
        values["max_epoch"] = default_max_epoch(values.get("max_update") or 0, values.get("stop_time_hours") or 0.0)
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
