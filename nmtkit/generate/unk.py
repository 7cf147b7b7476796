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

from typing import Optional, Sequence

from torch import Tensor

from nmtkit.data.text_pipeline import BPE_SEP, merge_bpe, piece_to_token_index
from nmtkit.errors import NmtkitError


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
