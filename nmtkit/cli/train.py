"""``nmtkit-train DATA_DIR``: train a registered model on a preprocessed data directory."""
from __future__ import annotations

import sys

import click

from nmtkit.cli.common import console, handle_errors
from nmtkit.errors import NmtkitError

PROG = "nmtkit-train"

#: Model options with their own flag (any other option: --model-opt KEY=VALUE).
MODEL_FLAGS = ("embed_dim", "hidden_size", "layers", "dropout", "attention", "score", "input_feeding",
               "source_reversal", "window", "init_scale", "cell", "maxout_size", "attention_dim")


def list_archs_and_exit(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from rich.table import Table

    from nmtkit.models import registry

    table = Table(title="nmtkit architectures (--arch)", show_lines=False)
    table.add_column("arch", style="bold")
    table.add_column("model")
    table.add_column("settings")
    for arch, (model, opts) in registry.list_archs().items():
        desc = registry.arch_description(arch)
        settings = " ".join(f"{k}={v}" for k, v in opts.items())
        table.add_row(arch, model, (desc + "\n" if desc else "") + settings)
    console.print(table)
    ctx.exit(0)


def parse_model_opts(pairs: tuple[str, ...]) -> dict:
    import json

    out = {}
    for item in pairs:
        if "=" not in item:
            raise NmtkitError(f"--model-opt expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        try:
            out[key.replace("-", "_")] = json.loads(value)
        except json.JSONDecodeError:
            out[key.replace("-", "_")] = value
    return out


@click.command("train", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.argument("data", type=click.Path())
@click.option("--list-archs", is_flag=True, expose_value=False, is_eager=True, callback=list_archs_and_exit, help="Print every preset with its settings and exit.")
@click.option("--arch", "-a", default="luong_tiny", show_default=True, help="Architecture preset (see --list-archs).")
@click.option("--save-dir", default="checkpoints", show_default=True, type=click.Path(file_okay=False))
@click.option("--max-tokens", type=int, help="Batch by padded token budget.")
@click.option("--batch-size", type=int, help="Batch by number of sentences (the papers use 128 or 80).")
@click.option("--max-epoch", default=10, show_default=True, help="Stop after this many epochs (0: no limit).")
@click.option("--max-update", default=0, show_default=True, help="Stop after this many updates (0: no limit).")
@click.option("--stop-time-hours", default=0.0, show_default=True, help="Stop (writing checkpoint_last.pt) after this much wall time in this run (0: no limit).")
@click.option("--seed", default=1, show_default=True)
@click.option("--optimizer", type=click.Choice(["sgd", "adadelta", "adam"]), default="adam", show_default=True)
@click.option("--lr", type=float, help="Learning rate [sgd 1.0, adadelta 1.0, adam 0.001].")
@click.option("--lr-schedule", type=click.Choice(["fixed", "halving", "plateau"]), default="fixed", show_default=True,
              help="halving: Luong et al.'s halve-every-epoch after --halve-after; plateau: shrink when valid loss stalls.")
@click.option("--halve-after", default=5, show_default=True, help="Epoch K after which the lr halves every epoch.")
@click.option("--lr-shrink", default=0.5, show_default=True)
@click.option("--plateau-patience", default=0, show_default=True)
@click.option("--min-lr", default=0.0, show_default=True)
@click.option("--clip-norm", default=5.0, show_default=True, help="Gradient-norm clipping (0: off).")
@click.option("--label-smoothing", default=0.0, show_default=True)
@click.option("--patience", default=0, show_default=True, help="Early stopping: epochs without validation improvement (0: off).")
@click.option("--validate-interval-updates", default=0, show_default=True, help="Also validate every N updates.")
@click.option("--save-interval-updates", default=0, show_default=True, help="Also write checkpoint_last.pt every N updates.")
@click.option("--no-epoch-checkpoints", is_flag=True, help="Do not keep checkpoint{epoch}.pt files.")
@click.option("--log-interval", default=50, show_default=True)
@click.option("--train-subset", default="train", show_default=True)
@click.option("--valid-subset", default="valid", show_default=True)
@click.option("--device", default="auto", show_default=True, help="auto|cpu|cuda[:N] (auto takes a GPU when present).")
@click.option("--amp", type=click.Choice(["auto", "none", "bf16", "fp16"]), default="auto", show_default=True, help="Mixed precision on GPU.")
@click.option("--threads", default=0, show_default=True, help="CPU threads (0: torch default).")
@click.option("--no-progress", is_flag=True, help="No progress display or log lines.")
@click.option("--embed-dim", type=int)
@click.option("--hidden-size", type=int)
@click.option("--layers", type=int)
@click.option("--dropout", type=float)
@click.option("--attention", type=str, help="luong: none|global|local-m|local-p")
@click.option("--score", type=str, help="luong: dot|general|concat|location")
@click.option("--input-feeding/--no-input-feeding", default=None)
@click.option("--source-reversal/--no-source-reversal", default=None)
@click.option("--window", type=int, help="Local attention half-width D.")
@click.option("--init-scale", type=float, help="Uniform init range [-x, x] (0: torch default).")
@click.option("--cell", type=str, help="rnnencdec: lstm|gru")
@click.option("--maxout-size", type=int)
@click.option("--attention-dim", type=int)
@click.option("--model-opt", multiple=True, help="Any other model option, KEY=VALUE (repeatable).")
@handle_errors(PROG)
def command(data: str, **kw) -> None:  # noqa: ANN003
    """Train a model on DATA (a directory written by nmtkit-preprocess)."""
    from nmtkit.train import distributed as distmod
    from nmtkit.train.trainer import StopTraining, Trainer, TrainOptions

    overrides = {k: kw.pop(k) for k in MODEL_FLAGS}
    overrides.update(parse_model_opts(kw.pop("model_opt")))
    kw["keep_epoch_checkpoints"] = not kw.pop("no_epoch_checkpoints")
    if kw["max_tokens"] is None and kw["batch_size"] is None:
        kw["max_tokens"] = 4000
    opt = TrainOptions(data=data, **kw)
    dist = distmod.init_distributed("cuda" if opt.device.startswith("cuda") or (opt.device == "auto" and _cuda()) else "cpu")
    try:
        trainer = Trainer(opt, overrides, console, dist)
        resumed = trainer.resume_if_possible()
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
            best = f", best valid loss {state.best_valid_loss:.3f} (ppl {2.718281828 ** state.best_valid_loss:.2f})" if state.best_valid_loss is not None else ""
            console.print(f"done: {state.update} updates, {state.epochs_done} epochs{best}")
    finally:
        distmod.cleanup(dist)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def main() -> None:
    command()


if __name__ == "__main__":
    main()
