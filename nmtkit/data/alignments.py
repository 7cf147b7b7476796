"""Word alignments of the training pairs, stored with the binarized data (guided alignment).

``nmtkit-preprocess --alignfile PREFIX`` reads ``PREFIX.align``: one Pharaoh line per line of
``PREFIX.{src,tgt}`` (the same prefixes as ``--trainpref``, comma-separated when there are
several), links ``i-j`` with ``i`` a 0-based **source word** and ``j`` a 0-based **target
word**, words being the whitespace-separated words of the lines *as given* (the same words
``nmtkit-align`` prints links for and reads ``--gold`` against; an aligner such as eflomal or
fast_align run on the very files given to ``--trainpref`` produces exactly these).  Possible
links ``i?j`` (gold standards) are accepted and used as links.

nmtkit maps each word link to subword pieces itself: **every** piece of source word ``i`` is
linked to **every** piece of target word ``j`` (Moses tokens of one word count as its pieces).
Pairs the training filters drop (empty, too long, bad ratio) drop their alignment line too.

Stored as ``train.{src}-{tgt}.align.bin/.idx`` in the indexed token format: sentence ``k``
holds ``2 * n`` values ``p0 q0 p1 q1 ...``, piece links (source piece ``p``, target piece ``q``,
0-based, ``</s>`` not counted).  Why piece links and not word links: training needs them per
batch, and mapping words to pieces needs the raw text and the tokenizer, which only
preprocessing has.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from nmtkit.data.indexed import IndexedTokens, write_indexed
from nmtkit.data.pharaoh import read_pharaoh
from nmtkit.errors import InputError, NmtkitError

ALIGN_SUFFIX = "align"

WordLinks = list[tuple[int, int]]


def file_blocks(origin: list[tuple[str, int]], paths: list[str]) -> list[tuple[int, int]]:
    """``[start, end)`` of each file's lines in ``origin``, the files having been read in this order.

    Why from the ``(file, lineno)`` origins rather than "a block starts at line 1": a file that
    contributed no line still gets its (empty) block, so later prefixes' ``.align`` files are
    never read against another prefix's sentences; the same file given twice gives two blocks.
    """
    blocks, pos = [], 0
    for path in paths:
        end = pos
        while end < len(origin) and origin[end] == (path, end - pos + 1):
            end += 1
        blocks.append((pos, end))
        pos = end
    assert pos == len(origin), "origins not in the order the files were read"
    return blocks


def read_alignfiles(prefixes: Sequence[str], src_word_counts: Sequence[Sequence[int]],
                    tgt_word_counts: Sequence[Sequence[int]]) -> list[WordLinks]:
    """``PREFIX.align`` for each prefix, concatenated: one sorted link list per line.

    ``src_word_counts[k]`` / ``tgt_word_counts[k]``: the number of words of each line of
    prefix ``k``'s source / target file; a line-count mismatch, an index out of range and a
    malformed link are errors naming the file and line (see
    :func:`nmtkit.data.pharaoh.parse_pharaoh_line`).
    """
    out: list[WordLinks] = []
    for pref, src_n, tgt_n in zip(prefixes, src_word_counts, tgt_word_counts):
        path = f"{pref}.{ALIGN_SUFFIX}"
        if not Path(path).is_file():
            raise InputError(path, None, "no such alignment file (--alignfile PREFIX reads PREFIX.align)")
        out.extend(sorted(g.possible) for g in read_pharaoh(path, src_n, tgt_n))
    return out


def piece_links(links: Iterable[tuple[int, int]], src_word_of: Sequence[int],
                tgt_word_of: Sequence[int]) -> np.ndarray:
    """Word links -> piece links ``[n, 2]`` (every piece of word i x every piece of word j), sorted.

    ``src_word_of[k]``: the word of source piece ``k`` (likewise for the target).  A word with
    no piece (a tokenizer that dropped it) contributes no link.
    """
    src_pieces: dict[int, list[int]] = {}
    for k, w in enumerate(src_word_of):
        src_pieces.setdefault(w, []).append(k)
    tgt_pieces: dict[int, list[int]] = {}
    for k, w in enumerate(tgt_word_of):
        tgt_pieces.setdefault(w, []).append(k)
    pairs = sorted({(p, q) for i, j in links for p in src_pieces.get(i, ()) for q in tgt_pieces.get(j, ())})
    return np.asarray(pairs, dtype=np.int64).reshape(-1, 2)


def write_alignments(prefix: str | os.PathLike, sentences: Sequence[np.ndarray]) -> int:
    """Write piece links (one ``[n, 2]`` array per pair) as ``prefix.bin/.idx``; returns the link count."""
    flat = [a.reshape(-1) for a in sentences]
    top = max((int(a.max()) for a in flat if a.size), default=0)
    write_indexed(prefix, flat, top + 1)
    return sum(a.size // 2 for a in flat)


class StoredAlignments:
    """The piece links of one split, memory-mapped and checked against the split's sentences."""

    def __init__(self, prefix: str | os.PathLike, src_sizes: np.ndarray, tgt_sizes: np.ndarray) -> None:
        """``src_sizes``/``tgt_sizes``: pieces per sentence without ``</s>``; every link must fit."""
        self.prefix = str(prefix)
        self._links = IndexedTokens(prefix)
        path = f"{prefix}.bin"
        if len(self._links) != len(src_sizes):
            raise InputError(path, None, f"corrupt alignments: {len(self._links)} sentences, the split has {len(src_sizes)}")
        odd = self._links.sizes % 2 != 0
        if odd.any():
            raise InputError(path, None, f"corrupt alignments: sentence {int(np.argmax(odd))} (0-based) has an odd number of values")
        data = np.asarray(self._links._data, dtype=np.int64).reshape(-1, 2)
        if len(data):
            sent = np.repeat(np.arange(len(src_sizes)), self._links.sizes // 2)
            # a signed dtype can hold negative indices: -1 would silently mark the last piece
            bad = (data[:, 0] >= src_sizes[sent]) | (data[:, 1] >= tgt_sizes[sent]) | (data < 0).any(axis=1)
            if bad.any():
                k = int(np.argmax(bad))
                raise InputError(path, None, f"corrupt alignments: sentence {int(sent[k])} (0-based) links piece "
                                 f"{int(data[k, 0])}-{int(data[k, 1])}, outside its {int(src_sizes[sent[k]])} source / "
                                 f"{int(tgt_sizes[sent[k]])} target pieces")

    def __len__(self) -> int:
        return len(self._links)

    def __getitem__(self, i: int) -> np.ndarray:
        """Piece links ``[n, 2]`` (source piece, target piece) of pair ``i``."""
        return self._links[i].reshape(-1, 2)


def check_alignfile_option(alignfile: str | None, trainpref: str | None) -> list[str]:
    """The ``--alignfile`` prefixes, one per ``--trainpref`` prefix (one-line errors otherwise)."""
    if not alignfile:
        return []
    if not trainpref:
        raise NmtkitError("--alignfile needs --trainpref (it aligns the training pairs)")
    prefs, trains = alignfile.split(","), trainpref.split(",")
    if len(prefs) != len(trains):
        raise NmtkitError(f"--alignfile has {len(prefs)} prefix(es) but --trainpref has {len(trains)}: give one per training prefix")
    return prefs
