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
  BLEU falls: tests/generate/test_shortlist.py and bench/RESULTS.md).

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

Compiled shortlists: reading a text table and running its targets through the target pipeline
costs a noticeable part of every translate command's start-up (bench/RESULTS.md), the same work
each time for one model and table.  ``nmtkit shortlist`` does it once (as Marian's
``marian-conv --shortlist`` and Sockeye's ``sockeye-lexicon create`` do) and writes an ``.npz``
archive: for every source key, its target ids sorted with the rank of the first table entry
that brought each in, so any ``--shortlist-k`` selects the same ids as the text table would.
``--shortlist`` reads either kind; a compiled one records a fingerprint of the model's target
dictionary, target pipeline and source lowercasing, and another model is refused.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import zipfile
from typing import Any, BinaryIO, Callable, Iterable, Optional, Sequence, cast

import numpy as np
import torch
from torch import Tensor

from nmtkit.data.dictionary import SPECIALS, Dictionary
from nmtkit.data.lexicon import iter_lexicon_entries
from nmtkit.data.text_pipeline import TextPipeline
from nmtkit.errors import InputError, NmtkitError
from nmtkit.utils.textio import atomic_write

#: A compiled shortlist is an ``.npz`` archive, which is a zip file.
ZIP_MAGIC = b"PK\x03\x04"
COMPILED_FORMAT = "nmtkit-shortlist"
COMPILED_VERSION = 1
COMPILED_ARRAYS = ("meta", "keys", "key_offsets", "ids", "ranks")


class Shortlist:
    """Source word -> target ids of its top-``k`` translations, plus the always-allowed ids.

    ``key_ids`` gives a source key's target ids (sorted, unique; None: not in the table) from a
    text table (:class:`TextTable`) or a compiled one (:class:`CompiledTable`)."""

    def __init__(self, key_ids: Callable[[str], Optional[np.ndarray]], vocab_size: int, frequent: int,
                 copyable: Optional[dict[str, int]] = None) -> None:
        """``copyable``: target symbol -> id, for the copy rule (None: no copying)."""
        if frequent < 0:
            raise NmtkitError(f"--shortlist-frequent must not be negative, got {frequent}")
        self.key_ids = key_ids
        self.vocab_size = vocab_size
        self.path = ""  # the table's file name, for messages (set by load)
        self.lookups = self.hits = 0  # source keys looked up (once per batch each), and found in the table
        self.copyable = copyable or {}
        self.base = np.arange(min(vocab_size, len(SPECIALS) + frequent), dtype=np.int64)

    @classmethod
    def load(cls, path: str | os.PathLike, tgt_pipe: TextPipeline, tgt_dict: Dictionary, *,
             k: int = 50, frequent: int = 100, lowercase_source: bool = False) -> "Shortlist":
        """Read a text lexical table or a compiled shortlist (see the module docstring); a bad
        line is an error naming file:line, a compiled shortlist of another model an error too."""
        if k < 1:
            raise NmtkitError(f"--shortlist-k must be at least 1, got {k}")
        if is_compiled(path):
            table = CompiledTable.read(path, model_fingerprint(tgt_pipe, tgt_dict, lowercase_source), len(tgt_dict))
            shortlist = cls(lambda key: table.ids_of(key, k), len(tgt_dict), frequent, copyable=tgt_dict.index)
        else:
            text = TextTable(ranked_targets(path, lowercase_source, k), tgt_pipe, tgt_dict)
            if text.targets:  # one word now: a pipeline that cannot run fails here, before any output
                text.ids_of(next(iter(text.targets)))
            shortlist = cls(text.ids_of, len(tgt_dict), frequent, copyable=tgt_dict.index)
        shortlist.path = os.fspath(path)
        return shortlist

    #: Source keys looked up without a single hit before :meth:`unmatched` speaks up.
    UNMATCHED_AFTER = 50

    def unmatched(self, finished: bool = False) -> Optional[str]:
        """A warning when no source word of the input so far is in the table: a table of another
        language pair, the wrong way round or of another tokenization restricts every output to
        the frequent targets and copies, and would otherwise only show as a low BLEU.  Said once
        :data:`UNMATCHED_AFTER` keys missed, or at the end (``finished``) after any."""
        if self.hits or not self.lookups or (self.lookups < self.UNMATCHED_AFTER and not finished):
            return None
        return (f"{self.path}: none of the {self.lookups:,} source words, tokens and pieces looked up so far is a source "
                f"entry of this shortlist table (another language pair or direction?); outputs are limited to the "
                f"{max(len(self.base) - len(SPECIALS), 0)} most frequent targets and copied words")

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
                    ids = self.key_ids(key)
                    self.lookups += 1
                    if ids is not None:
                        self.hits += 1
                        parts.append(ids)
                    if key in self.copyable:
                        copied.append(self.copyable[key])
        parts.append(np.asarray(copied, dtype=np.int64))
        return torch.from_numpy(np.unique(np.concatenate(parts)))


def ranked_targets(path: str | os.PathLike, lowercase_source: bool, k: Optional[int] = None) -> dict[str, list[str]]:
    """Source key -> its table targets, best first (highest count; without counts, file order),
    the first ``k`` of them (None: all)."""
    ranked: dict[str, list[tuple[float, int, str]]] = {}
    for lineno, src, tgt, count in iter_lexicon_entries(path):
        key = src.lower() if lowercase_source else src
        ranked.setdefault(key, []).append((-(count if count is not None else 0.0), lineno, tgt))
    return {key: [tgt for _, _, tgt in sorted(entries)[:k]] for key, entries in ranked.items()}


class TextTable:
    """A text table's keys -> target ids.  A word's targets go through the target pipeline
    (tokenizer, BPE) only when an input first contains the word: most of a table's words never
    occur in one input, and BPE of every target of a whole table was most of ``--shortlist``'s
    start-up time (bench/RESULTS.md)."""

    def __init__(self, targets: dict[str, list[str]], tgt_pipe: TextPipeline, tgt_dict: Dictionary) -> None:
        self.targets = targets
        self.pipe, self.dictionary = tgt_pipe, tgt_dict
        self._entry_ids: dict[str, list[int]] = {}
        self._key_ids: dict[str, np.ndarray] = {}

    def entry_ids(self, entry: str) -> list[int]:
        """The dictionary ids of a target entry's pieces (and of the entry itself, if a symbol);
        unknown pieces are left out (``<unk>`` is always in the shortlist)."""
        ids = self._entry_ids.get(entry)
        if ids is None:
            d = self.dictionary
            ids = [d.index[entry]] if entry in d else []
            ids.extend(d.index[p] for p in self.pipe.apply_bpe(self.pipe.tokenize(entry)) if p in d)
            self._entry_ids[entry] = ids
        return ids

    def ids_of(self, key: str) -> Optional[np.ndarray]:
        """Sorted unique target ids of a source key's translations (None: not in the table)."""
        ids = self._key_ids.get(key)
        if ids is None and key in self.targets:
            pieces = [i for entry in self.targets[key] for i in self.entry_ids(entry)]
            ids = self._key_ids[key] = np.unique(np.asarray(pieces, dtype=np.int64))
        return ids


class CompiledTable:
    """A compiled shortlist in memory: per key, its sorted target ids and each one's rank."""

    def __init__(self, keys: dict[str, int], key_offsets: np.ndarray, ids: np.ndarray, ranks: np.ndarray) -> None:
        self.keys, self.key_offsets, self.ids, self.ranks = keys, key_offsets, ids, ranks
        self._cache: dict[str, np.ndarray] = {}  # keys of the table only: a long input stream meets unbounded misses

    def ids_of(self, key: str, k: int) -> Optional[np.ndarray]:
        """Sorted unique target ids of the key's first ``k`` table entries (None: not in the table)."""
        ids = self._cache.get(key)
        if ids is None:
            i = self.keys.get(key)
            if i is None:
                return None
            a, b = int(self.key_offsets[i]), int(self.key_offsets[i + 1])
            ids = self._cache[key] = self.ids[a:b][self.ranks[a:b] < k].astype(np.int64)
        return ids

    @classmethod
    def read(cls, path: str | os.PathLike, fingerprint: str, vocab_size: int) -> "CompiledTable":
        """Load and check a compiled shortlist; anything wrong is a one-line error naming ``path``."""
        arrays = _read_arrays(path)
        try:
            meta = json.loads(arrays["meta"].tobytes().decode("utf-8"))
            keys = arrays["keys"].tobytes().decode("utf-8").split("\n") if arrays["keys"].size else []
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise InputError(path, None, "not a compiled nmtkit shortlist (unreadable header)") from None
        if not isinstance(meta, dict) or meta.get("format") != COMPILED_FORMAT:
            raise InputError(path, None, "not a compiled nmtkit shortlist")
        if type(meta.get("version")) is not int or meta["version"] != COMPILED_VERSION:  # noqa: E721 - True == 1
            raise InputError(path, None, f"compiled shortlist version {meta.get('version')!r} is not supported "
                             f"(this nmtkit reads version {COMPILED_VERSION}); compile it again with nmtkit shortlist")
        if meta.get("fingerprint") != fingerprint:
            raise InputError(path, None, "was compiled for another model (target dictionary, target text pipeline "
                             "or source lowercasing differ); compile it again with nmtkit shortlist --path MODEL "
                             "(and the --data DIR translate is given)")
        offsets, ids, ranks = arrays["key_offsets"], arrays["ids"], arrays["ranks"]
        ok = (
            offsets.dtype == np.int64 and ids.dtype == np.int32 and ranks.dtype == np.int32
            and offsets.ndim == ids.ndim == ranks.ndim == 1 and offsets.size == len(keys) + 1
            and ids.size == ranks.size and (offsets.size == 0 or (offsets[0] == 0 and offsets[-1] == ids.size))
            and bool((np.diff(offsets) >= 0).all()) and bool(((ids >= 0) & (ids < vocab_size)).all())
            and bool((ranks >= 0).all()) and len(set(keys)) == len(keys)
        )
        if not ok:
            raise InputError(path, None, "is a damaged compiled shortlist (its arrays do not fit together)")
        return cls({key: i for i, key in enumerate(keys)}, offsets, ids, ranks)


def _read_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The arrays of a compiled shortlist, each checked before it is read: an uncompressed
    ``.npy`` member (``np.savez`` writes no other; so no zip bomb, no inflate errors) of a plain
    numeric dtype whose header declares no more data than the member holds.  Anything else is an
    :class:`InputError` naming ``path``."""
    def refuse(why: str) -> InputError:
        return InputError(path, None, f"not a readable compiled nmtkit shortlist ({why})")

    arrays = {}
    try:
        with zipfile.ZipFile(path) as zf:
            for name in COMPILED_ARRAYS:
                try:
                    info = zf.getinfo(f"{name}.npy")
                except KeyError:
                    raise refuse(f"no {name}") from None
                if info.compress_type != zipfile.ZIP_STORED:
                    raise refuse(f"{name} is compressed")
                with zf.open(info) as fh:
                    read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                                   (2, 0): np.lib.format.read_array_header_2_0}.get(np.lib.format.read_magic(fh))
                    if read_header is None:
                        raise refuse(f"{name} has an unknown .npy version")
                    shape, _, dtype = read_header(fh)
                    if dtype.hasobject or dtype.kind not in "iu" or len(shape) != 1:
                        raise refuse(f"{name} is not a vector of integers")
                    if shape[0] * dtype.itemsize > info.file_size:
                        raise refuse(f"{name} declares more data than it holds")
                    array = np.empty(shape[0], dtype=dtype)
                    view, done = memoryview(array.data).cast("B"), 0
                    while done < len(view):  # in chunks: one read would hold the member twice
                        chunk = fh.read(min(1 << 24, len(view) - done))
                        if not chunk:
                            raise refuse(f"{name} is cut short")
                        view[done:done + len(chunk)] = chunk
                        done += len(chunk)
                    arrays[name] = array
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - zip and npy parsing raise many kinds; each is a bad file
        raise refuse(f"{type(exc).__name__}: {exc}".splitlines()[0]) from None
    return arrays


def compile_shortlist(table: str | os.PathLike, output: str | os.PathLike, tgt_pipe: TextPipeline,
                      tgt_dict: Dictionary, lowercase_source: bool,
                      progress: Optional[Callable[[int], None]] = None) -> tuple[int, int]:
    """Write the compiled form of a text ``table`` for one model to ``output`` (atomically);
    returns (source keys, target ids stored).  ``progress(n)`` is called per ``n`` keys done."""
    if is_compiled(table):  # else "invalid UTF-8" at line 1, which says nothing of the mix-up
        raise InputError(table, None, "is a compiled shortlist already; give the text table to compile")
    text = TextTable(ranked_targets(table, lowercase_source), tgt_pipe, tgt_dict)
    keys: list[str] = []
    offsets, all_ids, all_ranks = [0], [], []  # type: tuple[list[int], list[int], list[int]]
    for key, entries in text.targets.items():
        if "\n" in key:  # split_words never yields one, but a key must not break the list apart
            continue
        first: dict[int, int] = {}
        for rank, entry in enumerate(entries):
            for i in text.entry_ids(entry):
                first.setdefault(i, rank)
        order = sorted(first)
        keys.append(key)
        all_ids.extend(order)
        all_ranks.extend(first[i] for i in order)
        offsets.append(len(all_ids))
        if progress is not None:
            progress(1)
    meta = {"format": COMPILED_FORMAT, "version": COMPILED_VERSION,
            "fingerprint": model_fingerprint(tgt_pipe, tgt_dict, lowercase_source), "table": os.fspath(table)}
    arrays: dict[str, Any] = {
        "meta": np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8),
        "keys": np.frombuffer("\n".join(keys).encode("utf-8"), dtype=np.uint8),
        "key_offsets": np.asarray(offsets, dtype=np.int64),
        "ids": np.asarray(all_ids, dtype=np.int32),
        "ranks": np.asarray(all_ranks, dtype=np.int32),
    }
    with atomic_write(output, "wb", encoding=None) as fh:
        np.savez(cast(BinaryIO, fh), **arrays)
    return len(keys), len(all_ids)


def is_compiled(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a compiled shortlist (an ``.npz``, i.e. zip, archive) rather than text.
    Only a regular file is sniffed: reading from a pipe (``<(...)``, ``/dev/stdin``) would take
    the table's first lines away from the text reader."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb", buffering=0) as fh:
            return fh.read(len(ZIP_MAGIC)) == ZIP_MAGIC
    except OSError:
        return False  # the text reader names the problem


def model_fingerprint(tgt_pipe: TextPipeline, tgt_dict: Dictionary, lowercase_source: bool) -> str:
    """What a compiled shortlist depends on: the target dictionary and text pipeline (the ids of
    a table entry's pieces) and the source lowercasing (its keys)."""
    desc = {"tgt_dict": tgt_dict.checksum(), "tgt_pipeline": tgt_pipe.description(), "lowercase_source": lowercase_source}
    return hashlib.sha256(json.dumps(desc, sort_keys=True).encode("utf-8")).hexdigest()


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
