"""One look for progress bars: rich, on stderr, with a rate column (lines/s, sentences/s, ...)."""
from __future__ import annotations

import os
from typing import Optional

from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

from nmtkit.utils.console import console


class RateColumn(ProgressColumn):
    """Shows the task's speed in its own unit, e.g. ``12,345 lines/s``."""

    def __init__(self, unit: str = "it") -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        unit = task.fields.get("unit", self.unit)
        speed = task.finished_speed or task.speed
        if speed is None:
            return Text(f"- {unit}/s", style="progress.data.speed")
        return Text(f"{speed:,.0f} {unit}/s", style="progress.data.speed")


def progress_bar(unit: str = "lines", transient: bool = False) -> Progress:
    """A rich progress display writing to stderr, disabled when stderr is not a terminal (rich's
    own live display would still end with an empty line there, before any one-line error)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(unit),
        TimeElapsedColumn(),
        console=console,
        transient=transient,
        disable=not console.is_terminal,
    )


def count_lines(path: str | os.PathLike) -> Optional[int]:
    """Lines of a regular file (a last line without a newline counts), for a progress bar's total;
    None for anything else (a pipe, a device) or a file that cannot be read now: the bar then
    shows a count without a total, and the command's own read reports any error."""
    try:
        if not os.path.isfile(path):
            return None
        lines, last = 0, b"\n"
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
        return lines + (last != b"\n")
    except OSError:
        return None
