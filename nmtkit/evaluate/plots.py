"""Figures: attention heatmaps (and an HTML page of them), learning curves, BLEU by length.

matplotlib is imported inside the functions (it is slow to import and most commands
never plot) and used through the Agg canvas directly, never pyplot, so no display or
global figure state is involved.  Every PNG is rendered in memory and written with
:func:`atomic_write`, so a crash never leaves a truncated image behind; given an ``ExitStack``
(``stack``), the heatmap functions leave their files to be committed with a command's other
outputs when the stack closes, so that a later failure leaves none of them.  Each plot function
returns the Figure it saved, so that callers and tests can check what is drawn (axes, series,
labels) instead of only that a PNG exists.
"""
from __future__ import annotations

import html
import math
import os
from contextlib import ExitStack
from dataclasses import dataclass
from functools import wraps
from io import BytesIO
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar
from urllib.parse import quote

from nmtkit.utils.textio import atomic_write

Link = tuple[int, int]
_DPI = 100


_Plot = TypeVar("_Plot", bound=Callable[..., Any])


def _literal_text(plot: _Plot) -> _Plot:
    """Draw every label as the text it is: words, file names and titles come from users' data,
    and matplotlib would otherwise read ``$...$`` in them as TeX math (a word like ``$\\foo$``
    raises a parse error, after an alignment run has done all its work)."""
    @wraps(plot)
    def literal(*args: Any, **kwargs: Any) -> Any:
        from matplotlib import rc_context

        with rc_context({"text.parse_math": False, "text.usetex": False}):
            return plot(*args, **kwargs)
    return literal  # type: ignore[return-value]


