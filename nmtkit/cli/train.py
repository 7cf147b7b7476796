"""``nmtkit-train DATA_DIR``: train a registered model on a preprocessed data directory."""
from __future__ import annotations

import sys

import click

from nmtkit.cli.common import (SEED, AtLeast, FiniteFloat, NmtkitCommand, OneLineUsageError, batching_options, console,
                               device_options, handle_errors, parse_device,
                               run_console_script)
from nmtkit.cli.model_options import model_options, pop_model_overrides
from nmtkit.generate.search_options import LIMITS as SEARCH_LIMITS
from nmtkit.utils.overlap import refuse_outputs_over_inputs
from nmtkit.utils.signals import interrupt_ends_command

PROG = "nmtkit-train"

with interrupt_ends_command(PROG):  # torch and every model: the option declarations below need them
    import numpy  # noqa: F401  first: torch's C start-up imports it and swallows any error, an interrupt too
    import nmtkit.models  # noqa: F401
    from nmtkit.train.distributed import DEFAULT_DIST_TIMEOUT_S
    from nmtkit.train.optim import SCHEDULES

_ALL_ARCHS = "\0all"  # --list-archs without a NAME


def _short(text: str, limit: int) -> str:
    """``text`` without its final period, cut at a word boundary to at most ``limit`` characters."""
    text = text.rstrip(".")
    if len(text) <= limit:
        return text
    return text[: text.rfind(" ", 0, limit - 1)].rstrip(",;:") + "…"


