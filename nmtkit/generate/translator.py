"""Raw text in, translations out: the library behind ``nmtkit-translate``.

A :class:`Translator` owns an ensemble, the source/target text pipelines, the dictionaries
and the search settings.  It turns a buffer of input lines into :class:`Translation` records
(sorted by length for batching, returned in input order) with everything the output formats
need: detokenized text, tokens, scores, per-token log-probs, word alignments.

As a library (``from nmtkit import Translator``)::

    t = Translator.from_checkpoint("ckpt.pt", beam=5)
    t.translate(["A man rides a bike ."])                  # -> ["..."]
    t.translate(["A man rides a bike ."], details=True)    # -> [Translation(...)] with scores

``nmtkit-translate`` builds its translator with :meth:`Translator.from_checkpoint` too and feeds
it numbered buffers (:meth:`Translator.translate_indexed`) as they stream in.
"""
from __future__ import annotations

import numbers
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Sequence, overload

import torch

from nmtkit.data.dataset import pad_sequences
from nmtkit.data.text_pipeline import TextPipeline, merge_bpe, piece_to_token_index, split_words
from nmtkit.data.word_index import piece_word_index
from nmtkit.errors import NmtkitError
from nmtkit.generate.search import EagerSearch, Hypothesis, SearchOptions, Searcher, beam_search
from nmtkit.generate.bundle import ModelBundle
from nmtkit.generate.checkpoint_paths import PathsLike
from nmtkit.generate.ensemble import EnsembleModel
from nmtkit.generate.inference_options import LoadOptions, OutputOptions, sort_settings
from nmtkit.generate.shortlist import Shortlist, sentence_keys
from nmtkit.generate.unk import replace_unks
from nmtkit.generate.word_alignment import align_words
from nmtkit.utils.memory import allocation_guard

UNK = "<unk>"
#: Source pieces kept when neither --max-source-len nor the model sets a limit.
DEFAULT_MAX_SOURCE_LEN = 400


@dataclass
class Candidate:
    """One output hypothesis of one input line."""

    text: str  # detokenized, de-BPE'd: what the user reads
    tokens: list[str]  # tokenized, BPE merged (fairseq's H line)
    pieces: list[str]  # what the model emitted (after unk replacement)
    score: float  # length-normalized search score
    positional_scores: list[float]  # log-prob of each piece and of </s>
    alignment: list[tuple[int, int]] = field(default_factory=list)  # (input word, output word)


@dataclass
class Translation:
    index: int  # 0-based input line number
    source: str  # the input line as given
    source_tokens: list[str]
    candidates: list[Candidate]
    truncated_from: Optional[int] = None  # source pieces before truncation, if truncated


