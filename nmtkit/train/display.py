"""The training display: a rich progress bar with rates on a terminal, plain log lines otherwise.

Every line it prints starts with the local date and time, so that a log of a run of hours says
when each epoch ended and how long validation took."""
from __future__ import annotations

import time
from typing import Any, Optional


def stamp() -> str:
    """``2026-11-27 18:45:01 ``: the prefix of each training log line (dim on a terminal)."""
    return f"[dim]{time.strftime('%Y-%m-%d %H:%M:%S')}[/dim] "


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
