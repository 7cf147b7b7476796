"""Read and write word alignments in Pharaoh format.

One line per sentence pair, whitespace-separated links ``i-j`` where ``i`` is a 0-based
source word index and ``j`` a 0-based target word index.  Gold standards mark possible
(uncertain) links as ``i?j``; sure links are also possible (S is a subset of P, Och & Ney
2003).  Gold sets that come as two files (sure, possible) are read with
:func:`read_gold_pair`; the possible file may or may not repeat the sure links.

Why strict parsing: a silently skipped or mis-indexed link changes AER without any
visible sign, so every malformed token, negative or out-of-range index and line-count
mismatch is an :class:`InputError` naming file and line.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from nmtkit.errors import InputError
from nmtkit.utils.textio import atomic_write, iter_lines

Link = tuple[int, int]
Alignment = set[Link]

_TOKEN = re.compile(r"^(-?\d+)([-?])(-?\d+)$")


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


def read_gold(path: str | os.PathLike, src_lengths: Sequence[int] | None = None,
              tgt_lengths: Sequence[int] | None = None) -> list[GoldAlignment]:
    """Read a gold file with ``i-j`` (sure) and ``i?j`` (possible) links, one line per pair."""
    return _read_pharaoh(path, src_lengths, tgt_lengths, allow_possible=True)


def _read_pharaoh(path: str | os.PathLike, src_lengths: Sequence[int] | None, tgt_lengths: Sequence[int] | None,
                  allow_possible: bool) -> list[GoldAlignment]:
    """Parse every line of a Pharaoh file, checking line count and index ranges when lengths are given."""
    p = str(path)
    lines = list(iter_lines(p))
    _check_lengths(p, len(lines), src_lengths, "source")
    _check_lengths(p, len(lines), tgt_lengths, "target")
    return [
        parse_pharaoh_line(text, path=p, lineno=n, src_len=_length_at(src_lengths, n - 1),
                           tgt_len=_length_at(tgt_lengths, n - 1), allow_possible=allow_possible)
        for n, text in lines
    ]


def read_alignments(path: str | os.PathLike, src_lengths: Sequence[int] | None = None,
                    tgt_lengths: Sequence[int] | None = None) -> list[Alignment]:
    """Read hypothesis alignments (``i-j`` links only), one set per line."""
    return [g.sure for g in _read_pharaoh(path, src_lengths, tgt_lengths, allow_possible=False)]


def read_gold_pair(sure_path: str | os.PathLike, possible_path: str | os.PathLike,
                   src_lengths: Sequence[int] | None = None,
                   tgt_lengths: Sequence[int] | None = None) -> list[GoldAlignment]:
    """Read gold sure links and possible links from two line-parallel ``i-j`` files.

    Sure links are added to the possible set even if the possible file omits them.
    """
    sure = read_alignments(sure_path, src_lengths, tgt_lengths)
    possible = read_alignments(possible_path, src_lengths, tgt_lengths)
    if len(sure) != len(possible):
        raise InputError(None, None, f"gold files are not parallel: {sure_path} has {len(sure)} lines, "
                                     f"{possible_path} has {len(possible)} lines")
    return [GoldAlignment(sure=s, possible=p) for s, p in zip(sure, possible)]


def format_pharaoh(links: Iterable[Link], possible: Iterable[Link] = ()) -> str:
    """Render links as one Pharaoh line, sorted by (source, target) index.

    Links in ``possible`` that are not in ``links`` are written as ``i?j``.
    """
    sure = set(links)
    marked = [(i, j, "-") for i, j in sure] + [(i, j, "?") for i, j in set(possible) - sure]
    return " ".join(f"{i}{sep}{j}" for i, j, sep in sorted(marked))


def write_pharaoh(path: str | os.PathLike, alignments: Sequence[Iterable[Link]]) -> None:
    """Write one sorted Pharaoh line per sentence, atomically."""
    with atomic_write(path) as fh:
        for links in alignments:
            fh.write(format_pharaoh(links) + "\n")
