"""Tokenizing and BPE over many lines with a pool of worker processes (``nmtkit-preprocess
--workers``), showing lines/s.

Why forked workers holding the pipeline: the Moses tokenizer and subword-nmt are pure Python,
so a second process is the only way to use a second core; the pipeline is handed over once per
worker, not once per chunk.
"""
from __future__ import annotations

import multiprocessing as mp
from typing import Optional

from nmtkit.data.text_pipeline import TextPipeline
from nmtkit.utils.signals import default_signals_in_worker

_worker_pipe: Optional[TextPipeline] = None


def _init_worker(pipe: TextPipeline) -> None:
    global _worker_pipe
    _worker_pipe = pipe


def _init_pool_worker(pipe: TextPipeline) -> None:
    """A forked worker: default SIGTERM and no SIGINT, so that the parent alone handles an
    interrupt and the pool's terminate() ends the workers without tracebacks."""
    default_signals_in_worker()
    _init_worker(pipe)


def tokenize_chunk(lines: list[str]) -> list[list[str]]:
    assert _worker_pipe is not None
    return [_worker_pipe.tokenize(line) for line in lines]


def bpe_chunk(chunk: list[list[str]]) -> list[list[str]]:
    assert _worker_pipe is not None
    return [_worker_pipe.apply_bpe(toks) for toks in chunk]


def map_chunks(fn, pipe: TextPipeline, items: list, workers: int, progress, desc: str, chunk: int = 2000) -> list:  # noqa: ANN001
    """Apply a chunk function over items with ``workers`` processes (no more than there are
    chunks: each forked worker copies the pipeline), showing lines/s."""
    chunks = [items[i : i + chunk] for i in range(0, len(items), chunk)]
    workers = min(workers, len(chunks))
    task = progress.add_task(desc, total=len(items)) if progress is not None else None
    out: list = []
    if workers > 1 and len(chunks) > 1:
        ctx = mp.get_context("fork")
        with ctx.Pool(workers, initializer=_init_pool_worker, initargs=(pipe,)) as pool:
            for res in pool.imap(fn, chunks):
                out.extend(res)
                if task is not None:
                    progress.advance(task, len(res))
    else:
        _init_worker(pipe)
        for c in chunks:
            res = fn(c)
            out.extend(res)
            if task is not None:
                progress.advance(task, len(res))
    return out
