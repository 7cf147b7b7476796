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

import os
import time
from dataclasses import dataclass, field
from typing import Literal, Optional, Sequence, Union, overload

import torch

from nmtkit.data.dataset import pad_sequences
from nmtkit.data.text_pipeline import TextPipeline, merge_bpe, piece_to_token_index, split_words
from nmtkit.data.word_index import piece_word_index
from nmtkit.errors import NmtkitError
from nmtkit.generate.beam import Hypothesis, beam_search, check_search_options
from nmtkit.generate.ensemble import EnsembleModel
from nmtkit.generate.quantize import check_quantize, quantize_ensemble
from nmtkit.generate.shortlist import Shortlist, sentence_keys
from nmtkit.generate.unk import replace_unks
from nmtkit.generate.word_alignment import align_words
from nmtkit.utils.amp import autocast, resolve_amp
from nmtkit.utils.memory import allocation_guard

UNK = "<unk>"


@dataclass
class SearchOptions:
    beam: int = 5
    nbest: int = 1
    max_len_a: float = 1.5
    max_len_b: int = 10
    min_len: int = 1
    lenpen: float = 1.0
    lenpen_form: str = "fairseq"
    unkpen: float = 0.0

    def validate(self) -> None:
        check_search_options(self.beam, self.nbest, self.min_len, self.lenpen_form)


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


class _CaseFoldLexicon(dict):
    """A lexicon consulted with lowercased keys (for lowercasing pipelines)."""

    def get(self, key, default=None):  # noqa: ANN001, ANN201
        return super().get(key.lower(), default)


