"""Unknown-word replacement (Luong et al. 2015; Jean et al. 2015).

Each ``<unk>`` in a hypothesis is replaced using the source position it attended to most:
the translation of that source word from a lexicon if there is one, else the source word
itself (names, numbers and rare words are often copied verbatim).

What is copied when the source is BPE'd: the **whole source word** the attended piece
belongs to, with the ``@@`` markers removed (attending to ``Ober@@`` in ``Ober@@ hausen``
copies ``Oberhausen``); the lexicon is consulted with that whole word too.  The inserted
text therefore never ends in ``@@`` and de-BPE of the output leaves it intact.  The source
words must be the tokens exactly as they were fed to the model (never rebuilt from ids,
which would give ``<unk>`` back for the very words that matter).
"""
from __future__ import annotations

import os
from typing import Iterator, Optional, Sequence

from torch import Tensor

from nmtkit.data.text_pipeline import BPE_SEP, merge_bpe, normalize_line, piece_to_token_index
from nmtkit.errors import InputError, NmtkitError
from nmtkit.utils.textio import iter_lines


def replace_unks(
    hyp_tokens: Sequence[str],
    attention: Optional[Tensor],
    src_words: Sequence[str],
    unk: str = "<unk>",
    lexicon: Optional[dict[str, str]] = None,
    bpe_marker: Optional[str] = BPE_SEP,
) -> list[str]:
    """Return ``hyp_tokens`` with every ``unk`` replaced (see the module docstring).

    ``attention`` ``[T, S]``: row ``t`` is the attention that produced ``hyp_tokens[t]``
    (an extra ``</s>`` row is allowed); column ``k < len(src_words)`` is source token ``k``;
    the ``</s>`` column and padding beyond it are never chosen.  ``bpe_marker=None`` copies the
    attended token as it is (no subword merging).
    """
    out = list(hyp_tokens)
    positions = [t for t, tok in enumerate(out) if tok == unk]
    if not positions:
        return out
    if attention is None:
        raise NmtkitError("unknown-word replacement needs attention, but the model has none")
    n_src = len(src_words)
    if n_src == 0:
        return out
    if attention.size(0) < len(out) or attention.size(1) < n_src:
        raise ValueError(
            f"attention {tuple(attention.shape)} does not cover {len(out)} output and {n_src} source tokens"
        )
    if bpe_marker:
        word_of = piece_to_token_index(list(src_words))
        whole = merge_bpe(list(src_words))
    else:
        word_of = list(range(n_src))
        whole = list(src_words)
    best = attention[positions, :n_src].float().argmax(dim=1).tolist()  # ties: earlier position
    for t, k in zip(positions, best):
        word = whole[word_of[k]]
        out[t] = lexicon.get(word, word) if lexicon else word
    return out


def iter_lexicon_entries(path: str | os.PathLike) -> Iterator[tuple[int, str, str, Optional[float]]]:
    """``(line number, source, target, score or None)`` per ``source target [score]`` line.

    Shared by :func:`load_lexicon` (1-best for ``--replace-unk``) and the vocabulary shortlist
    (top K per source word), so both read the same files the same way.  Fields are split on
    whitespace (control characters normalised first, so none can reach the output); a third
    field must be a number; any other line is an :class:`InputError` naming file and line, and
    so is an empty file.
    """
    n_lines = 0
    for lineno, line in iter_lines(path):
        n_lines += 1
        fields = normalize_line(line).split()
        score: Optional[float] = None
        if len(fields) == 3:
            try:
                score = float(fields[2])
            except ValueError:
                fields = []
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