def _new_figure(width: float, height: float) -> Any:
    """A matplotlib Figure bound to an Agg canvas (no pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=_DPI)
    FigureCanvasAgg(fig)
    return fig


def _save_png(fig: Any, path: str | os.PathLike, stack: ExitStack | None = None) -> None:
    """Render ``fig`` to PNG bytes and write them atomically (with ``stack``: committed when it closes)."""
    buf = BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, bbox_inches="tight")
    _write_atomically(path, buf.getvalue(), "wb", stack)


def _write_atomically(path: str | os.PathLike, data: str | bytes, mode: str, stack: ExitStack | None) -> None:
    """Write ``data`` through :func:`atomic_write`: now, or into a temporary file that ``stack``
    renames into place when it closes without error (and removes otherwise)."""
    if stack is None:
        with atomic_write(path, mode) as fh:
            fh.write(data)
        return
    from nmtkit.utils.textio import output_error

    fh = stack.enter_context(atomic_write(path, mode))
    try:
        fh.write(data)
        fh.flush()
    except OSError as exc:
        raise output_error(exc, path) from exc


@_literal_text
def plot_attention(path: str | os.PathLike, attention: Any, src_words: Sequence[str],
                   tgt_words: Sequence[str], gold: Iterable[Link] | None = None,
                   title: str | None = None, stack: ExitStack | None = None) -> Any:
    """Write an attention heatmap: source words across the top, target words down the side.

    ``attention`` is a ``[len(tgt_words), len(src_words)]`` matrix (numpy array, nested
    list or CPU tensor); row ``t`` is the distribution while producing target word ``t``.
    Brighter cells mean more weight (grey scale as in Bahdanau et al. 2015, Fig. 3).
    ``gold`` links ``(i, j)`` (source ``i``, target ``j``) are circled in red.
    """
    import numpy as np

    mat = np.asarray(attention, dtype=float)
    if mat.ndim != 2 or mat.shape != (len(tgt_words), len(src_words)):
        raise ValueError(f"attention matrix has shape {mat.shape}, expected "
                         f"({len(tgt_words)}, {len(src_words)}) = (target words, source words)")
    if mat.size == 0:
        raise ValueError("cannot plot attention for an empty sentence")
    n_tgt, n_src = mat.shape
    fig = _new_figure(max(3.0, 0.32 * n_src + 1.8), max(2.5, 0.32 * n_tgt + 1.5))
    ax = fig.add_subplot(1, 1, 1)
    ax.imshow(mat, cmap="gray", vmin=0.0, vmax=max(1.0, float(mat.max())), aspect="equal",
              interpolation="nearest")
    ax.set_xticks(range(n_src))
    ax.set_xticklabels(list(src_words), rotation=90, fontsize=9)
    ax.set_yticks(range(n_tgt))
    ax.set_yticklabels(list(tgt_words), fontsize=9)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    if gold:
        pts = [(i, j) for i, j in gold if 0 <= i < n_src and 0 <= j < n_tgt]
        if pts:
            ax.scatter([i for i, _ in pts], [j for _, j in pts], s=60, facecolors="none",
                       edgecolors="red", linewidths=1.5, label="gold")
    if title:
        ax.set_title(title, fontsize=10, pad=12)
    _save_png(fig, path, stack)
    return fig


@dataclass(frozen=True)
class HeatmapEntry:
    """One heatmap on the HTML page: the PNG (absolute, or relative to the current
    directory) and the sentence pair it shows."""

    image: str
    src_words: Sequence[str]
    tgt_words: Sequence[str]
    title: str = ""


def write_attention_html(path: str | os.PathLike, entries: Sequence[HeatmapEntry],
                         title: str = "Attention", stack: ExitStack | None = None) -> None:
    """Write an HTML page showing several heatmaps with their sentences.

    Image links are relative to the page's directory (the folder can be moved or
    served as is); all words and titles are HTML-escaped.
    """
    page_dir = Path(path).resolve().parent
    parts = [
        "<!DOCTYPE html>",
        '<html><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;margin:1em}figure{margin:0 0 2em 0}"
        "figcaption{margin:.3em 0}.src{color:#333}.tgt{color:#036}</style>",
        "</head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    for k, e in enumerate(entries, start=1):
        rel = os.path.relpath(Path(e.image).resolve(), page_dir)
        src = quote(Path(rel).as_posix())
        caption = html.escape(e.title or f"Sentence {k}")
        parts += [
            "<figure>",
            f"<figcaption><b>{caption}</b><br>",
            f'<span class="src">source: {html.escape(" ".join(e.src_words))}</span><br>',
            f'<span class="tgt">target: {html.escape(" ".join(e.tgt_words))}</span></figcaption>',
            f'<img src="{html.escape(src, quote=True)}" alt="{caption}">',
            "</figure>",
        ]
    parts.append("</body></html>")
    _write_atomically(path, "\n".join(parts) + "\n", "w", stack)


@_literal_text
def plot_learning_curve(path: str | os.PathLike, valid_ppl: Sequence[float],
                        train_ppl: Sequence[float] | None = None,
                        epochs: Sequence[float] | None = None, title: str | None = None,
                        valid_bleu: Sequence[float | None] | None = None) -> Any:
    """Write validation (and optionally training) perplexity per epoch, and validation BLEU
    on a second y axis when given (``None`` for epochs without it).

    The perplexity axis is logarithmic when perplexity spans a factor of 10 or more, as it
    does from the first epochs of training to convergence.
    """
    if not valid_ppl:
        raise ValueError("no validation perplexities to plot")
    xs = list(epochs) if epochs is not None else list(range(1, len(valid_ppl) + 1))
    if len(xs) != len(valid_ppl):
        raise ValueError(f"{len(xs)} epochs but {len(valid_ppl)} validation perplexities")
    if train_ppl is not None and len(train_ppl) != len(xs):
        raise ValueError(f"{len(xs)} epochs but {len(train_ppl)} training perplexities")
    fig = _new_figure(6.0, 4.0)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(xs, list(valid_ppl), marker="o", label="validation")
    values = [v for v in valid_ppl if math.isfinite(v)]
    if train_ppl is not None:
        ax.plot(xs, list(train_ppl), marker="s", linestyle="--", label="train")
        values += [v for v in train_ppl if math.isfinite(v)]
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) >= 10:
        ax.set_yscale("log")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel("perplexity")
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if valid_bleu is not None:
        if len(valid_bleu) != len(xs):
            raise ValueError(f"{len(xs)} epochs but {len(valid_bleu)} BLEU scores")
        ax2 = ax.twinx()
        ys = [math.nan if b is None else float(b) for b in valid_bleu]
        ax2.plot(xs, ys, marker="^", color="tab:green", label="validation BLEU")
        ax2.set_ylabel("BLEU")
        h2, l2 = ax2.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    ax.legend(handles, labels, loc="center right")
    if title:
        ax.set_title(title)
    _save_png(fig, path)
    return fig


@_literal_text
def plot_length_buckets(path: str | os.PathLike, bucket_labels: Sequence[str],
                        systems: Mapping[str, Sequence[float | None]],
                        xlabel: str = "source sentence length (words)",
                        title: str | None = None) -> Any:
    """Write BLEU per length bucket, one labelled line per system (Luong et al. Fig. 6).

    ``systems`` maps a system's label to its BLEU per bucket; ``None`` (an empty bucket)
    leaves a gap in that line.
    """
    if not systems:
        raise ValueError("no systems to plot")
    for name, scores in systems.items():
        if len(scores) != len(bucket_labels):
            raise ValueError(f"system {name!r} has {len(scores)} scores for {len(bucket_labels)} buckets")
    fig = _new_figure(max(5.0, 0.7 * len(bucket_labels) + 2.0), 4.0)
    ax = fig.add_subplot(1, 1, 1)
    xs = list(range(len(bucket_labels)))
    markers = "osD^v<>ph*"
    for k, (name, scores) in enumerate(systems.items()):
        ys = [math.nan if s is None else float(s) for s in scores]
        ax.plot(xs, ys, marker=markers[k % len(markers)], label=name)
    ax.set_xticks(xs)
    ax.set_xticklabels(list(bucket_labels))
    ax.set_xlabel(xlabel)
    ax.set_ylabel("BLEU")
    ax.grid(True, alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    _save_png(fig, path)
    return fig


def plot_epoch_records(path: str | Path, records: list[dict], title: str) -> None:
    """The training learning curve from the trainer's per-epoch records (those with a valid
    perplexity): valid and train perplexity, and valid BLEU when --eval-bleu logged it."""
    hist = [r for r in records if "valid_ppl" in r]
    if not hist:
        return
    bleu = [r.get("valid_bleu") for r in hist]
    plot_learning_curve(path, [r["valid_ppl"] for r in hist], train_ppl=[r["train_ppl"] for r in hist],
                        epochs=[r["epoch"] for r in hist], title=title,
                        valid_bleu=bleu if any(b is not None for b in bleu) else None)