class Translator:
    def __init__(
        self,
        model: EnsembleModel,
        src_pipe: TextPipeline,
        tgt_pipe: TextPipeline,
        search: SearchOptions,
        device: torch.device,
        replace_unk: bool = False,
        lexicon: Optional[dict[str, str]] = None,
        alignments: bool = False,
        align_shift: int = 0,
        max_source_len: Optional[int] = None,
        amp_dtype: Optional[torch.dtype] = None,
        batch_size: int = 32,
        max_tokens: Optional[int] = None,
        shortlist: Optional[Shortlist] = None,
        unk_posterior: bool = False,
    ) -> None:
        search.validate()
        if (replace_unk or alignments) and not model.has_attention:
            what = "--replace-unk" if replace_unk else "alignments"
            raise NmtkitError(f"{what} needs attention, but the model has none (attention-free encoder-decoder)")
        check_unk_posterior(model, unk_posterior, replace_unk)
        self.model = model
        self.src_pipe, self.tgt_pipe = src_pipe, tgt_pipe
        # the same tokenizer without lowercasing: unknown-word replacement copies words in their input case
        self._cased_pipe = TextPipeline(src_pipe.lang, src_pipe.tokenizer) if src_pipe.lowercase else src_pipe
        self.src_dict, self.tgt_dict = model.src_dict, model.tgt_dict
        self.search = search
        self.device = device
        self.replace_unk = replace_unk
        self.lexicon = _CaseFoldLexicon(lexicon or {}) if src_pipe.lowercase else (lexicon or {})
        self.alignments = alignments
        self.align_shift = align_shift
        self.max_source_len = max_source_len
        self.amp_dtype = amp_dtype
        self.batch_size, self.max_tokens = batch_size, max_tokens
        self.shortlist = shortlist
        self.unk_posterior = unk_posterior
        self.warnings: list[str] = []
        self.n_sentences = 0
        self.n_target_tokens = 0
        self.seconds = 0.0

    @classmethod
    def from_checkpoint(
        cls,
        path: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]],
        beam: int = 5,
        *,
        nbest: int = 1,
        device: Union[str, torch.device, None] = None,
        replace_unk: Union[bool, str, os.PathLike, dict[str, str]] = False,
        alignments: Union[bool, Literal["auto"]] = False,
        align_shift: int = 0,
        lenpen: float = 1.0,
        lenpen_form: str = "fairseq",
        max_len_a: float = 1.5,
        max_len_b: int = 10,
        min_len: int = 1,
        unkpen: float = 0.0,
        max_source_len: Optional[int] = None,
        amp: str = "auto",
        data: Union[str, os.PathLike, None] = None,
        batch_size: int = 32,
        max_tokens: Optional[int] = None,
        quantize: str = "none",
        shortlist: Union[str, os.PathLike, None] = None,
        shortlist_k: int = 50,
        shortlist_frequent: int = 100,
        unk_posterior: bool = False,
    ) -> "Translator":
        """Load a checkpoint (or an ensemble: a list of paths, or ``"a.pt:b.pt"``) ready to translate.

        ``device``: None or ``"auto"`` takes a GPU when present.  ``replace_unk``: True copies the
        most-attended source word for each ``<unk>``; a path or dict translates it through a
        ``source target`` lexicon first.  ``alignments``: compute word alignments (``"auto"``: when
        the model has attention).  ``amp``: ``auto|none|bf16|fp16`` (GPU only).  ``data``: use that
        data directory's text pipelines.  ``quantize="int8"``: dynamic int8 weights (CPU only,
        :mod:`nmtkit.generate.quantize`).  ``shortlist``: a ``source target count`` lexical table
        restricting the output layer per batch to the top ``shortlist_k`` translations of the
        source words plus the ``shortlist_frequent`` most frequent targets
        (:mod:`nmtkit.generate.shortlist`).  ``unk_posterior`` (with ``replace_unk``): choose each
        ``<unk>``'s source word from the attention posterior given the ``<unk>`` (one forced pass
        over the hypotheses that have one; :mod:`nmtkit.models.posterior`), not from the search's
        attention.  The rest are the search options of ``nmtkit-translate``.
        """
        from nmtkit.checkpoint import pipelines_from_checkpoint
        from nmtkit.generate.loading import load_ensemble
        from nmtkit.generate.unk import load_lexicon
        from nmtkit.utils.device import parse_device

        search = SearchOptions(beam, nbest, max_len_a, max_len_b, min_len, lenpen, lenpen_form, unkpen)
        search.validate()  # before the (slow) loading
        lexicon = None
        if isinstance(replace_unk, dict):
            lexicon = replace_unk
        elif replace_unk is not None and not isinstance(replace_unk, bool):
            lexicon = load_lexicon(replace_unk)
        dev = parse_device(device)
        check_quantize(quantize, dev)
        if unk_posterior and quantize != "none":
            raise NmtkitError("--unk-posterior needs the float32 model: not with --quantize")
        amp_dtype = resolve_amp(amp, dev)  # before the (slow) loading
        if amp_dtype is not None and quantize != "none":
            raise NmtkitError(f"--quantize {quantize} runs its own int8 arithmetic: not with --amp {amp} (use --amp none)")
        paths = os.fspath(path) if isinstance(path, (str, os.PathLike)) else ":".join(os.fspath(p) for p in path)
        model, ckpts = load_ensemble(paths, dev)
        quantize_ensemble(model, quantize, dev)
        src_pipe, tgt_pipe = pipelines_from_checkpoint(ckpts[0])
        if data is not None:
            src_pipe, tgt_pipe = pipelines_from_data(data, model)
        table = None
        if shortlist is not None:
            table = Shortlist.load(shortlist, tgt_pipe, model.tgt_dict, k=shortlist_k, frequent=shortlist_frequent,
                                   lowercase_source=src_pipe.lowercase)
        if alignments == "auto":
            alignments = model.has_attention
        return cls(model, src_pipe, tgt_pipe, search, dev, replace_unk=replace_unk is True or lexicon is not None,
                   lexicon=lexicon, alignments=bool(alignments), align_shift=align_shift,
                   max_source_len=max_source_len or model_source_limit(model) or 400,
                   amp_dtype=amp_dtype, batch_size=batch_size, max_tokens=max_tokens,
                   shortlist=table, unk_posterior=unk_posterior)

    # -- encoding input ---------------------------------------------------------------------
    def _prepare(self, index: int, line: str) -> dict:
        cased = self._cased_pipe.tokenize(line)
        tokens = [t.lower() for t in cased] if self.src_pipe.lowercase else cased
        pieces = self.src_pipe.apply_bpe(tokens)
        truncated_from = None
        if self.max_source_len is not None and len(pieces) > self.max_source_len:
            truncated_from = len(pieces)
            self.warnings.append(f"line {index + 1}: {len(pieces)} source tokens, truncated to {self.max_source_len}")
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
        if items and isinstance(items[0], tuple):
            return self.translate_indexed(items, batch_size, max_tokens)
        records = self.translate_indexed(list(enumerate(items)), batch_size, max_tokens)
        return records if details else [r.candidates[0].text for r in records]

    def translate_indexed(self, lines: Sequence[tuple[int, str]], batch_size: Optional[int] = None,
                          max_tokens: Optional[int] = None) -> list[Translation]:
        """Translate ``(index, line)`` pairs; results in the order given (the CLI's streaming buffers)."""
        batch_size = batch_size or self.batch_size
        max_tokens = max_tokens if max_tokens is not None else self.max_tokens
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
        todo.sort(key=lambda k: len(items[k]["ids"]))
        for batch in _batches(todo, [len(items[k]["ids"]) + 1 for k in todo], batch_size, max_tokens):
            hyps = self._search([items[k]["ids"] for k in batch], self._shortlist_ids([items[k] for k in batch]))
            posteriors = self._unk_posteriors([items[k]["ids"] for k in batch], hyps) if self.unk_posterior else {}
            for j, (k, nbest) in enumerate(zip(batch, hyps)):
                results[k] = self._finish(items[k], nbest, posteriors.get(j))
        self.seconds += time.perf_counter() - t0
        self.n_sentences += len(items)
        out = [r for r in results if r is not None]
        self.n_target_tokens += sum(len(r.candidates[0].pieces) + 1 for r in out if r.candidates[0].pieces)
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
        src, lengths = pad_sequences(id_lists)
        src, lengths = src.to(self.device), lengths.to(self.device)
        s = self.search
        with allocation_guard(f"in the search of {len(id_lists)} sentences with --beam {s.beam} "
                              "(lower --beam, --batch-size or --max-tokens)"), autocast(self.device, self.amp_dtype):
            return beam_search(
                self.model, src, lengths, beam=s.beam, nbest=s.nbest, max_len_a=s.max_len_a, max_len_b=s.max_len_b,
                min_len=s.min_len, lenpen=s.lenpen, lenpen_form=s.lenpen_form, unkpen=s.unkpen,
                return_attention=self.replace_unk or self.alignments, shortlist=shortlist,
            )

    def _unk_posteriors(self, id_lists: list[list[int]], hyps: list[list[Hypothesis]]) -> dict[int, dict[int, torch.Tensor]]:
        """``sentence -> candidate -> attention [len + 1, S]`` of every candidate with an ``<unk>``,
        whose ``<unk>`` rows are the posterior given the ``<unk>`` (the other rows: the prior),
        from forced passes over them in batches of at most ``batch_size`` candidates."""
        from nmtkit.data.dictionary import EOS_ID, PAD_ID, UNK_ID
        from nmtkit.generate.forced import collate, score_references

        keys = [(j, c) for j, nbest in enumerate(hyps) for c, h in enumerate(nbest) if UNK_ID in h.tokens]
        out: dict[int, dict[int, torch.Tensor]] = {}
        for k0 in range(0, len(keys), self.batch_size):
            part = keys[k0 : k0 + self.batch_size]
            src, slen = collate([list(id_lists[j]) + [EOS_ID] for j, _ in part], self.device)
            tgt, tlen = collate([hyps[j][c].tokens + [EOS_ID] for j, c in part], self.device)
            only_unks = tgt.masked_fill(tgt.ne(UNK_ID), PAD_ID)  # the likelihood of the <unk> rows only
            for (j, c), r in zip(part, score_references(self.model, src, slen, tgt, tlen, only_unks)):
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
            cand = Candidate(text, tokens, pieces, hyp.score, [round(float(x), 4) for x in hyp.positional_scores])
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
        raise NmtkitError(f"{', '.join(model.names)}: --unk-posterior needs a model that computes an attention "
                          "posterior (rnnsearch, luong with attention)")