def list_archs_and_exit(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """``--list-archs``: one line per preset; ``--list-archs NAME``: that preset's full settings."""
    if value is None or ctx.resilient_parsing:
        return
    from nmtkit.models import registry

    archs = registry.list_archs()
    if value == _ALL_ARCHS:
        width = max(map(len, archs))
        mwidth = max(len(model) for model, _ in archs.values())
        for arch, (model, _) in archs.items():
            click.echo(f"{arch:<{width}}  {model:<{mwidth}}  {_short(registry.arch_description(arch), 100)}")
        ctx.exit(0)
    if value not in archs:
        import difflib

        close = difflib.get_close_matches(value, archs, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else " (--list-archs lists them)"
        raise OneLineUsageError(f"--list-archs: no preset named {value!r}{hint}", PROG, ctx)
    model, opts = archs[value]
    click.echo(f"{value}  (model {model})")
    desc = registry.arch_description(value)
    if desc:
        click.echo(desc)
    for key, val in opts.items():
        click.echo(f"  {key} = {val}")
    for key, val in registry.train_defaults(value).items():
        click.echo(f"  training: --{key.replace('_', '-')} {val}")
    ctx.exit(0)


@click.command("train", cls=NmtkitCommand, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.argument("data", type=click.Path())
@click.option("--list-archs", is_flag=False, flag_value=_ALL_ARCHS, default=None, metavar="[NAME]", expose_value=False,
              is_eager=True, callback=list_archs_and_exit,
              help="Print every preset, one line each, and exit; with NAME, that preset's full settings.")
@click.option("--arch", "-a", required=True,
              help="Architecture preset, required (--list-archs lists them): e.g. luong_small or rnnsearch_small on a "
                   "CPU, the paper presets on a GPU; the *_tiny presets are for tests.")
@click.option("--save-dir", default="checkpoints", show_default=True, type=click.Path(file_okay=False))
@batching_options(default_batch_size=None, max_tokens_default="4000 without --batch-size")
@click.option("--max-epoch", default=10, show_default=True, type=click.IntRange(min=0), help="Stop after this many epochs (0: no limit).")
@click.option("--max-update", default=0, show_default=True, type=click.IntRange(min=0), help="Stop after this many updates (0: no limit).")
@click.option("--stop-time-hours", default=0.0, show_default=True, type=FiniteFloat(min=0), help="Stop (writing checkpoint_last.pt) after this much wall time of training, validation included, in all runs of --save-dir (0: no limit): a resumed run gets the rest; raise it to train further. Checked after each update and validation: a run overshoots by at most one update and one validation.")
@click.option("--seed", default=1, show_default=True, type=SEED)
@click.option("--optimizer", type=click.Choice(["sgd", "adadelta", "adam"]), help="[adam; the paper presets: theirs]")
@click.option("--lr", type=FiniteFloat(min=0, min_open=True), help="Learning rate [sgd 1.0, adadelta 1.0, adam 0.001].")
@click.option("--lr-schedule", type=click.Choice(SCHEDULES),
              help="[fixed] halving: Luong et al.'s halve-every-epoch after --halve-after; plateau: shrink when the --best-checkpoint-metric stalls; "
                   "anneal: hold, then fall linearly to --min-lr over the last --anneal-fraction of the budget (--stop-time-hours, --max-update or --max-epoch, whichever ends first).")
@click.option("--halve-after", type=click.IntRange(min=0), help="[5] Epoch K after which the lr halves every epoch.")
@click.option("--lr-shrink", default=0.5, show_default=True, type=FiniteFloat(0, 1, min_open=True))
@click.option("--plateau-patience", default=0, show_default=True, type=click.IntRange(min=0))
@click.option("--warmup-updates", type=click.IntRange(min=1),
              help="[4000; Transformer presets: theirs] inverse_sqrt: updates of the linear lr warm-up.")
@click.option("--adam-betas", nargs=2, type=FiniteFloat(0, 1, max_open=True), default=None,
              help="[0.9 0.999; Transformer presets 0.9 0.98] Adam's beta1 beta2.")
@click.option("--min-lr", default=0.0, show_default=True, type=FiniteFloat(min=0))
@click.option("--anneal-fraction", default=0.2, show_default=True, type=FiniteFloat(0, 1, min_open=True),
              help="anneal: the final share of the run's budget over which the lr falls.")
@click.option("--clip-norm", type=FiniteFloat(min=0), help="[5; Bahdanau presets 1] Gradient-norm clipping (0: off).")
@click.option("--loss-norm", type=click.Choice(["token", "sentence"]), help="[token; paper presets sentence] Average the loss over target tokens, or sum it per sentence and average over sentences (the papers).")
@click.option("--update-freq", default=1, show_default=True, type=click.IntRange(min=1), help="Accumulate gradients over N batches per update.")
@click.option("--eval-bleu", is_flag=True, help="After each validation, translate the valid split and log cased detokenized BLEU.")
@click.option("--eval-bleu-beam", default=5, show_default=True, type=AtLeast(1, SEARCH_LIMITS["--beam"]))
@click.option("--eval-bleu-max-sentences", default=0, show_default=True, type=click.IntRange(min=0), help="Translate only the first N valid sentences (0: all).")
@click.option("--best-checkpoint-metric", type=click.Choice(["loss", "bleu"]), default="loss", show_default=True, help="What checkpoint_best.pt, --patience and the plateau schedule follow (bleu needs --eval-bleu).")
@click.option("--ema-decay", default=0.0, show_default=True, type=FiniteFloat(0, 1, max_open=True),
              help="Average the weights over the updates (exponential moving average with this decay, e.g. 0.9999; "
                   "0: off). Validation, --eval-bleu and the checkpoints' weights use the average, as Marian's "
                   "--exponential-smoothing does; training goes on from the raw weights.")
@click.option("--keep-last", default=5, show_default=True, type=click.IntRange(min=0),
              help="Keep only the last N checkpoint{epoch}.pt files (0: all); enough for nmtkit-average --last 5. "
                   "Epoch and best checkpoints hold the weights only; checkpoint_last.pt also the optimizer state.")
@click.option("--guided-alignment-weight", default=0.0, show_default=True, type=FiniteFloat(min=0),
              help="Guided alignment: add this weight times a loss between the attention and the links stored by "
                   "nmtkit-preprocess --alignfile (0: off).")
@click.option("--guided-alignment-loss", type=click.Choice(["ce", "mse"]), default="ce", show_default=True,
              help="Guided-alignment loss: cross-entropy against the row-normalised links, or squared error.")
@click.option("--max-nonfinite-updates", default=10, show_default=True, type=click.IntRange(min=0),
              help="Divergence: stop (exit 1) after more than N consecutive updates with a NaN/inf loss or gradient "
                   "norm (0: at the first). Such updates are skipped and no checkpoint is written while they last; "
                   "fp16 loss-scale overflows do not count.")
@click.option("--label-smoothing", default=0.0, show_default=True, type=FiniteFloat(0, 1, max_open=True))
@click.option("--patience", default=0, show_default=True, type=click.IntRange(min=0), help="Early stopping: epochs without validation improvement (0: off).")
@click.option("--validate-interval-updates", default=0, show_default=True, type=click.IntRange(min=0), help="Also validate every N updates.")
@click.option("--save-interval-updates", default=0, show_default=True, type=click.IntRange(min=0), help="Also write checkpoint_last.pt every N updates.")
@click.option("--no-epoch-checkpoints", is_flag=True, help="Do not keep checkpoint{epoch}.pt files.")
@click.option("--log-interval", default=50, show_default=True, type=click.IntRange(min=1))
@click.option("--train-subset", default="train", show_default=True)
@click.option("--valid-subset", default="valid", show_default=True)
@device_options()
@click.option("--cuda-graphs", is_flag=True, help="On CUDA, replay each batch shape's decoder step loop (forward and "
              "backward) as a CUDA graph, batches padded to buckets (Luong with input feeding, RNNsearch; "
              "bench/README.md, \"GPU\").")
@click.option("--no-progress", is_flag=True, help="No progress display or log lines.")
@click.option("--dist-timeout", default=DEFAULT_DIST_TIMEOUT_S, show_default=True, type=FiniteFloat(min=1), metavar="SECONDS",
              help="Under torchrun: how long each process waits for all of WORLD_SIZE to join (then one error line), "
                   "and for the others in each collective operation.")
@click.option("--tensorboard-logdir", type=click.Path(file_okay=False), metavar="DIR",
              help="Also write loss, perplexity, lr, gradient norm, tokens/s and validation loss/BLEU as TensorBoard "
                   "event files here (pip install 'nmtkit[tensorboard]'); train_log.jsonl is written as always.")
@click.option("--reset-optimizer", is_flag=True, help="Resume with a fresh optimizer (allows another --optimizer).")
@click.option("--reset-lr-scheduler", is_flag=True, help="Resume with a fresh lr schedule, lr back at --lr (allows another --lr-schedule).")
@click.option("--reset-dataloader", is_flag=True, help="Resume at the first batch of the current epoch (allows other batching, --seed or data).")
@model_options()
@handle_errors(PROG)
def command(data: str, **kw) -> None:  # noqa: ANN003
    """Train a model on DATA (a directory written by nmtkit-preprocess).

    Rerunning the same command on a --save-dir holding checkpoint_last.pt resumes it.

    \b
    Examples:
      nmtkit-train data/ende --arch luong_small --max-tokens 4000 --save-dir ckpt/ende
      nmtkit-train data/ende --arch rnnsearch_small --stop-time-hours 2 --eval-bleu --save-dir ckpt/rs
      nmtkit-train --config ckpt/ende/config.yaml --save-dir ckpt/again    # the same run again
    """
    from nmtkit.train import distributed as distmod
    from nmtkit.train.lock import SaveDirLock
    from nmtkit.train.options import resolve_train_options
    from nmtkit.train.trainer import StopTraining, Trainer

    from nmtkit.data.dataset import is_data_dir
    from nmtkit.evaluate.metrics import perplexity
    from nmtkit.models import registry

    if is_data_dir(data):  # else the trainer says what DATA is not, before it writes anything
        refuse_outputs_over_inputs([("--save-dir", kw["save_dir"])], [("DATA", data)])
    resets = {k: kw.pop(k) for k in ("reset_optimizer", "reset_lr_scheduler", "reset_dataloader")}
    dist_timeout = kw.pop("dist_timeout")  # how this launch waits, not an option of the run (not in checkpoints)
    overrides = pop_model_overrides(kw)
    kw["keep_epoch_checkpoints"] = not kw.pop("no_epoch_checkpoints")
    if kw["max_tokens"] is None and kw["batch_size"] is None:
        kw["max_tokens"] = 4000
    opt = resolve_train_options(data, kw)
    registry.resolve_config(opt.arch, overrides)  # the model options' one check (Config.validate), before any data is read
    parse_device(opt.device)  # a bad --device fails before any data is read
    dist = distmod.init_distributed("cuda" if opt.device.startswith("cuda") or (opt.device == "auto" and _cuda()) else "cpu",
                                    dist_timeout, announce=console.print)
    lock = SaveDirLock(opt.save_dir, warn=lambda m: console.print(f"[yellow]warning:[/yellow] {m}"), enabled=dist.is_main)
    try:
        trainer = Trainer(opt, overrides, console, dist)
        lock.acquire()  # one trainer per --save-dir; released below, also on errors and signals
        if dist.is_main:
            _write_config(opt.save_dir)
        resumed = trainer.resume_if_possible(**resets)
        if dist.is_main:
            m = trainer.model
            if resumed:
                console.print(resumed)
            else:
                console.print(f"training {opt.arch} ({m.model_name}, {m.num_parameters():,} parameters) on {trainer.device}"
                              f"{f' x{dist.world_size} processes' if dist.enabled else ''}; checkpoints in {opt.save_dir}")
        try:
            state = trainer.train()
        except StopTraining as exc:
            console.print(str(exc))
            return
        except KeyboardInterrupt:
            sys.exit(130)
        if dist.is_main:
            best = (f", best valid loss {state.best_valid_loss:.3f} (ppl {perplexity(-state.best_valid_loss, 1):.2f})"
                    if state.best_valid_loss is not None else "")  # a loss over ~710 gives ppl inf, not an OverflowError
            console.print(f"done: {state.update} updates, {state.epochs_done} epochs{best}")
    finally:
        lock.release()
        distmod.cleanup(dist)


def _write_config(save_dir: str) -> None:
    """``SAVE_DIR/config.yaml``: this run's effective options, which ``--config`` reads back, so
    that a run can be repeated or varied from its own record."""
    from pathlib import Path

    from nmtkit.cli.common import EFFECTIVE_CONFIG, dump_config
    from nmtkit.utils.textio import atomic_write, ensure_dir

    from nmtkit.train.run_log import RunLog
    from nmtkit.utils.textio import refuse_linked_output

    ctx = click.get_current_context(silent=True)
    config = ctx.meta.get(EFFECTIVE_CONFIG) if ctx is not None else None
    if config is None:  # called from Python, not through click
        return
    target = Path(save_dir) / "config.yaml"
    refuse_linked_output(target)  # rewritten by every run: never through a link
    RunLog(Path(save_dir) / "train_log.jsonl").check()  # a log the resume would refuse: before anything is written
    ensure_dir(Path(save_dir))
    with atomic_write(target) as fh:
        fh.write(dump_config(config))


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":  # python -m nmtkit.cli.train (the console script starts in nmtkit.launch)
    run_console_script(command)
