"""Vocabulary shortlists (``nmtkit-translate --shortlist``), as Marian and Sockeye do them.

Why: on a CPU the output layer (``hidden x V`` per hypothesis and step) and the top-k over
``beam x V`` dominate a decoder step; a sentence can only plausibly produce translations of its
own words plus frequent function words, so each batch gets an output layer restricted to

* the top ``k`` translations (by count) of every source word of the batch, from a lexical table
  of ``source target count`` lines (``nmtkit-align --build-dict FILE --dict-top-k K`` writes
  one; a 1-best ``source target`` file, or any aligner's table, works too: without counts,
  earlier lines rank first);
* the ``frequent`` most frequent target symbols (the dictionary is sorted by frequency after
  the four specials, so these are ids ``4 .. 4 + frequent - 1``);
* the specials ``<pad> <s> </s> <unk>`` (ids 0-3; search never emits the first two);
* every source word, token or piece of the batch that is itself a target symbol: names and
  numbers are copied through the shared BPE pieces, and the table, built from training data,
  cannot list the names of new input (without this rule, translations of names change and
  BLEU falls: tests/test_shortlist.py and bench/RESULTS.md).

The result is a sorted id tensor; beam search slices the output projection's rows once per
batch (:meth:`nmtkit.models.base.Seq2SeqModel.restrict_output`), normalises over the shortlist
and maps the chosen columns back to token ids.  Because the specials come first and the ids are
sorted, column ``i < 4`` is token ``i`` and ties still go to the lower token id.

Words and subword pieces: the table is in **words**, as ``--build-dict`` writes it, not in the
model's BPE pieces.  A source entry matches an input sentence when it equals one of its
whitespace words, its tokens (after the model's tokenizer) or its pieces, compared after the
model's lowercasing when it lowercases; each target entry goes through the model's target
text pipeline (tokenizer, lowercasing, BPE) and **all** its pieces join the shortlist (and the
entry itself, when it already is a piece of the target dictionary, so a table made on BPE'd
text works as well).
"""
from __future__ import annotations

import os
from typing import Callable, Iterable, Optional, Sequence

import numpy as np
import torch
from torch import Tensor

from nmtkit.data.dictionary import SPECIALS, Dictionary
from nmtkit.data.text_pipeline import TextPipeline
from nmtkit.errors import NmtkitError
from nmtkit.data.lexicon import iter_lexicon_entries


class Shortlist:
    """Source word -> target ids of its top-``k`` translations, plus the always-allowed ids.

    A word's targets go through the target pipeline (tokenizer, BPE) only when an input first
    contains the word: most of a table's words never occur in one input, and BPE of every target
    of a whole table was most of ``--shortlist``'s start-up time (bench/RESULTS.md)."""

    def __init__(self, targets: dict[str, list[str]], target_ids: Callable[[str], list[int]], vocab_size: int,
                 frequent: int, copyable: Optional[dict[str, int]] = None) -> None:
        """``targets``: source key -> its ranked target entries; ``target_ids``: entry -> its
        target ids; ``copyable``: target symbol -> id, for the copy rule (None: no copying)."""
        if frequent < 0:
            raise NmtkitError(f"--shortlist-frequent must not be negative, got {frequent}")
        self.targets = targets
        self.vocab_size = vocab_size
        self.copyable = copyable or {}
        self.base = np.arange(min(vocab_size, len(SPECIALS) + frequent), dtype=np.int64)
        self._target_ids = target_ids
        self._entry_ids: dict[str, list[int]] = {}
        self._key_ids: dict[str, np.ndarray] = {}

    @classmethod
    def load(cls, path: str | os.PathLike, tgt_pipe: TextPipeline, tgt_dict: Dictionary, *,
             k: int = 50, frequent: int = 100, lowercase_source: bool = False) -> "Shortlist":
        """Read a lexical table (see the module docstring); a bad line is an error naming file:line."""
        if k < 1:
            raise NmtkitError(f"--shortlist-k must be at least 1, got {k}")
        ranked: dict[str, list[tuple[float, int, str]]] = {}
        for lineno, src, tgt, count in iter_lexicon_entries(path):
            key = src.lower() if lowercase_source else src
            # no count: file order ranks (an earlier line first)
            ranked.setdefault(key, []).append((-(count if count is not None else 0.0), lineno, tgt))
        targets = {key: [tgt for _, _, tgt in sorted(entries)[:k]] for key, entries in ranked.items()}
        shortlist = cls(targets, lambda entry: _target_ids(entry, tgt_pipe, tgt_dict), len(tgt_dict), frequent,
                        copyable=tgt_dict.index)
        if targets:  # one word now: a pipeline that cannot run fails here, before any output
            shortlist.ids_of(next(iter(targets)))
        return shortlist

    def ids_of(self, key: str) -> Optional[np.ndarray]:
        """Sorted unique target ids of a source key's translations (None: not in the table)."""
        ids = self._key_ids.get(key)
        if ids is None and key in self.targets:
            pieces: list[int] = []
            for entry in self.targets[key]:
                if entry not in self._entry_ids:
                    self._entry_ids[entry] = self._target_ids(entry)
                pieces.extend(self._entry_ids[entry])
            ids = self._key_ids[key] = np.unique(np.asarray(pieces, dtype=np.int64))
        return ids

    def ids_for(self, sentences: Iterable[Iterable[str]]) -> Tensor:
        """The batch's shortlist: sorted unique target ids for sentences given as their words,
        tokens and pieces (any iterable of strings each; unknown ones are skipped)."""
        parts = [self.base]
        seen: set[str] = set()
        copied: list[int] = []
        for keys in sentences:
            for key in keys:
                if key not in seen:
                    seen.add(key)
                    ids = self.ids_of(key)
                    if ids is not None:
                        parts.append(ids)
                    if key in self.copyable:
                        copied.append(self.copyable[key])
        parts.append(np.asarray(copied, dtype=np.int64))
        return torch.from_numpy(np.unique(np.concatenate(parts)))


def _target_ids(entry: str, pipe: TextPipeline, dictionary: Dictionary) -> list[int]:
    """The dictionary ids of a target entry's pieces (and of the entry itself, if a symbol);
    unknown pieces are left out (``<unk>`` is always in the shortlist)."""
    ids = [dictionary.index[entry]] if entry in dictionary else []
    ids.extend(dictionary.index[p] for p in pipe.apply_bpe(pipe.tokenize(entry)) if p in dictionary)
    return ids


def check_shortlist(ids: Tensor, vocab_size: int) -> None:
    """What beam search relies on: sorted, unique, in range, starting with the four specials."""
    n = len(SPECIALS)
    ok = (
        ids.dim() == 1 and ids.numel() >= n and bool((ids[:n] == torch.arange(n, device=ids.device)).all())
        and bool((ids[1:] > ids[:-1]).all()) and int(ids[-1]) < vocab_size
    )
    if not ok:
        raise ValueError("a shortlist must be sorted unique target ids starting with the specials 0-3")


def sentence_keys(words: Sequence[str], tokens: Sequence[str], pieces: Sequence[str], lowercase: bool) -> list[str]:
    """What a source sentence is looked up by: its words (lowercased like the model's input when
    the model lowercases), tokens and pieces (already lowercased by the pipeline)."""
    return [*(w.lower() for w in words), *tokens, *pieces] if lowercase else [*words, *tokens, *pieces]
