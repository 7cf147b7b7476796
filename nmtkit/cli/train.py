"""``nmtkit-train DATA_DIR``: train a registered model on a preprocessed data directory."""
from __future__ import annotations

import sys

import click

from nmtkit.cli.common import (FiniteFloat, NmtkitCommand, OneLineUsageError, batching_options, console,
                               device_options, handle_errors, parse_device,
                               run_console_script)
from nmtkit.cli.model_options import model_options, pop_model_overrides
from nmtkit.utils.overlap import refuse_outputs_over_inputs
from nmtkit.utils.signals import interrupt_ends_command

PROG = "nmtkit-train"

with interrupt_ends_command(PROG):  # torch and every model: the option declarations below need them
    import numpy  # noqa: F401  first: torch's C start-up imports it and swallows any error, an interrupt too
    import nmtkit.models  # noqa: F401
    from nmtkit.train.distributed import DEFAULT_DIST_TIMEOUT_S
    from nmtkit.cli.train_options import train_options
    from nmtkit.train.options import TrainOptions

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
@batching_options(default_batch_size=None, max_tokens_default=f"{TrainOptions.max_tokens} without --batch-size")
@train_options()
@device_options()
@click.option("--dist-timeout", default=DEFAULT_DIST_TIMEOUT_S, show_default=True, type=FiniteFloat(min=1), metavar="SECONDS",
              help="Under torchrun: how long each process waits for all of WORLD_SIZE to join (then one error line), "
                   "and for the others in each collective operation.")
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
    from nmtkit.utils.amp import precision_name

    from nmtkit.data.dataset import is_data_dir
    from nmtkit.train.display import stamp
    from nmtkit.evaluate.metrics import perplexity
    from nmtkit.models import registry

    if is_data_dir(data):  # else the trainer says what DATA is not, before it writes anything
        refuse_outputs_over_inputs([("--save-dir", kw["save_dir"])], [("DATA", data)])
    resets = {k: kw.pop(k) for k in ("reset_optimizer", "reset_lr_scheduler", "reset_dataloader")}
    dist_timeout = kw.pop("dist_timeout")  # how this launch waits, not an option of the run (not in checkpoints)
    overrides = pop_model_overrides(kw)
    if kw["max_tokens"] is None and kw["batch_size"] is None:
        kw["max_tokens"] = TrainOptions.max_tokens
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
                console.print(stamp() + resumed)
            else:
                console.print(f"{stamp()}training {opt.arch} ({m.model_name}, {m.num_parameters():,} parameters) on {trainer.device}"
                              f"{f' x{dist.world_size} processes' if dist.enabled else ''} in {precision_name(trainer.run.amp_dtype)}; "
                              f"checkpoints in {opt.save_dir}")
        try:
            state = trainer.train()
        except StopTraining as exc:
            console.print(stamp() + str(exc))
            return
        except KeyboardInterrupt:
            sys.exit(130)
        if dist.is_main:
            best = (f", best valid loss {state.best_valid_loss:.3f} (ppl {perplexity(-state.best_valid_loss, 1):.2f})"
                    if state.best_valid_loss is not None else "")  # a loss over ~710 gives ppl inf, not an OverflowError
            console.print(f"{stamp()}done: {state.update} updates, {state.epochs_done} epochs{best}")
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
