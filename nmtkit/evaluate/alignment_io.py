"""Read and write word alignments in Pharaoh format for evaluation: gold and hypothesis files.

One line per sentence pair, whitespace-separated links ``i-j`` where ``i`` is a 0-based
source word index and ``j`` a 0-based target word index; gold standards also have possible
links ``i?j``.  Gold sets that come as two files (sure, possible) are read with
:func:`read_gold_pair`; the possible file may or may not repeat the sure links.  Parsing
(strict, errors naming file and line) is :mod:`nmtkit.data.pharaoh`.
"""
from __future__ import annotations

import os
from typing import Iterable, Sequence

from nmtkit.data.pharaoh import GoldAlignment, Link, read_pharaoh
from nmtkit.errors import InputError, NmtkitError
from nmtkit.utils.textio import atomic_write

Alignment = set[Link]


def read_gold(path: str | os.PathLike, src_lengths: Sequence[int] | None = None,
              tgt_lengths: Sequence[int] | None = None) -> list[GoldAlignment]:
    """Read a gold file with ``i-j`` (sure) and ``i?j`` (possible) links, one line per pair."""
    return read_pharaoh(path, src_lengths, tgt_lengths, allow_possible=True)


def read_alignments(path: str | os.PathLike, src_lengths: Sequence[int] | None = None,
                    tgt_lengths: Sequence[int] | None = None) -> list[Alignment]:
    """Read hypothesis alignments (``i-j`` links only), one set per line."""
    return [g.sure for g in read_pharaoh(path, src_lengths, tgt_lengths, allow_possible=False)]


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


def check_gold_options(gold: str | None = None, sure: str | None = None, possible: str | None = None) -> None:
    """Refuse gold file combinations that mean nothing; separate from
    :func:`nmtkit.generate.aligner.read_gold_links` (here, free of torch) so that nmtkit-align can
    check them before it imports torch and loads checkpoints."""
    if gold is not None and (sure is not None or possible is not None):
        raise NmtkitError("give either --gold FILE or --sure FILE [--possible FILE], not both")
    if possible is not None and sure is None:
        raise NmtkitError("--possible needs --sure")
