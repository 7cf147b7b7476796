"""The training display: a rich progress bar with rates on a terminal, plain log lines otherwise.

Every line it prints starts with the local date and time, so that a log of a run of hours says
when each epoch ended and how long validation took."""
from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from nmtkit.train.run import TrainingRun


def stamp() -> str:
    """``2026-11-27 18:45:01 ``: the prefix of each training log line (dim on a terminal)."""
    return f"[dim]{time.strftime('%Y-%m-%d %H:%M:%S')}[/dim] "


class UpdateWindow:
    """The updates since the last log line (``--log-interval``): their sums, and from them the
    loss, rates and mean gradient norm that the bar, the log line and train_log.jsonl show."""

    def __init__(self) -> None:
        self.nll = self.ntokens = self.gnorm = self.align = 0.0
        self.sentences = self.n = 0
        self.t0 = time.perf_counter()

    def add(self, out: dict) -> None:
        """Count one update's result (:meth:`nmtkit.train.trainer.Trainer.train_step`)."""
        self.nll += out["nll"]
        self.ntokens += out["ntokens"]
        self.sentences += out["sentences"]
        self.align += out["align"]
        self.gnorm += out["gnorm"]
        self.n += 1

    def stats(self, epoch: int, update: int, lr: float, guided: bool) -> dict:
        """The window's figures; ``guided``: with the guided-alignment loss per target token, before λ."""
        elapsed = time.perf_counter() - self.t0
        stats = {
            "epoch": epoch, "update": update, "loss": self.nll / max(self.ntokens, 1), "lr": lr, "gnorm": self.gnorm / self.n,
            "tok_per_s": self.ntokens / max(elapsed, 1e-9), "sent_per_s": self.sentences / max(elapsed, 1e-9),
        }
        stats["ppl"] = math.exp(min(stats["loss"], 50.0))
        if guided:  # train_log.jsonl only
            stats["align_loss"] = self.align / max(self.ntokens, 1)
        return stats


def padding_summary(run: "TrainingRun", counter: Any) -> dict:
    """Print (main process) and return the padding share of a run's batches (``counter``: its
    :class:`~nmtkit.data.dataset.PaddingCounter`; None before the loop began: {})."""
    if counter is None:
        return {}
    pad_src, pad_tgt = counter.fractions()
    if run.dist.is_main and counter.slots.any():
        run.console.print(f"{stamp()}padding: {100 * pad_src:.1f}% of the source and {100 * pad_tgt:.1f}% of the target "
                          "positions in this run's batches")
    return {"padding_src": round(pad_src, 4), "padding_tgt": round(pad_tgt, 4)}


def plot_learning_curve(run: "TrainingRun") -> None:
    """Draw the finished epochs' losses (and BLEU) to learning_curve.png in the save dir (main process)."""
    if run.dist.is_main and run.state.finished_epochs:
        from nmtkit.evaluate.plots import plot_epoch_records

        plot_epoch_records(run.save_dir / "learning_curve.png", run.state.finished_epochs, f"{run.opt.arch} on {run.data.pair}")


class TrainDisplay:
    """rich progress while training (a live bar on a terminal, plain log lines otherwise)."""

    def __init__(self, console, enabled: bool = True, is_main: bool = True) -> None:  # noqa: ANN001
        """``enabled``: progress bar / periodic log lines; messages and epoch summaries print whenever ``is_main``."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = console
        self.enabled = enabled
        self.is_main = is_main
        self.live = enabled and console.is_terminal
        self.progress = Progress(
            TextColumn("[bold]epoch {task.fields[epoch]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("upd {task.fields[update]} loss {task.fields[loss]:.3f} ppl {task.fields[ppl]:.2f} lr {task.fields[lr]:.3g} |g| {task.fields[gnorm]:.2f} {task.fields[tps]:,.0f} tok/s"),
            TimeElapsedColumn(),
            console=console,
            disable=not self.live,
        )
        self.task: Optional[Any] = None  # rich's TaskID of the epoch's bar

    def __enter__(self) -> "TrainDisplay":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        self.progress.__exit__(*exc)

    def start_epoch(self, epoch: int, total: int, done: int) -> None:
        if self.task is not None:
            self.progress.remove_task(self.task)
        self.task = self.progress.add_task("train", total=total, completed=done, epoch=epoch, update=0, loss=0.0, ppl=0.0, lr=0.0, gnorm=0.0, tps=0.0)

    def update(self, s: dict, advance: int = 1) -> None:
        if self.task is not None:
            self.progress.update(self.task, advance=advance, update=s["update"], loss=s["loss"], ppl=s["ppl"], lr=s["lr"], gnorm=s["gnorm"], tps=s["tok_per_s"])

    def log_line(self, s: dict) -> None:
        if self.enabled and not self.live:
            self.console.print(
                f"{stamp()}epoch {s['epoch']} update {s['update']}: loss {s['loss']:.3f} ppl {s['ppl']:.2f} lr {s['lr']:.3g} "
                f"gnorm {s['gnorm']:.2f} {s['tok_per_s']:,.0f} tok/s {s['sent_per_s']:,.1f} sent/s"
            )

    def message(self, text: str) -> None:
        if self.is_main:
            self.console.print(stamp() + text)

    def end_epoch(self, record: dict, improved: bool) -> None:
        if not self.is_main:
            return
        if "valid_loss" in record:
            star = " (best)" if improved else ""
            bleu = f", BLEU {record['valid_bleu']:.2f}" if "valid_bleu" in record else ""
            self.console.print(f"{stamp()}[bold]epoch {record['epoch']}[/bold] done: update {record['update']}, valid loss {record['valid_loss']:.3f}, ppl {record['valid_ppl']:.2f}{bleu}{star}, lr {record['lr']:.3g}")
        else:
            self.console.print(f"{stamp()}[bold]epoch {record['epoch']}[/bold] done: update {record['update']} (no validation split)")
