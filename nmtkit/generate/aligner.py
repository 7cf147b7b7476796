"""What ``nmtkit-align`` computes, as a library: the command only parses options and prints.

``Aligner.from_checkpoint("fwd.pt", reverse_path="rev.pt")`` loads a source->target model (and
optionally a target->source one, whose links are symmetrized with the forward ones);
:meth:`Aligner.align` gives word-level links ``(i, j)`` per sentence pair, indexing the
whitespace-separated words exactly as given; :meth:`Aligner.align_corpus` returns everything the
command prints (per-direction links, attention for plots).  :func:`read_gold_links` and
:func:`score_alignments` give precision, recall and AER against gold links.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence, Union

import torch

from nmtkit.data.lexicon import build_lexicon, count_word_pairs, lexicon_lines
from nmtkit.data.text_pipeline import TextPipeline
from nmtkit.errors import NmtkitError
from nmtkit.evaluate.aer import AERResult, alignment_error_rate
from nmtkit.evaluate.symmetrize import ALL_METHODS, SOFT_METHODS, check_symmetrize_options, symmetrize as combine
from nmtkit.generate.align_pipeline import (AlignedPair, Link, PreparedPair, check_posterior_options, flip, force_align,
                                            prepare_corpus)
from nmtkit.generate.bundle import DEFAULT_BATCH_SIZE, ModelBundle
from nmtkit.generate.checkpoint_paths import PathsLike, checkpoint_paths
from nmtkit.generate.inference_options import LoadOptions
from nmtkit.generate.word_alignment import soft_symmetrize
from nmtkit.utils.checks import text_lines

SYMMETRIZATIONS = ALL_METHODS
DEFAULT_SYMMETRIZATION = "grow-diag-final-and"


@dataclass
class AlignmentRun:
    """Everything of one corpus alignment: the prepared pairs, the forward results (with the
    attention of the pairs asked for), each direction's links and the final links."""

    prepared: list[PreparedPair]
    forward: list[AlignedPair]
    directions: dict[str, list[list[Link]]]
    links: list[list[Link]]
    method: Optional[str] = None  # the symmetrization, when a reverse model was used
    src_name: str = "<source>"
    tgt_name: str = "<target>"
    extra: dict[str, Any] = field(default_factory=dict)
    #: links between the model's tokens (``align_corpus(token_links=True)``), combined like ``links``
    token_links: Optional[list[list[Link]]] = None


