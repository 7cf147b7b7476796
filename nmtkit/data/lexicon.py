"""The lexicon file format: ``source target [score]`` lines, written by ``nmtkit-align
--build-dict`` and read by ``nmtkit-translate --replace-unk DICT`` (1-best) and ``--shortlist``
(the top K targets per source word).

Why one module: the writer and both readers must agree on the format (fields split on
whitespace, an optional numeric third field, the ranking of a word's targets), so they live
together rather than in the commands that use them.
"""
from __future__ import annotations

import math
import os
from collections import Counter, defaultdict
from typing import Iterable, Iterator, Optional, Sequence

from nmtkit.data.text_pipeline import split_words
from nmtkit.errors import InputError
from nmtkit.utils.textio import iter_lines

Link = tuple[int, int]


# -- writing -----------------------------------------------------------------------------------
def count_word_pairs(pairs: Sequence[tuple[Sequence[str], Sequence[str]]],
                     links: Sequence[Iterable[Link]]) -> dict[str, Counter]:
    """How often each source word is linked to each target word over the corpus."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for (src_words, tgt_words), sent_links in zip(pairs, links):
        for i, j in sent_links:
            counts[src_words[i]][tgt_words[j]] += 1
    return counts


def build_lexicon(counts: dict[str, Counter], min_count: int = 2, top_k: int = 1) -> list[tuple[str, str, int]]:
    """The ``top_k`` most frequent aligned targets of each source word, each seen ``min_count`` times.

    ``top_k=1`` is the 1-best dictionary of ``--replace-unk``; a larger ``top_k`` gives the
    lexical table of a vocabulary shortlist (``nmtkit.generate.shortlist``).  Ties between
    targets go to the alphabetically first one (deterministic output).  Sorted by the source
    word's best count (descending), then source word, then count (descending) and target, so a
    word's entries are adjacent and, with ``top_k=1``, the order is by descending count.
    """
    entries: list[tuple[str, str, int, int]] = []
    for src, tgts in counts.items():
        ranked = sorted(tgts.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]
        kept = [(tgt, n) for tgt, n in ranked if n >= min_count]
        entries.extend((src, tgt, n, kept[0][1]) for tgt, n in kept)
    entries.sort(key=lambda e: (-e[3], e[0], -e[2], e[1]))
    return [(src, tgt, n) for src, tgt, n, _ in entries]


def lexicon_lines(entries: Sequence[tuple[str, str, int]], with_counts: bool) -> list[str]:
    """The lines of a lexicon file (no terminators): ``source target count`` for a shortlist
    table, ``source target`` for the 1-best dictionary of ``--replace-unk``."""
    return [f"{src} {tgt} {n}" if with_counts else f"{src} {tgt}" for src, tgt, n in entries]


# -- reading -----------------------------------------------------------------------------------
def iter_lexicon_entries(path: str | os.PathLike) -> Iterator[tuple[int, str, str, Optional[float]]]:
    """``(line number, source, target, score or None)`` per ``source target [score]`` line.

    Shared by :func:`load_lexicon` (1-best for ``--replace-unk``) and the vocabulary shortlist
    (top K per source word), so both read the same files the same way.  Fields are split as
    :func:`split_words` splits text (spaces and tabs, control characters normalised first, so none
    can reach the output; other Unicode spaces stay inside a word, as they do in the model); a third
    field must be a number; any other line is an :class:`InputError` naming file and line, and
    so is an empty file.
    """
    n_lines = 0
    for lineno, line in iter_lines(path):
        n_lines += 1
        fields = split_words(line)
        score: Optional[float] = None
        if len(fields) == 3:
            try:
                score = float(fields[2])
            except ValueError:
                fields = []
            else:
                if not math.isfinite(score):  # nan would rank arbitrarily
                    raise InputError(str(path), lineno, f"the score must be a finite number, got {fields[2]!r}")
        if len(fields) not in (2, 3):
            raise InputError(str(path), lineno, f"expected 'source target' or 'source target score', got {line!r}")
        yield lineno, fields[0], fields[1], score
    if n_lines == 0:
        raise InputError(str(path), None, "lexicon file is empty")


def load_lexicon(path: str | os.PathLike) -> dict[str, str]:
    """Read a ``source target`` lexicon (whitespace-separated), one entry per line.

    A third numeric column (a probability or score) is allowed: then the highest-scoring
    target of each source word is kept.  Without it the first entry of a source word wins.
    Any other line is an :class:`InputError` naming file and line.
    """
    best: dict[str, tuple[float, str]] = {}
    for _, src, tgt, score in iter_lexicon_entries(path):
        if src not in best or (score is not None and score > best[src][0]):
            best[src] = (0.0 if score is None else score, tgt)
    return {s: t for s, (_, t) in best.items()}
