"""Parsing Pharaoh word alignments: ``i-j`` links (0-based source word ``i``, target word ``j``).

Gold standards mark possible (uncertain) links as ``i?j``; sure links are also possible (S is
a subset of P, Och & Ney 2003).

Why in the data layer: preprocessing reads ``--alignfile`` with it and evaluation reads gold and
hypothesis files with it (:mod:`nmtkit.evaluate.alignment_io`); one strict parser for both.  Why
strict: a silently skipped or mis-indexed link changes training and AER without any visible
sign, so every malformed token, negative or out-of-range index and line-count mismatch is an
:class:`InputError` naming file and line.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Sequence

from nmtkit.errors import InputError
from nmtkit.utils.textio import iter_lines

Link = tuple[int, int]

_TOKEN = re.compile(r"^(-?[0-9]+)([-?])(-?[0-9]+)$", re.ASCII)  # ASCII digits: int() also reads "١-٢" as 1-2


@dataclass
class GoldAlignment:
    """Gold links of one sentence pair; ``possible`` always includes ``sure``."""

    sure: set[Link] = field(default_factory=set)
    possible: set[Link] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.possible = set(self.possible) | set(self.sure)


def _where(path: str | None) -> str | None:
    return None if path is None else str(path)


def parse_pharaoh_line(line: str, *, path: str | None = None, lineno: int | None = None,
                       src_len: int | None = None, tgt_len: int | None = None,
                       allow_possible: bool = True) -> GoldAlignment:
    """Parse one Pharaoh line into sure and possible links.

    ``i-j`` is sure, ``i?j`` possible (only when ``allow_possible``).  With ``src_len`` /
    ``tgt_len`` given, indices must be below them.  Errors name ``path:lineno``.
    """
    sure: set[Link] = set()
    possible: set[Link] = set()
    for tok in line.split():
        m = _TOKEN.match(tok)
        if m is None:
            raise InputError(_where(path), lineno, f"malformed alignment link {tok!r} (expected i-j or i?j)")
        i, sep, j = int(m.group(1)), m.group(2), int(m.group(3))
        if sep == "?" and not allow_possible:
            raise InputError(_where(path), lineno, f"possible link {tok!r} not allowed here (only i-j)")
        if i < 0 or j < 0:
            raise InputError(_where(path), lineno, f"negative index in alignment link {tok!r}")
        if src_len is not None and i >= src_len:
            raise InputError(_where(path), lineno,
                             f"source index {i} in {tok!r} out of range (sentence has {src_len} source words)")
        if tgt_len is not None and j >= tgt_len:
            raise InputError(_where(path), lineno,
                             f"target index {j} in {tok!r} out of range (sentence has {tgt_len} target words)")
        (sure if sep == "-" else possible).add((i, j))
    return GoldAlignment(sure=sure, possible=possible)


def _check_lengths(path: str, n_lines: int, lengths: Sequence[int] | None, which: str) -> None:
    if lengths is not None and len(lengths) != n_lines:
        raise InputError(path, None, f"has {n_lines} lines but there are {len(lengths)} {which} sentences")


def _length_at(lengths: Sequence[int] | None, k: int) -> int | None:
    return None if lengths is None else lengths[k]


def read_pharaoh(path: str | os.PathLike, src_lengths: Sequence[int] | None = None,
                 tgt_lengths: Sequence[int] | None = None, *, allow_possible: bool = True) -> list[GoldAlignment]:
    """Parse every line of a Pharaoh file, checking line count and index ranges when lengths are given.

    ``src_lengths[k]`` / ``tgt_lengths[k]``: words of pair ``k``; ``allow_possible``: accept ``i?j``.
    """
    p = str(path)
    lines = list(iter_lines(p))
    _check_lengths(p, len(lines), src_lengths, "source")
    _check_lengths(p, len(lines), tgt_lengths, "target")
    return [
        parse_pharaoh_line(text, path=p, lineno=n, src_len=_length_at(src_lengths, n - 1),
                           tgt_len=_length_at(tgt_lengths, n - 1), allow_possible=allow_possible)
        for n, text in lines
    ]
