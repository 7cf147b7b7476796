"""The dataset API every later stage uses: open a preprocessed split, index pairs, batch them.

Batching packs sentences by a token budget (``max_tokens``): the corpus is shuffled with a
seed that depends on the epoch, cut into pools, each pool sorted by length so that a batch
holds sentences of similar length (little padding), then the batch order is shuffled.  The
batches of an epoch are a pure function of ``(seed, epoch)``, which is what makes resuming
in the middle of an epoch exact.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import torch

from nmtkit.data.alignments import ALIGN_SUFFIX, StoredAlignments
from nmtkit.data.dictionary import BOS_ID, EOS_ID, PAD_ID, Dictionary
from nmtkit.data.indexed import IndexedTokens
from nmtkit.data.text_pipeline import TextPipeline, codes_checksum, read_bpe_codes, read_sp_model, sp_model_checksum
from nmtkit.errors import InputError, NmtkitError
from nmtkit.utils.schema import Check, Choice, DictOf, Nullable, validate
from nmtkit.utils.textio import read_lines

META_FORMAT_VERSION = 1
#: ``meta.json``'s "format": what marks a directory as written by nmtkit-preprocess.
DATA_FORMAT = "nmtkit-data"


def is_data_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds a ``meta.json`` that nmtkit-preprocess wrote (its "format" key):
    the only kind of directory ``nmtkit-preprocess --overwrite`` may replace."""
    try:
        meta = json.loads((Path(path) / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(meta, dict) and meta.get("format") == DATA_FORMAT


def _inside_directory(name: object) -> bool:
    """A relative path that stays inside the data directory (no absolute path, no ``..``, no NUL)."""
    return (isinstance(name, str) and bool(name) and "\0" not in name and not os.path.isabs(name)
            and ".." not in Path(name).parts)


def is_language_code(name: object) -> bool:
    """A language suffix, part of file names: no path separator or NUL, not empty, not ``.`` or ``..``."""
    return is_name_part(name)


def is_name_part(name: object) -> bool:
    """A part of a file name of the data directory (a language code, a split name): it cannot
    lead out of the directory, nor into a subdirectory."""
    return (isinstance(name, str) and bool(name) and "/" not in name and os.sep not in name and "\0" not in name
            and name not in (".", ".."))


_LANG = Check(is_language_code, "a language code (a string without '/')")
#: Split names become file names (``NAME.src-tgt.lang.bin``): ``--valid-subset`` must not reach
#: the files of a ``meta.json`` split named ``../../x`` outside the directory.
_SPLIT = Check(is_name_part, "a split name (a string without '/', not '.' or '..')")
#: What the readers of ``meta.json`` use (:mod:`nmtkit.utils.schema`).  BPE codes are named
#: relative to the data directory: training inlines their text into every checkpoint, so a
#: ``meta.json`` must not make it read (and ship) an arbitrary file.
META_SCHEMA = {
    "format": str,
    "format_version": int,
    "source_lang": _LANG,
    "target_lang": _LANG,
    "tokenizer?": Choice(("moses", "none")),
    "lowercase?": bool,
    "bpe?": {"type": Choice(("none", "subword-nmt", "sentencepiece")),
             "codes?": DictOf(Check(_inside_directory, "a file name inside the data directory")),
             "models?": DictOf(Check(_inside_directory, "a file name inside the data directory")),
             "checksums?": DictOf(str)},
    "dict_checksums?": DictOf(Nullable(str)),
    "splits": DictOf(dict, key=_SPLIT),
}


def read_meta(meta_path: Path) -> dict:
    """Read and check ``meta.json``: one line naming the file and the field when it is not what
    ``nmtkit-preprocess`` writes (a list, a number, nested too deeply, a field missing ...)."""
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(str(meta_path), None, f"not valid JSON ({exc})") from None
    except RecursionError:
        raise InputError(str(meta_path), None, "not a data description (JSON nested too deeply)") from None
    if not isinstance(meta, dict):
        raise InputError(str(meta_path), None, f"must be a JSON object, not {type(meta).__name__}")
    if meta.get("format") != DATA_FORMAT:
        raise NmtkitError(f"{meta_path}: not written by nmtkit-preprocess")
    version = meta.get("format_version")
    if version != META_FORMAT_VERSION:
        raise NmtkitError(f"{meta_path}: data format version {version}, this nmtkit reads version {META_FORMAT_VERSION}")
    validate(meta, META_SCHEMA, str(meta_path))
    bpe = meta.get("bpe", {})
    files = {"subword-nmt": "codes", "sentencepiece": "models"}.get(bpe.get("type"))
    if files:
        for lang in (meta["source_lang"], meta["target_lang"]):
            if lang not in bpe.get(files, {}):
                raise InputError(str(meta_path), None, f"field 'bpe.{files}.{lang}' missing")
    return meta


class DataDir:
    """A directory written by ``nmtkit-preprocess``: meta.json, dictionaries, splits."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        meta_path = self.path / "meta.json"
        if not self.path.is_dir():
            raise NmtkitError(f"{self.path}: no such data directory")
        if not meta_path.is_file():
            raise NmtkitError(f"{self.path}: not an nmtkit data directory (no meta.json; run nmtkit-preprocess first)")
        self.meta = read_meta(meta_path)
        self.src_lang: str = self.meta["source_lang"]
        self.tgt_lang: str = self.meta["target_lang"]
        # BPE codes are read and checked now (bad UTF-8, a line that is not a merge), not when the
        # first checkpoint is written; pipeline() hands on this text
        self._codes_text = {lang: self._read_codes(lang, pipe.bpe_codes) for lang in (self.src_lang, self.tgt_lang)
                            if (pipe := TextPipeline.from_meta(self.meta, lang, self.path)).bpe_codes}
        self._sp_models = {lang: self._read_sp_model(lang, pipe.sp_model) for lang in (self.src_lang, self.tgt_lang)
                           if (pipe := TextPipeline.from_meta(self.meta, lang, self.path)).sp_model}
        self._dicts: dict[str, Dictionary] = {}

    def _read_sp_model(self, lang: str, path: str) -> str:
        """A SentencePiece model's bytes (base64), checked as :meth:`_read_codes` checks BPE codes."""
        if not Path(path).resolve().is_relative_to(self.path.resolve()):
            raise InputError(str(self.path / "meta.json"), None,
                             f"field 'bpe.models.{lang}' must be a file name inside the data directory "
                             f"({path} leads outside it)")
        if not Path(path).is_file():
            raise InputError(path, None, "no such SentencePiece model (named by meta.json)")
        model = read_sp_model(path)
        want = self.meta["bpe"].get("checksums", {}).get(lang)
        if want and sp_model_checksum(model) != want:
            raise InputError(str(path), None, "SentencePiece model does not match meta.json (replaced after preprocessing?)")
        return model

    def _read_codes(self, lang: str, path: str) -> str:
        """The codes file's text, refused when a symbolic link takes it outside the directory
        (training would inline that file into every checkpoint)."""
        if not Path(path).resolve().is_relative_to(self.path.resolve()):
            raise InputError(str(self.path / "meta.json"), None,
                             f"field 'bpe.codes.{lang}' must be a file name inside the data directory "
                             f"({path} leads outside it)")
        text = read_bpe_codes(path)
        want = self.meta["bpe"].get("checksums", {}).get(lang)  # absent in data dirs of older versions
        if want and codes_checksum(text) != want:
            raise InputError(str(path), None, "BPE codes do not match meta.json (cut short or edited after preprocessing?)")
        return text

    @property
    def pair(self) -> str:
        return f"{self.src_lang}-{self.tgt_lang}"

    def dictionary(self, lang: str) -> Dictionary:
        if lang not in self._dicts:
            d = Dictionary.load(self.path / f"dict.{lang}.txt")
            want = self.meta.get("dict_checksums", {}).get(lang)
            if want and d.checksum() != want:
                raise NmtkitError(f"{self.path / f'dict.{lang}.txt'}: dictionary does not match meta.json (edited after preprocessing?)")
            self._dicts[lang] = d
        return self._dicts[lang]

    @property
    def src_dict(self) -> Dictionary:
        return self.dictionary(self.src_lang)

    @property
    def tgt_dict(self) -> Dictionary:
        return self.dictionary(self.tgt_lang)

    def pipeline(self, lang: str) -> TextPipeline:
        pipe = TextPipeline.from_meta(self.meta, lang, self.path)
        pipe.bpe_codes_text = self._codes_text.get(lang)
        pipe.sp_model_b64 = self._sp_models.get(lang)
        return pipe

    def splits(self) -> list[str]:
        return list(self.meta.get("splits", {}))

    def split_prefix(self, split: str, lang: str) -> Path:
        return self.path / f"{split}.{self.pair}.{lang}"

    def validation_split(self, name: str) -> Optional[str]:
        """The split ``--valid-subset name`` means, or None for training without validation.

        A name that is not a split is an error listing the splits: silently skipping
        validation would also turn off early stopping and checkpoint_best.pt.  Only the
        default ``valid`` may be missing (data preprocessed without ``--validpref``), and
        ``none`` turns validation off on purpose.
        """
        if name in self.splits():
            return name
        if name.lower() == "none" or (name == "valid" and not any(s.startswith("valid") for s in self.splits())):
            return None
        known = ", ".join(self.splits()) or "none"
        raise NmtkitError(f"--valid-subset {name}: {self.path} has no such split (available: {known}; "
                          "or 'none' to train without validation)")

    def load_split(self, split: str) -> "ParallelDataset":
        if split not in self.meta.get("splits", {}):
            known = ", ".join(self.splits()) or "none"
            raise NmtkitError(f"{self.path}: no split {split!r} (available: {known})")
        return ParallelDataset(self, split)


class ParallelDataset:
    """Source/target ids of one split, memory-mapped, plus the tokenized text."""

    def __init__(self, data: DataDir, split: str) -> None:
        self.data = data
        self.split = split
        # ids are checked against the dictionaries here, once, not found out of range mid-epoch
        self.src = IndexedTokens(data.split_prefix(split, data.src_lang), vocab_size=len(data.src_dict))
        self.tgt = IndexedTokens(data.split_prefix(split, data.tgt_lang), vocab_size=len(data.tgt_dict))
        if len(self.src) != len(self.tgt):
            raise NmtkitError(f"{data.path}: split {split} has {len(self.src)} source and {len(self.tgt)} target sentences")
        recorded = data.meta["splits"][split].get("sentences")
        if isinstance(recorded, int) and recorded != len(self.src):  # another split's files copied over this one's
            raise NmtkitError(f"{data.path}: split {split} has {len(self.src)} sentences, and meta.json records {recorded} "
                              "(its files replaced after preprocessing?)")
        self.src_sizes = self.src.sizes + 1  # + </s>
        self.tgt_sizes = self.tgt.sizes + 1
        #: Piece links of each pair (``nmtkit-preprocess --alignfile``), or None.
        self.alignments: Optional[StoredAlignments] = None
        if data.meta["splits"][split].get("alignments"):
            self.alignments = StoredAlignments(data.split_prefix(split, ALIGN_SUFFIX), self.src.sizes, self.tgt.sizes)

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return self.src[i], self.tgt[i]

    def tokens_text(self, lang: str) -> list[str]:
        """The tokenized (pre-BPE) text of this split, one line per pair, as preprocess saw it
        (a file with another number of lines is refused: its lines would pair with the wrong ids)."""
        path = f"{self.data.split_prefix(self.split, lang)}.tok"
        lines = read_lines(path, allow_empty_file=True)
        if len(lines) != len(self):
            raise InputError(path, None, f"{len(lines)} lines, but the {self.split} split has {len(self)} sentence pairs")
        return lines


@dataclass
class Batch:
    """A padded batch, ready for ``model(src_tokens, src_lengths, prev_output_tokens)``."""

    ids: torch.Tensor  # [B] dataset indices
    src_tokens: torch.Tensor  # [B, S]
    src_lengths: torch.Tensor  # [B]
    prev_output_tokens: torch.Tensor  # [B, T]  <s> y1 .. y_{T-1}
    target: torch.Tensor  # [B, T]  y1 .. </s>, padded with <pad>
    ntokens: int  # real target tokens incl. </s>

    def to(self, device: torch.device) -> "Batch":
        return Batch(
            ids=self.ids,
            src_tokens=self.src_tokens.to(device, non_blocking=True),
            src_lengths=self.src_lengths.to(device, non_blocking=True),
            prev_output_tokens=self.prev_output_tokens.to(device, non_blocking=True),
            target=self.target.to(device, non_blocking=True),
            ntokens=self.ntokens,
        )


def pad_sequences(seqs: Sequence[np.ndarray] | Sequence[Sequence[int]], append_eos: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id sequences (appending ``</s>``) into ``[B, L]`` plus lengths."""
    lens = [len(s) + (1 if append_eos else 0) for s in seqs]
    out = torch.full((len(seqs), max(lens) if lens else 0), PAD_ID, dtype=torch.long)
    for k, s in enumerate(seqs):
        n = len(s)
        if n:
            out[k, :n] = torch.as_tensor(np.asarray(s, dtype=np.int64))
        if append_eos:
            out[k, n] = EOS_ID
    return out, torch.tensor(lens, dtype=torch.long)


def collate(pairs: list[tuple[np.ndarray, np.ndarray]], ids: Optional[list[int]] = None) -> Batch:
    """Pad source/target pairs into a :class:`Batch` (teacher forcing inputs and targets)."""
    src_tokens, src_lengths = pad_sequences([p[0] for p in pairs])
    target, tgt_lengths = pad_sequences([p[1] for p in pairs])
    prev = torch.full_like(target, PAD_ID)
    prev[:, 0] = BOS_ID
    if target.size(1) > 1:
        prev[:, 1:] = target[:, :-1]
    prev[prev == EOS_ID] = PAD_ID  # the </s> input never feeds a real prediction
    return Batch(
        ids=torch.tensor(ids if ids is not None else list(range(len(pairs))), dtype=torch.long),
        src_tokens=src_tokens,
        src_lengths=src_lengths,
        prev_output_tokens=prev,
        target=target,
        ntokens=int(tgt_lengths.sum()),
    )


class PaddingCounter:
    """Real versus padded positions of the batches a run trained on: the share of the work
    spent on padding, reported when training ends (the batcher groups similar lengths to keep
    it small)."""

    def __init__(self, src_sizes: np.ndarray, tgt_sizes: np.ndarray) -> None:
        self.src_sizes, self.tgt_sizes = src_sizes, tgt_sizes
        self.real = np.zeros(2, dtype=np.int64)  # source, target tokens
        self.slots = np.zeros(2, dtype=np.int64)  # sentences x longest, per side

    def add(self, batch: Sequence[int]) -> None:
        idx = np.asarray(batch, dtype=np.int64)
        for side, sizes in enumerate((self.src_sizes, self.tgt_sizes)):
            lens = sizes[idx]
            self.real[side] += int(lens.sum())
            self.slots[side] += int(lens.max()) * len(idx) if len(idx) else 0

    def fractions(self) -> tuple[float, float]:
        """(source, target) padding as a fraction of all batch positions (0 before any batch)."""
        return tuple(float(1 - r / s) if s else 0.0 for r, s in zip(self.real, self.slots))  # type: ignore[return-value]


def make_batches(
    src_sizes: np.ndarray,
    tgt_sizes: np.ndarray,
    max_tokens: Optional[int] = None,
    batch_size: Optional[int] = None,
    seed: int = 1,
    epoch: int = 1,
    shuffle: bool = True,
    pool_batches: int = 100,
    sort_by: str = "target",
) -> list[list[int]]:
    """Group sentence indices into batches under a token budget and/or sentence count.

    A batch's cost is ``n_sentences * max(longest source, longest target)`` (padded size);
    a single sentence longer than ``max_tokens`` still gets a batch of its own rather than
    being dropped.  Deterministic in ``(seed, epoch)``.

    Within a pool, pairs are sorted by target length, then source length: the stepped decoder,
    the output layer and the softmax run over every padded target position and are most of a
    step, while the encoder packs its input and skips source padding (every run reports both
    padding shares when it ends).  ``sort_by="source"`` sorts by source length first instead (search and model
    scoring, where the source is what every step reads).
    """
    if max_tokens is None and batch_size is None:
        raise NmtkitError("give --max-tokens or --batch-size")
    n = len(src_sizes)
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(n) if shuffle else np.arange(n)
    cost = np.maximum(src_sizes, tgt_sizes)
    avg = max(1.0, float(cost.mean())) if n else 1.0
    per_batch = batch_size or max(1, int((max_tokens or 1) / avg))
    pool = max(1, pool_batches * per_batch) if shuffle else n or 1
    batches: list[list[int]] = []
    for start in range(0, n, pool):
        chunk = order[start : start + pool]
        keys = (src_sizes[chunk], tgt_sizes[chunk]) if sort_by == "target" else (tgt_sizes[chunk], src_sizes[chunk])
        chunk = chunk[np.lexsort(keys)]  # the last key sorts first (target length first for training: see above)
        cur: list[int] = []
        longest = 0
        for i in chunk:
            c = int(cost[i])
            new_longest = max(longest, c)
            too_many_tokens = max_tokens is not None and cur and new_longest * (len(cur) + 1) > max_tokens
            too_many_sents = batch_size is not None and len(cur) >= batch_size
            if too_many_tokens or too_many_sents:
                batches.append(cur)
                cur, new_longest = [], c
            cur.append(int(i))
            longest = new_longest
        if cur:
            batches.append(cur)
    if shuffle:
        perm = rng.permutation(len(batches))
        batches = [batches[k] for k in perm]
    return batches
