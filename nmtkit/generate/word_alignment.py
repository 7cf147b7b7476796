"""Word alignments from attention (Luong et al. 2015, section 5.4), at the level of the user's words.

The model attends over subword pieces and emits pieces; alignments are wanted between
words.  Steps:

1. Keep the rows of the real target pieces and the columns of the real source pieces (the
   ``</s>`` column, padding and the ``</s>`` target row are dropped; with ``align_shift=1``
   the row of step ``t + 1`` stands for piece ``t``, so the ``</s>`` step row is used by the
   last piece).  Each kept row is renormalised to sum to one over the real source pieces.
2. Merge pieces into words: a source word's column is the **sum** of its pieces' columns
   (the attention mass the word received); a target word's row is the **mean** of its
   pieces' rows (so long words do not count more).
3. For every target word, the source word with the highest merged weight (ties: the lower
   source index); target words whose rows carry no weight are left unaligned.

Links are ``(i, j)``: ``i`` source word index, ``j`` target word index, in target order.
Mapping pieces to words is :func:`nmtkit.data.text_pipeline.piece_to_token_index`; mapping them
to the user's whitespace words (through the tokenizer) is :func:`nmtkit.data.word_index.piece_word_index`.
Pharaoh output is :func:`nmtkit.evaluate.alignment_io.format_pharaoh`.

``align_shift`` (Luong footnote 14): with content-based scores, the attention computed at
step ``t`` (from ``h_t``, which has read ``y_{t-1}``) tends to align the *previous* target
word, so ``align_shift=1`` reads target word ``t``'s alignment from the row of step ``t+1``.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor

from nmtkit.data.text_pipeline import piece_to_token_index
from nmtkit.errors import NmtkitError
from nmtkit.evaluate.symmetrize import grow_diag_final_and

Link = tuple[int, int]


def _one_hot(groups: Sequence[int], n_groups: int) -> Tensor:
    m = torch.zeros(len(groups), n_groups, dtype=torch.float64)
    m[torch.arange(len(groups)), torch.as_tensor(list(groups), dtype=torch.long)] = 1.0
    return m


def merge_attention(
    attention: Tensor,
    src_word_of: Sequence[int],
    tgt_word_of: Sequence[int],
    align_shift: int = 0,
    n_src_words: Optional[int] = None,
    n_tgt_words: Optional[int] = None,
) -> Tensor:
    """Piece-level attention ``[T_rows, S_cols]`` -> word-level ``[n_tgt_words, n_src_words]``.

    ``src_word_of[k]`` / ``tgt_word_of[k]``: the word index of source / target piece ``k``.
    ``attention`` must have at least ``len(tgt_word_of) + align_shift`` rows and
    ``len(src_word_of)`` columns (extra columns -- ``</s>``, padding -- are ignored).
    """
    if align_shift not in (0, 1):
        raise NmtkitError(f"align shift must be 0 or 1, got {align_shift}")
    n_tp, n_sp = len(tgt_word_of), len(src_word_of)
    n_src_words = n_src_words if n_src_words is not None else (max(src_word_of) + 1 if n_sp else 0)
    n_tgt_words = n_tgt_words if n_tgt_words is not None else (max(tgt_word_of) + 1 if n_tp else 0)
    if n_tp == 0 or n_sp == 0:
        return torch.zeros(n_tgt_words, n_src_words, dtype=torch.float64)
    if attention.size(0) < n_tp + align_shift or attention.size(1) < n_sp:
        raise ValueError(
            f"attention {tuple(attention.shape)} too small for {n_tp} target pieces (shift {align_shift}) "
            f"and {n_sp} source pieces"
        )
    a = attention[align_shift : align_shift + n_tp, :n_sp].detach().to("cpu", torch.float64)
    a = a / a.sum(dim=1, keepdim=True).clamp_min(1e-300)
    cols = a @ _one_hot(src_word_of, n_src_words)  # sum over a source word's pieces
    rows = _one_hot(tgt_word_of, n_tgt_words).t()  # [n_tgt_words, n_tp]
    rows = rows / rows.sum(dim=1, keepdim=True).clamp_min(1.0)  # mean over a target word's pieces
    return rows @ cols


def align_words(
    attention: Tensor,
    src_word_of: Sequence[int],
    tgt_word_of: Sequence[int],
    align_shift: int = 0,
    n_src_words: Optional[int] = None,
    n_tgt_words: Optional[int] = None,
) -> list[Link]:
    """One link per target word to its most-attended source word (see the module docstring)."""
    return links_from_merged(merge_attention(attention, src_word_of, tgt_word_of, align_shift, n_src_words, n_tgt_words))


def links_from_merged(merged: Tensor) -> list[Link]:
    """Step 3 of the module docstring on a :func:`merge_attention` matrix (for callers that keep it)."""
    if merged.numel() == 0:
        return []
    best = merged.argmax(dim=1).tolist()  # first maximum: lower source index wins ties
    has_mass = (merged.sum(dim=1) > 0).tolist()
    return [(i, j) for j, (i, ok) in enumerate(zip(best, has_mass)) if ok]


def align_pieces(
    attention: Tensor, src_pieces: Sequence[str], tgt_pieces: Sequence[str], align_shift: int = 0
) -> list[Link]:
    """Word links from piece attention, words being the tokens before BPE (``@@`` markers)."""
    return align_words(
        attention, piece_to_token_index(list(src_pieces)), piece_to_token_index(list(tgt_pieces)), align_shift
    )


def soft_symmetrize(fwd_attention: Tensor, rev_attention: Tensor) -> set[Link]:
    """Links from both directions' word-level attention, averaged before any link is read.

    ``fwd_attention`` ``[n_tgt, n_src]`` (the source->target model's rows: target words) and
    ``rev_attention`` ``[n_src, n_tgt]`` (the reverse model's rows: source words).  Their mean
    ``M = (F + R^T) / 2`` lets each model correct the other's weak choices before the hard
    decisions; then each target word's best source word and each source word's best target word
    under ``M`` are the two directions that grow-diag-final-and combines.  Rows without mass in
    one model keep the other's.  Why: on the Hansards dev gold this beat symmetrizing the two
    argmax alignments for every model measured (bench/RESULTS.md, "AER: Canadian Hansards").
    """
    m = (fwd_attention.float() + rev_attention.float().t()) / 2
    s2t = links_from_merged(m)
    t2s = [(i, j) for j, i in links_from_merged(m.t())]  # each source word's best target word
    return grow_diag_final_and(s2t, t2s)
