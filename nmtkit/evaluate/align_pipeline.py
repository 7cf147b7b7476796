"""Word alignments of a parallel corpus by forced decoding with an attention model.

What this module adds to the pieces it reuses (text pipelines, :mod:`nmtkit.generate.forced`,
:mod:`nmtkit.generate.word_alignment`, :mod:`nmtkit.evaluate.symmetrize`): it keeps track of
which *word of the line as the user gave it* every subword piece came from, so that links
index those words whatever tokenization and BPE the model applies inside; it batches the
corpus by length; and it counts aligned token pairs (the model's tokens, what
``nmtkit-translate`` looks up) into a lexical dictionary.

Word-level attention (see :mod:`nmtkit.generate.word_alignment`): a source word's column is
the **sum** of its pieces' columns (the attention mass the word received), a target word's
row is the **mean** of its pieces' rows (long words do not weigh more); the ``</s>`` column
is dropped and rows are renormalised over the real source pieces.  Each target word is
linked to its most-attended source word (one link per target word at most).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Sequence

import numpy as np
import torch
from torch import Tensor

from nmtkit.data.dataset import make_batches
from nmtkit.data.dictionary import Dictionary
from nmtkit.data.text_pipeline import TextPipeline, piece_to_token_index, split_words
from nmtkit.data.word_index import piece_word_index
from nmtkit.errors import InputError, NmtkitError
from nmtkit.generate.ensemble import EnsembleModel
from nmtkit.generate.forced import collate, score_references
from nmtkit.generate.word_alignment import align_words, links_from_merged, merge_attention

Link = tuple[int, int]


@dataclass
class PreparedSide:
    """One sentence on one side: the user's words, the model's piece ids and their words.

    ``ids`` ends with ``</s>``; ``word_of[k]`` is the index in ``words`` of piece ``k``.
    ``tokens`` are the model's tokens (after its tokenizer and lowercasing, before BPE) and
    ``token_of[k]`` the token of piece ``k``: the level of ``--build-dict`` lexicons, whose
    entries ``nmtkit-translate`` looks up and inserts as tokens.
    """

    words: list[str]
    ids: list[int]
    word_of: list[int]
    tokens: list[str] = field(default_factory=list)
    token_of: list[int] = field(default_factory=list)


@dataclass
class PreparedPair:
    src: PreparedSide
    tgt: PreparedSide


@dataclass
class AlignedPair:
    """Links ``(i, j)`` (source word ``i``, target word ``j``) and, when kept, the word-level
    attention ``[n_tgt_words, n_src_words]`` they were read from."""

    links: list[Link]
    attention: Optional[Tensor] = None
    token_links: Optional[list[Link]] = None  # the same read at the model's token level, when asked


def prepare_side(line: str, pipe: TextPipeline, dictionary: Dictionary, *, pretokenized: bool,
                 path: str, lineno: int) -> PreparedSide:
    """Words of ``line`` -> tokens -> BPE pieces -> ids, remembering each piece's word.

    ``pretokenized``: the words already are the model's tokens (a split's ``.tok`` text),
    only lowercasing (if the model's pipeline lowercases) and BPE are applied.
    Otherwise the pipeline's tokenizer runs on the raw line and its tokens are mapped back
    to the whitespace words (Moses may split one word into several tokens).
    """
    words = split_words(line)
    if not words:
        raise InputError(path, lineno, "empty line: every sentence pair needs at least one word on each side")
    if pretokenized:
        tokens = [w.lower() for w in words] if pipe.lowercase else list(words)
    else:
        tokens = pipe.tokenize(line)
        if not tokens:
            raise InputError(path, lineno, "no tokens left after tokenization")
    pieces = pipe.apply_bpe(tokens)
    word_of = piece_word_index(line, tokens, pieces, identity_tokens=pretokenized or pipe.tokenizer == "none")
    return PreparedSide(words=words, ids=dictionary.encode(pieces, add_eos=True), word_of=word_of,
                        tokens=list(tokens), token_of=piece_to_token_index(pieces))


def prepare_corpus(src_lines: Sequence[str], tgt_lines: Sequence[str], src_pipe: TextPipeline,
                   tgt_pipe: TextPipeline, src_dict: Dictionary, tgt_dict: Dictionary, *,
                   pretokenized: bool, src_path: str, tgt_path: str) -> list[PreparedPair]:
    """Prepare every line pair (see :func:`prepare_side`); errors name file and line."""
    if len(src_lines) != len(tgt_lines):
        raise InputError(None, None, f"files are not parallel: {src_path} has {len(src_lines)} lines, "
                                     f"{tgt_path} has {len(tgt_lines)} lines")
    return [
        PreparedPair(
            prepare_side(s, src_pipe, src_dict, pretokenized=pretokenized, path=src_path, lineno=n),
            prepare_side(t, tgt_pipe, tgt_dict, pretokenized=pretokenized, path=tgt_path, lineno=n),
        )
        for n, (s, t) in enumerate(zip(src_lines, tgt_lines), start=1)
    ]


def length_batches(pairs: Sequence[PreparedPair], batch_size: Optional[int],
                   max_tokens: Optional[int]) -> list[list[int]]:
    """Indices grouped into batches of similar length (sorted by target, then source pieces).

    ``max_tokens`` bounds ``sentences x longest side`` (a sentence longer than the budget gets
    a batch of its own); ``batch_size`` bounds the number of sentences.
    """
    if not pairs:
        return []
    src_sizes = np.array([len(p.src.ids) for p in pairs], dtype=np.int64)
    tgt_sizes = np.array([len(p.tgt.ids) for p in pairs], dtype=np.int64)
    return make_batches(src_sizes, tgt_sizes, max_tokens=max_tokens, batch_size=batch_size, shuffle=False)


def force_align(model: EnsembleModel, pairs: Sequence[PreparedPair], *, align_shift: int,
                batch_size: Optional[int] = 64, max_tokens: Optional[int] = None,
                device: torch.device | str | None = None, keep_attention: Iterable[int] = (),
                on_batch: Optional[Callable[[int], None]] = None, token_links: bool = False,
                posterior: bool = False) -> list[AlignedPair]:
    """Force-decode every pair and read one link per target word off the attention.

    Results are in input order.  ``keep_attention``: indices of pairs whose word-level
    attention matrix is returned too (for plots; keeping all of them would cost memory).
    ``on_batch(n)`` is called after each batch of ``n`` sentences (progress display).
    ``token_links``: also read links between the model's tokens (``AlignedPair.token_links``).
    ``posterior``: read links off the attention posterior given each target word, not the
    attention (:mod:`nmtkit.models.posterior`; only with ``align_shift`` 0).
    """
    if not model.has_attention:
        raise NmtkitError(f"{', '.join(model.names)}: model has no attention, so it cannot align words")
    check_posterior_options(model, posterior, align_shift)
    keep = set(keep_attention)
    out: list[Optional[AlignedPair]] = [None] * len(pairs)
    for idx in length_batches(pairs, batch_size, max_tokens):
        src, slen = collate([pairs[i].src.ids for i in idx], device)
        tgt, tlen = collate([pairs[i].tgt.ids for i in idx], device)
        for i, res in zip(idx, score_references(model, src, slen, tgt, tlen, tgt if posterior else None)):
            if res.attention is None:
                raise NmtkitError(f"{', '.join(model.names)}: model returned no attention")
            p = pairs[i]
            merged = merge_attention(res.attention, p.src.word_of, p.tgt.word_of, align_shift,
                                     len(p.src.words), len(p.tgt.words))
            tok = (align_words(res.attention, p.src.token_of, p.tgt.token_of, align_shift, len(p.src.tokens),
                               len(p.tgt.tokens)) if token_links else None)
            out[i] = AlignedPair(links=links_from_merged(merged), attention=merged.float() if i in keep else None,
                                 token_links=tok)
        if on_batch is not None:
            on_batch(len(idx))
    return out  # type: ignore[return-value]


def check_posterior_options(model: EnsembleModel, posterior: bool, align_shift: int) -> None:
    """The attention posterior exists for models that compute it, and it is already the link of
    the word it was computed for, so it is not shifted."""
    if not posterior:
        return
    if not model.has_posterior:
        raise NmtkitError(f"{', '.join(model.names)}: the attention posterior (--posterior) is computed by "
                          "rnnsearch and luong models with attention only")
    if align_shift:
        raise NmtkitError("--posterior reads each target word's own posterior: use it with --align-shift 0")


def flip(links: Iterable[Link]) -> list[Link]:
    """Links of a target->source model, ``(target word, source word)``, turned into ``(i, j)``."""
    return sorted((j, i) for i, j in links)


# -- lexical dictionary -----------------------------------------------------------------------
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
    entries = []
    for src, tgts in counts.items():
        ranked = sorted(tgts.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]
        kept = [(tgt, n) for tgt, n in ranked if n >= min_count]
        entries.extend((src, tgt, n, kept[0][1]) for tgt, n in kept)
    entries.sort(key=lambda e: (-e[3], e[0], -e[2], e[1]))
    entries = [(src, tgt, n) for src, tgt, n, _ in entries]
    return entries
