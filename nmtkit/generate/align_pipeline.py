"""Word alignments of a parallel corpus by forced decoding with an attention model.

What this module adds to the pieces it reuses (text pipelines, :mod:`nmtkit.generate.forced`,
:mod:`nmtkit.generate.word_alignment`, the model bundle's batcher): it keeps track of which
*word of the line as the user gave it* every subword piece came from, so that links index
those words whatever tokenization and BPE the model applies inside.  The lexicon a run's
token links are counted into is :mod:`nmtkit.data.lexicon`.

Word-level attention (see :mod:`nmtkit.generate.word_alignment`): a source word's column is
the **sum** of its pieces' columns (the attention mass the word received), a target word's
row is the **mean** of its pieces' rows (long words do not weigh more); the ``</s>`` column
is dropped and rows are renormalised over the real source pieces.  Each target word is
linked to its most-attended source word (one link per target word at most).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Optional, Sequence

from torch import Tensor

from nmtkit.data.dataset import pad_sequences
from nmtkit.data.dictionary import Dictionary
from nmtkit.data.text_pipeline import TextPipeline, piece_to_token_index, split_words
from nmtkit.data.word_index import piece_word_index
from nmtkit.errors import InputError, NmtkitError
from nmtkit.generate.ensemble import EnsembleModel
from nmtkit.generate.forced import score_references
from nmtkit.generate.word_alignment import align_words, links_from_merged, merge_attention

if TYPE_CHECKING:
    from nmtkit.generate.bundle import ModelBundle

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


def force_align(bundle: "ModelBundle", pairs: Sequence[PreparedPair], *, align_shift: int,
                keep_attention: Iterable[int] = (), on_batch: Optional[Callable[[int], None]] = None,
                token_links: bool = False, posterior: bool = False) -> list[AlignedPair]:
    """Force-decode every pair with the bundle's model, in its batches and precision, and read one
    link per target word off the attention.

    Results are in input order.  ``keep_attention``: indices of pairs whose word-level
    attention matrix is returned too (for plots; keeping all of them would cost memory).
    ``on_batch(n)`` is called after each batch of ``n`` sentences (progress display).
    ``token_links``: also read links between the model's tokens (``AlignedPair.token_links``).
    ``posterior``: read links off the attention posterior given each target word, not the
    attention (:mod:`nmtkit.models.posterior`; only with ``align_shift`` 0).
    """
    model = bundle.model
    if not model.has_attention:
        raise NmtkitError(f"{', '.join(model.names)}: model has no attention, so it cannot align words")
    check_posterior_options(model, posterior, align_shift)
    keep = set(keep_attention)
    out: list[Optional[AlignedPair]] = [None] * len(pairs)
    # target length first: the decoder runs over every padded target position
    batches = bundle.batches([len(p.src.ids) for p in pairs], [len(p.tgt.ids) for p in pairs], sort_by="target")
    for idx in batches:
        src, slen = (t.to(bundle.device) for t in pad_sequences([pairs[i].src.ids for i in idx], append_eos=False))
        tgt, tlen = (t.to(bundle.device) for t in pad_sequences([pairs[i].tgt.ids for i in idx], append_eos=False))
        with bundle.autocast():
            results = score_references(model, src, slen, tgt, tlen, tgt if posterior else None)
        for i, res in zip(idx, results):
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
        raise model.no_posterior_error("--posterior")
    if align_shift:
        raise NmtkitError("--posterior reads each target word's own posterior: use it with --align-shift 0")


def flip(links: Iterable[Link]) -> list[Link]:
    """Links of a target->source model, ``(target word, source word)``, turned into ``(i, j)``."""
    return sorted((j, i) for i, j in links)