def _check_lines(items: list, batch_size: Optional[int], max_tokens: Optional[int]) -> None:
    """What :meth:`Translator.translate` takes, said in one exception (a None among the lines was
    an AttributeError from deep in the tokenizer, a mixed list a failed unpacking)."""
    pairs = all(isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], numbers.Integral) and isinstance(x[1], str)
                for x in items)
    if not pairs and not all(isinstance(x, str) for x in items):
        bad = next(x for x in items if not isinstance(x, str))
        raise TypeError("Translator.translate() takes a list of str lines or of (index, line) pairs, "
                        f"not a mix, and found {type(bad).__name__} {bad!r:.40}")
    for name, value in (("batch_size", batch_size), ("max_tokens", max_tokens)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive int or None, got {value!r}")


class _CaseFoldLexicon(dict):
    """A lexicon consulted with lowercased keys (for lowercasing pipelines)."""

    def get(self, key, default=None):  # noqa: ANN001, ANN201
        return super().get(key.lower(), default)


class Translator:
    """Raw text in, translations out: a thin front-end over a :class:`ModelBundle` (the model,
    its pipelines, device, precision and batching) with the search options and output extras."""

    def __init__(
        self,
        bundle: ModelBundle,
        search: SearchOptions = SearchOptions(),
        *,
        replace_unk: bool = False,
        lexicon: Optional[dict[str, str]] = None,
        alignments: bool = False,
        align_shift: int = 0,
        max_source_len: Optional[int] = None,
        shortlist: Optional[Shortlist] = None,
        unk_posterior: bool = False,
    ) -> None:
        model = bundle.model
        if (replace_unk or alignments) and not model.has_attention:
            what = "--replace-unk" if replace_unk else "alignments"
            raise NmtkitError(f"{what} needs attention, but the model has none (attention-free encoder-decoder)")
        check_unk_posterior(model, unk_posterior, replace_unk)
        self.bundle = bundle
        # the same tokenizer without lowercasing: unknown-word replacement copies words in their input case
        src_pipe = bundle.src_pipe
        self._cased_pipe = TextPipeline(src_pipe.lang, src_pipe.tokenizer) if src_pipe.lowercase else src_pipe
        self.search = search
        self.replace_unk = replace_unk
        self.lexicon = _CaseFoldLexicon(lexicon or {}) if src_pipe.lowercase else (lexicon or {})
        self.alignments = alignments
        self.align_shift = align_shift
        # a user's bound above the model's (learned positions) would fail mid-file: the lower one wins
        bounds = [b for b in (max_source_len, bundle.max_source_len()) if b]
        self.max_source_len = min(bounds) if bounds else DEFAULT_MAX_SOURCE_LEN
        self.shortlist = shortlist
        # the bundle's searcher; a shortlist changes the output layer from batch to batch: the eager one
        self.searcher: Searcher = EagerSearch() if shortlist is not None else bundle.searcher
        self.unk_posterior = unk_posterior
        self.n_sentences = 0
        self.n_target_tokens = 0
        self.seconds = 0.0

    def build_pipelines(self) -> None:
        """Build the tokenizers and BPE tables now; otherwise the first line builds them
        (:meth:`TextPipeline.build`; nmtkit-translate does it during its start-up)."""
        for pipe in (self.bundle.src_pipe, self._cased_pipe, self.bundle.tgt_pipe):
            pipe.build()

    # the bundle's parts, as the translator's (the library API of earlier versions)
    model = property(lambda self: self.bundle.model)
    src_pipe = property(lambda self: self.bundle.src_pipe)
    tgt_pipe = property(lambda self: self.bundle.tgt_pipe)
    src_dict = property(lambda self: self.bundle.src_dict)
    tgt_dict = property(lambda self: self.bundle.tgt_dict)
    device = property(lambda self: self.bundle.device)

    @classmethod
    def from_checkpoint(cls, path: PathsLike, search: Optional[SearchOptions] = None, load: Optional[LoadOptions] = None,
                        output: Optional[OutputOptions] = None, **settings: Any) -> "Translator":
        """Load a checkpoint (or an ensemble: a list of paths, or ``"a.pt:b.pt"``) ready to translate.

        ``search``: the search's settings (:class:`~nmtkit.generate.search_options.SearchOptions`);
        ``load``: device, precision, quantization, batching, CUDA graphs, a data directory's
        pipelines (:class:`~nmtkit.generate.inference_options.LoadOptions`); ``output``: unknown-word
        replacement, alignments, truncation, a shortlist
        (:class:`~nmtkit.generate.inference_options.OutputOptions`).  Any of their fields may be
        given as a keyword instead (``beam=5, device="cpu"``); the defaults are theirs.
        """
        from nmtkit.data.lexicon import load_lexicon

        search, load, output = sort_settings(settings, search, load, output)
        replace_unk = output.replace_unk
        lexicon = None
        if isinstance(replace_unk, dict):
            lexicon = replace_unk
        elif replace_unk is not None and not isinstance(replace_unk, bool):
            lexicon = load_lexicon(replace_unk)
        if output.unk_posterior and load.quantize != "none":
            raise NmtkitError("--unk-posterior needs the float32 model: not with --quantize")
        if load.cuda_graphs and output.shortlist is not None:
            raise NmtkitError("--cuda-graphs replays a fixed output layer: not with --shortlist")
        bundle = ModelBundle.load(path, load)
        table = None
        if output.shortlist is not None:
            table = Shortlist.load(output.shortlist, bundle.tgt_pipe, bundle.tgt_dict, k=output.shortlist_k,
                                   frequent=output.shortlist_frequent, lowercase_source=bundle.src_pipe.lowercase)
        alignments = bundle.model.has_attention if output.alignments == "auto" else output.alignments
        return Translator(bundle, search, replace_unk=replace_unk is True or lexicon is not None, lexicon=lexicon,
                          alignments=bool(alignments), align_shift=output.align_shift, max_source_len=output.max_source_len,
                          shortlist=table, unk_posterior=output.unk_posterior)

    # -- encoding input ---------------------------------------------------------------------
    def _prepare(self, index: int, line: str) -> dict:
        cased = self._cased_pipe.tokenize(line)
        tokens = [t.lower() for t in cased] if self.src_pipe.lowercase else cased
        pieces = self.src_pipe.apply_bpe(tokens)
        truncated_from = None
        if self.max_source_len is not None and len(pieces) > self.max_source_len:
            truncated_from = len(pieces)
            pieces = pieces[: self.max_source_len]
        tok_of_piece = piece_to_token_index(pieces)
        return {
            "index": index, "line": line, "tokens": tokens, "pieces": pieces, "truncated_from": truncated_from,
            # per piece: the original-case token it belongs to (what unk replacement copies)
            "copy_words": [cased[k] for k in tok_of_piece],
            "ids": self.src_dict.encode(pieces, add_eos=False),
        }

    # -- the main entries -------------------------------------------------------------------
    @overload
    def translate(self, lines: Sequence[str], batch_size: Optional[int] = None, max_tokens: Optional[int] = None,
                  *, details: Literal[False] = False) -> list[str]: ...

    @overload
    def translate(self, lines: Sequence[str], batch_size: Optional[int] = None, max_tokens: Optional[int] = None,
                  *, details: Literal[True]) -> list[Translation]: ...

    def translate(self, lines, batch_size=None, max_tokens=None, *, details=False):  # noqa: ANN001, ANN201
        """Translate lines of raw text; one result per line, in order.

        Returns the best translation of each line as a string, or with ``details=True`` a
        :class:`Translation` per line (``candidates``: the n-best list with scores, per-token
        log-probabilities and, if the translator was built with ``alignments``, word alignments).
        ``(index, line)`` pairs (the streaming form) are accepted too and always give records.
        """
        if isinstance(lines, (str, bytes)):
            raise TypeError("Translator.translate() takes a list of lines, not one string")
        items = list(lines)
        _check_lines(items, batch_size, max_tokens)
        if items and isinstance(items[0], tuple):
            return self.translate_indexed(items, batch_size, max_tokens)
        records = self.translate_indexed(list(enumerate(items)), batch_size, max_tokens)
        return records if details else [r.candidates[0].text for r in records]

    def translate_indexed(self, lines: Sequence[tuple[int, str]], batch_size: Optional[int] = None,
                          max_tokens: Optional[int] = None) -> list[Translation]:
        """Translate ``(index, line)`` pairs; results in the order given (the CLI's streaming buffers)."""
        t0 = time.perf_counter()
        items = [self._prepare(i, line) for i, line in lines]
        results: list[Optional[Translation]] = [None] * len(items)
        todo = []
        for k, it in enumerate(items):
            if not it["pieces"]:  # empty input line -> empty output, no model call; still nbest
                # entries, as a Moses n-best reader expects every sentence id to have nbest of them
                empty = [Candidate("", [], [], 0.0, [0.0]) for _ in range(self.search.nbest)]
                results[k] = Translation(it["index"], it["line"], [], empty)
            else:
                todo.append(k)
        sizes = [len(items[k]["ids"]) + 1 for k in todo]
        for group in self.bundle.batches(sizes, batch_size=batch_size, max_tokens=max_tokens):
            batch = [todo[i] for i in group]
            hyps = self._search([items[k]["ids"] for k in batch], self._shortlist_ids([items[k] for k in batch]))
            posteriors = self._unk_posteriors([items[k]["ids"] for k in batch], hyps) if self.unk_posterior else {}
            for j, (k, nbest) in enumerate(zip(batch, hyps)):
                results[k] = self._finish(items[k], nbest, posteriors.get(j))
        self.seconds += time.perf_counter() - t0
        self.n_sentences += len(items)
        out = [r for r in results if r is not None]
        self.n_target_tokens += sum(len(r.candidates[0].pieces) + 1 for r in out if r.candidates[0].pieces)
        return out

    def translate_ids(self, id_lists: Sequence[Sequence[int]]) -> list[list[Hypothesis]]:
        """Search from sources already encoded (ids without ``</s>``, e.g. a binarized split: no
        re-tokenization, no truncation), in the bundle's batches; n-best lists in input order."""
        out: list[list[Hypothesis]] = [[] for _ in id_lists]
        for group in self.bundle.batches([len(ids) + 1 for ids in id_lists]):
            for i, nbest in zip(group, self._search([list(id_lists[i]) for i in group])):
                out[i] = nbest
        return out

    def _shortlist_ids(self, batch: list[dict]) -> Optional[torch.Tensor]:
        """The output-layer shortlist of one batch (None without a shortlist table)."""
        if self.shortlist is None:
            return None
        low = self.src_pipe.lowercase
        return self.shortlist.ids_for(
            sentence_keys(split_words(it["line"]), it["tokens"], it["pieces"], low) for it in batch
        ).to(self.device)

    def _search(self, id_lists: list[list[int]], shortlist: Optional[torch.Tensor] = None) -> list[list[Hypothesis]]:
        src, lengths = (t.to(self.device) for t in pad_sequences(id_lists))
        with allocation_guard(f"in the search of {len(id_lists)} sentences with --beam {self.search.beam} "
                              "(lower --beam, --batch-size or --max-tokens)"), self.bundle.autocast():
            return beam_search(self.model, src, lengths, self.search, self.replace_unk or self.alignments, shortlist, self.searcher)

    def _unk_posteriors(self, id_lists: list[list[int]], hyps: list[list[Hypothesis]]) -> dict[int, dict[int, torch.Tensor]]:
        """``sentence -> candidate -> attention [len + 1, S]`` of every candidate with an ``<unk>``,
        whose ``<unk>`` rows are the posterior given the ``<unk>`` (the other rows: the prior),
        from forced passes over them in batches of at most ``batch_size`` candidates."""
        from nmtkit.data.dictionary import PAD_ID, UNK_ID
        from nmtkit.generate.forced import score_references

        keys = [(j, c) for j, nbest in enumerate(hyps) for c, h in enumerate(nbest) if UNK_ID in h.tokens]
        out: dict[int, dict[int, torch.Tensor]] = {}
        step = self.bundle.batch_size
        for k0 in range(0, len(keys), step):
            part = keys[k0 : k0 + step]
            src, slen = (t.to(self.device) for t in pad_sequences([id_lists[j] for j, _ in part]))
            tgt, tlen = (t.to(self.device) for t in pad_sequences([hyps[j][c].tokens for j, c in part]))
            only_unks = tgt.masked_fill(tgt.ne(UNK_ID), PAD_ID)  # the likelihood of the <unk> rows only
            with self.bundle.autocast():
                scored = score_references(self.model, src, slen, tgt, tlen, only_unks)
            for (j, c), r in zip(part, scored):
                if r.attention is not None:
                    out.setdefault(j, {})[c] = r.attention
        return out

    def _finish(self, item: dict, nbest: list[Hypothesis], unk_attention: Optional[dict[int, torch.Tensor]] = None) -> Translation:
        """Candidates of one sentence; ``unk_attention``: per candidate index, the attention to
        replace its ``<unk>`` from (default: the search's)."""
        cands = []
        for c, hyp in enumerate(nbest):
            pieces = self.tgt_dict.decode(hyp.tokens, strip_specials=False)
            if self.replace_unk and UNK in pieces:
                attention = (unk_attention or {}).get(c, hyp.attention)
                pieces = replace_unks(pieces, attention, item["copy_words"], unk=UNK, lexicon=self.lexicon, bpe_marker=None)
            tokens = merge_bpe(pieces)
            text = self.tgt_pipe.detokenize(tokens)
            cand = Candidate(text, tokens, pieces, hyp.score, [round(x, 4) for x in hyp.positional_scores.cpu().numpy().tolist()])
            if self.alignments and hyp.attention is not None:
                cand.alignment = self._word_alignment(item, pieces, tokens, text, hyp.attention)
            cands.append(cand)
        return Translation(item["index"], item["line"], item["tokens"], cands, item["truncated_from"])

    def _word_alignment(self, item: dict, pieces: list[str], tokens: list[str], text: str, attention: torch.Tensor) -> list[tuple[int, int]]:
        """(input word, output word) links: pieces -> tokens -> the whitespace words as written."""
        src_word_of = piece_word_index(item["line"], item["tokens"], item["pieces"], self.src_pipe.tokenizer == "none")
        tgt_word_of = piece_word_index(text, tokens, pieces, self.tgt_pipe.tokenizer == "none")
        return align_words(attention, src_word_of, tgt_word_of, self.align_shift,
                           n_src_words=len(split_words(item["line"])), n_tgt_words=len(split_words(text)))


def check_unk_posterior(model: EnsembleModel, unk_posterior: bool, replace_unk: bool) -> None:
    """``--unk-posterior`` refines ``--replace-unk`` and needs a model that computes posteriors."""
    if not unk_posterior:
        return
    if not replace_unk:
        raise NmtkitError("--unk-posterior chooses the source word of --replace-unk: give --replace-unk too")
    if not model.has_posterior:
        raise model.no_posterior_error("--unk-posterior")