class Aligner:
    """Forced-decoding word aligner over a checkpoint or ensemble (and an optional reverse model):
    a thin front-end over :class:`~nmtkit.generate.bundle.ModelBundle` (one per direction)."""

    def __init__(self, bundle: ModelBundle, *, reverse: Optional[ModelBundle] = None,
                 symmetrize: Optional[str] = None, align_shift: int = 0, posterior: bool = False) -> None:
        check_symmetrize_options(symmetrize, reverse is not None)
        for b in (bundle, reverse):
            if b is not None:
                check_posterior_options(b.model, posterior, align_shift)
        if reverse is not None:
            check_reverse(bundle, reverse)
        self.bundle, self.reverse = bundle, reverse
        self.posterior = posterior
        self.method = (symmetrize or DEFAULT_SYMMETRIZATION) if reverse is not None else None
        self.align_shift = align_shift

    @classmethod
    def from_checkpoint(cls, path: PathsLike, *, reverse_path: Optional[PathsLike] = None,
                        symmetrize: Optional[str] = None, align_shift: int = 0, batch_size: int = DEFAULT_BATCH_SIZE,
                        max_tokens: Optional[int] = None, device: Union[str, torch.device, None] = None,
                        posterior: bool = False, amp: str = "auto", alignment_layer: Optional[int] = None,
                        alignment_heads: Optional[int] = None) -> "Aligner":
        """Load the source->target checkpoint(s) and, if given, the target->source ones.

        ``symmetrize`` (with ``reverse_path``): intersect, union, grow-diag-final or
        grow-diag-final-and (the default).  ``align_shift``: read target word t's links from step t+shift.
        ``posterior``: read links off the attention posterior given each target word (rnnsearch, luong).
        ``amp``: mixed precision of the forced decoding (:func:`nmtkit.utils.amp.resolve_amp`).
        ``alignment_layer``/``alignment_heads``: see :class:`~nmtkit.generate.inference_options.LoadOptions`.
        """
        checkpoint_paths(path)  # every file of both directions exists, before any is loaded
        if reverse_path is not None:
            checkpoint_paths(reverse_path)
        settings = LoadOptions(device=device, amp=amp, batch_size=batch_size, max_tokens=max_tokens,
                               alignment_layer=alignment_layer, alignment_heads=alignment_heads)
        bundle = ModelBundle.load(path, settings)
        reverse = ModelBundle.load(reverse_path, settings) if reverse_path is not None else None
        return cls(bundle, reverse=reverse, symmetrize=symmetrize, align_shift=align_shift, posterior=posterior)

    @property
    def src_pipe(self) -> TextPipeline:
        return self.bundle.src_pipe

    @property
    def tgt_pipe(self) -> TextPipeline:
        return self.bundle.tgt_pipe

    # -- inputs -------------------------------------------------------------------------------
    def read_split(self, data_dir: Union[str, os.PathLike], split: str) -> tuple[list[str], list[str], str, str]:
        """A preprocessed split's ``.tok`` text (source, target, their file names), refused when
        it was not tokenized as the model tokenizes."""
        data = self.bundle.fit_data_dir(data_dir, "tokens")
        ds = data.load_split(split)
        src_path = f"{data.split_prefix(split, data.src_lang)}.tok"
        tgt_path = f"{data.split_prefix(split, data.tgt_lang)}.tok"
        src, tgt = ds.tokens_text(data.src_lang), ds.tokens_text(data.tgt_lang)
        if not src:
            raise NmtkitError(f"nothing to align: split {split!r} of {data_dir} is empty")
        return src, tgt, src_path, tgt_path

    def prepare(self, src_lines: Sequence[str], tgt_lines: Sequence[str], *, pretokenized: bool = False,
                src_name: str = "<source>", tgt_name: str = "<target>") -> tuple[list[PreparedPair], Optional[list[PreparedPair]]]:
        """Both directions' prepared pairs; every line is checked before any decoding."""
        src_lines, tgt_lines = text_lines(src_lines, "src_lines"), text_lines(tgt_lines, "tgt_lines")
        b, r = self.bundle, self.reverse
        prepared = prepare_corpus(src_lines, tgt_lines, b.src_pipe, b.tgt_pipe, b.src_dict, b.tgt_dict,
                                  pretokenized=pretokenized, src_path=src_name, tgt_path=tgt_name)
        rev_prepared = None
        if r is not None:
            rev_prepared = prepare_corpus(tgt_lines, src_lines, r.src_pipe, r.tgt_pipe, r.src_dict, r.tgt_dict,
                                          pretokenized=pretokenized, src_path=tgt_name, tgt_path=src_name)
        return prepared, rev_prepared

    # -- aligning -----------------------------------------------------------------------------
    def align(self, src_lines: Sequence[str], tgt_lines: Sequence[str]) -> list[list[Link]]:
        """Links ``(source word, target word)`` per sentence pair (symmetrized with a reverse model)."""
        return self.align_corpus(src_lines, tgt_lines).links

    def align_corpus(self, src_lines: Sequence[str], tgt_lines: Sequence[str], *, pretokenized: bool = False,
                     src_name: str = "<source>", tgt_name: str = "<target>", keep_attention: Iterable[int] = (),
                     show_progress: bool = False,
                     prepared: Optional[tuple[list[PreparedPair], Optional[list[PreparedPair]]]] = None,
                     token_links: bool = False) -> AlignmentRun:
        """Align every pair, per direction, then symmetrize; ``keep_attention``: indices of pairs
        whose word-level attention is kept (for heatmaps).  ``prepared``: from :meth:`prepare`.
        ``token_links``: also links between the model's tokens (``AlignmentRun.token_links``, what
        :meth:`build_lexicon` counts); symmetrized where both models tokenized a pair alike (the
        pairs where they did not keep the forward token links: ``extra["token_links_forward_only"]``)."""
        src_lines, tgt_lines = text_lines(src_lines, "src_lines"), text_lines(tgt_lines, "tgt_lines")
        fwd_pairs, rev_pairs = prepared or self.prepare(src_lines, tgt_lines, pretokenized=pretokenized,
                                                        src_name=src_name, tgt_name=tgt_name)
        soft = self.method in SOFT_METHODS
        # a soft symmetrization reads every pair's word-level attention of both directions (kept
        # in memory: about 4 bytes x source words x target words per pair)
        keep_fwd = range(len(fwd_pairs)) if soft else keep_attention
        fwd = self._direction("align", self.bundle, fwd_pairs, keep_fwd, show_progress, token_links)
        links = [a.links for a in fwd]
        tok_links = [a.token_links or [] for a in fwd] if token_links else None
        directions = {"source->target": links}
        extra: dict[str, Any] = {}
        if self.reverse is not None:
            assert rev_pairs is not None and self.method is not None
            rev = self._direction("align (reverse)", self.reverse, rev_pairs,
                                  range(len(rev_pairs)) if soft else (), show_progress, token_links)
            back = [flip(a.links) for a in rev]
            directions["target->source"] = back
            if soft:
                links = [sorted(soft_symmetrize(_attention(f), _attention(r))) for f, r in zip(fwd, rev)]
                keep = set(keep_attention)
                for k, a in enumerate(fwd):  # keep only the matrices asked for (heatmaps)
                    if k not in keep:
                        a.attention = None
            else:
                links = [sorted(combine(f, b, self.method)) for f, b in zip(links, back)]
            directions[self.method] = links
            if tok_links is not None:
                alike = [(rp.src.tokens, rp.tgt.tokens) == (fp.tgt.tokens, fp.src.tokens)
                         for fp, rp in zip(fwd_pairs, rev_pairs)]
                # token-level attention is not kept, so a soft method combines token links with its
                # hard counterpart (grow-diag-final-and)
                hard = "grow-diag-final-and" if soft else self.method
                tok_links = [sorted(combine(f, flip(r.token_links or []), hard)) if same else f
                             for f, r, same in zip(tok_links, rev, alike)]
                extra["token_links_forward_only"] = alike.count(False)
        return AlignmentRun(fwd_pairs, fwd, directions, links, self.method, src_name, tgt_name, extra, tok_links)

    def build_lexicon(self, run: AlignmentRun, *, min_count: int = 2, top_k: Optional[int] = None) -> list[str]:
        """The lines of a ``--build-dict`` file from an alignment run (no line terminators).

        Counts the run's links between the model's tokens (``align_corpus(token_links=True)``),
        because ``nmtkit-translate`` looks up and inserts tokens: after its tokenizer (a raw
        word ``cat.`` is the tokens ``cat`` and ``.``) and lowercased where its pipeline lowercases.
        ``top_k=None``: the 1-best ``source target`` dictionary of ``--replace-unk``; ``top_k=K``:
        ``source target count`` lines, K per source word (a ``--shortlist`` table).
        """
        if run.token_links is None:
            raise NmtkitError("building a lexicon needs token links: align with align_corpus(..., token_links=True)")
        tokens = [(p.src.tokens, p.tgt.tokens) for p in run.prepared]
        entries = build_lexicon(count_word_pairs(tokens, run.token_links), min_count, top_k or 1)  # the format's ranking
        return lexicon_lines(entries, with_counts=bool(top_k))

    def _direction(self, label: str, bundle: ModelBundle, pairs: list[PreparedPair], keep: Iterable[int],
                   show_progress: bool, token_links: bool = False) -> list[AlignedPair]:
        """Force-align one direction, behind a progress bar (sentences/s) when asked."""
        from contextlib import nullcontext

        from nmtkit.utils.progress import progress_bar

        with (progress_bar("sentences", transient=True) if show_progress else nullcontext()) as progress:
            on_batch = None
            if progress is not None:
                task = progress.add_task(label, total=len(pairs))
                on_batch = lambda n: progress.advance(task, n)  # noqa: E731
            return force_align(bundle, pairs, align_shift=self.align_shift, keep_attention=keep, on_batch=on_batch,
                               token_links=token_links, posterior=self.posterior)