def model_source_limit(model: EnsembleModel) -> Optional[int]:
    """The longest source (pieces, without </s>) every member can take, if any has a limit."""
    limits = []
    for m in model.models:
        cfg = m.cfg
        if getattr(cfg, "score", None) == "location" and getattr(cfg, "attention", "none") != "none":
            limits.append(int(cfg.max_source_positions) - 1)
    return min(limits) if limits else None


def pipelines_from_data(data_dir: Union[str, os.PathLike], model: EnsembleModel) -> tuple[TextPipeline, TextPipeline]:
    """A data directory's text pipelines, refused unless its dictionaries are the model's."""
    from nmtkit.data.dataset import DataDir

    data = DataDir(data_dir)
    if data.src_dict != model.src_dict or data.tgt_dict != model.tgt_dict:
        raise NmtkitError(f"{data_dir}: dictionaries do not match the checkpoint's (preprocessed with other settings?)")
    return data.pipeline(data.src_lang), data.pipeline(data.tgt_lang)


def _batches(order: list[int], sizes: list[int], batch_size: int, max_tokens: Optional[int]) -> list[list[int]]:
    """Consecutive (length-sorted) groups under a sentence count and padded-token budget."""
    out, cur, longest = [], [], 0
    for k, n in zip(order, sizes):
        new_longest = max(longest, n)
        if cur and (len(cur) >= batch_size or (max_tokens and new_longest * (len(cur) + 1) > max_tokens)):
            out.append(cur)
            cur, new_longest = [], n
        cur.append(k)
        longest = new_longest
    if cur:
        out.append(cur)
    return out