def _attention(pair: AlignedPair) -> torch.Tensor:
    """The attention matrix a soft symmetrization kept for ``pair``."""
    assert pair.attention is not None, "soft symmetrization keeps every attention matrix"
    return pair.attention


def check_reverse(forward: ModelBundle, reverse: ModelBundle) -> None:
    """The reverse model must translate target->source of the forward model."""
    fs, ft = forward.src_pipe.lang, forward.tgt_pipe.lang
    rs, rt = reverse.src_pipe.lang, reverse.tgt_pipe.lang
    if (rs, rt) != (ft, fs):
        raise NmtkitError(f"--reverse-path {reverse.name} translates {rs}->{rt}, but a {ft}->{fs} model is needed "
                          f"(the reverse of --path, which translates {fs}->{ft})")


def read_gold_links(words: Sequence[tuple[Sequence[str], Sequence[str]]], *, gold: Optional[str] = None,
                    sure: Optional[str] = None, possible: Optional[str] = None):  # noqa: ANN201
    """Gold alignments (one per pair) from ``gold`` (``i-j`` sure, ``i?j`` possible) or ``sure``
    [+ ``possible``] files, checked against the pairs' word counts; None when none is given."""
    from nmtkit.data.pharaoh import GoldAlignment
    from nmtkit.evaluate.alignment_io import check_gold_options, read_alignments, read_gold, read_gold_pair

    check_gold_options(gold, sure, possible)
    src_lengths = [len(s) for s, _ in words]
    tgt_lengths = [len(t) for _, t in words]
    if gold is not None:
        return read_gold(gold, src_lengths, tgt_lengths)
    if sure is not None and possible is not None:
        return read_gold_pair(sure, possible, src_lengths, tgt_lengths)
    if sure is not None:
        return [GoldAlignment(sure=s) for s in read_alignments(sure, src_lengths, tgt_lengths)]
    return None


def score_alignments(directions: dict[str, list[list[Link]]], golds: Sequence[Any]) -> list[tuple[str, AERResult]]:
    """Precision, recall and AER of each direction's links (the last one is the final alignment)."""
    return [(name, alignment_error_rate(links, golds)) for name, links in directions.items()]
