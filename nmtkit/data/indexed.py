"""The binarized token format: a ``.bin`` of concatenated ids and an ``.idx`` index.

``.idx`` layout (little-endian)::

    magic     8 bytes   b"NMTKIDX\\0"
    version   uint32    FORMAT_VERSION
    dtype     uint8     1 = uint16, 2 = int32
    reserved  3 bytes
    count     uint64    number of sentences N
    sizes     int32[N]  tokens per sentence (no </s> stored)
    offsets   int64[N+1] start of each sentence in the .bin, in tokens

The ``.bin`` is memory-mapped, so a 4M-sentence corpus costs no RAM until it is read. Both
files are checked when opened: magic, version and exact length, then (vectorised, a fraction
of a second even for millions of sentences) that the offsets start at 0 and never decrease,
that every size equals its offset difference, and, given the dictionary size, that every id
is in range.  A truncated, foreign or corrupted file is an error that names the file and the
sentence, never garbage ids, an ``IndexError`` mid-epoch or a 27,000-token "sentence".
"""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from nmtkit.data.dictionary import SPECIALS, UNK_ID
from nmtkit.errors import InputError

MAGIC = b"NMTKIDX\x00"
FORMAT_VERSION = 1
_HEADER = struct.Struct("<8sIB3xQ")
DTYPES = {1: np.uint16, 2: np.int32}


def dtype_for_vocab(vocab_size: int) -> tuple[int, type]:
    """uint16 when every id fits, else int32."""
    return (1, np.uint16) if vocab_size <= 65535 else (2, np.int32)


def write_indexed(prefix: str | os.PathLike, sentences: Iterable[Sequence[int] | np.ndarray], vocab_size: int) -> int:
    """Write ``prefix.bin`` and ``prefix.idx``; returns the number of sentences.

    Callers write into a temporary directory (preprocess does), so no partial file survives.
    """
    code, dtype = dtype_for_vocab(vocab_size)
    sizes: list[int] = []
    with open(f"{prefix}.bin", "wb") as fb:
        for ids in sentences:
            arr: np.ndarray = np.asarray(ids, dtype=dtype)
            fb.write(arr.tobytes())
            sizes.append(len(arr))
    size_arr = np.asarray(sizes, dtype=np.int32)
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(size_arr, out=offsets[1:])
    with open(f"{prefix}.idx", "wb") as fi:
        fi.write(_HEADER.pack(MAGIC, FORMAT_VERSION, code, len(sizes)))
        fi.write(size_arr.astype("<i4").tobytes())
        fi.write(offsets.astype("<i8").tobytes())
    return len(sizes)


def _check_offsets(path: str, sizes: np.ndarray, offsets: np.ndarray) -> None:
    """Offsets start at 0, never decrease, and each sentence's size is its offset difference."""
    if offsets[0] != 0:
        raise InputError(path, None, f"corrupt index: sentence 0 (0-based) starts at offset {int(offsets[0])}, not 0")
    spans = np.diff(offsets)
    if (spans < 0).any():
        k = int(np.argmax(spans < 0))
        raise InputError(path, None, f"corrupt index: offsets decrease at sentence {k} (0-based): "
                         f"{int(offsets[k])} then {int(offsets[k + 1])}")
    if (spans != sizes).any():
        k = int(np.argmax(spans != sizes))
        raise InputError(path, None, f"corrupt index: sentence {k} (0-based) has size {int(sizes[k])} "
                         f"but its offsets span {int(spans[k])} tokens")


class IndexedTokens:
    """Read-only, memory-mapped view of one ``.bin``/``.idx`` pair."""

    def __init__(self, prefix: str | os.PathLike, vocab_size: int | None = None) -> None:
        """Open and validate ``prefix.idx``/``prefix.bin``; with ``vocab_size`` every id is
        checked to be below it (one pass over the data)."""
        self.prefix = str(prefix)
        idx_path, bin_path = Path(f"{prefix}.idx"), Path(f"{prefix}.bin")
        for p in (idx_path, bin_path):
            if not p.is_file():
                raise InputError(str(p), None, "no such file")
        raw = idx_path.read_bytes()
        if len(raw) < _HEADER.size:
            raise InputError(str(idx_path), None, "truncated index (shorter than its header)")
        magic, version, code, count = _HEADER.unpack_from(raw, 0)
        if magic != MAGIC:
            raise InputError(str(idx_path), None, "not an nmtkit index file (wrong magic)")
        if version != FORMAT_VERSION:
            raise InputError(str(idx_path), None, f"index format version {version}, this nmtkit reads {FORMAT_VERSION}")
        if code not in DTYPES:
            raise InputError(str(idx_path), None, f"unknown dtype code {code}")
        expected = _HEADER.size + 4 * count + 8 * (count + 1)
        if len(raw) != expected:
            raise InputError(str(idx_path), None, f"truncated or corrupt index: {len(raw)} bytes, expected {expected} for {count} sentences")
        self.dtype = DTYPES[code]
        self.sizes = np.frombuffer(raw, dtype="<i4", count=count, offset=_HEADER.size).astype(np.int64)
        self.offsets = np.frombuffer(raw, dtype="<i8", count=count + 1, offset=_HEADER.size + 4 * count)
        _check_offsets(str(idx_path), self.sizes, self.offsets)
        want_bytes = int(self.offsets[-1]) * np.dtype(self.dtype).itemsize
        have_bytes = bin_path.stat().st_size
        if have_bytes != want_bytes:
            raise InputError(str(bin_path), None, f"truncated or corrupt data: {have_bytes} bytes, index expects {want_bytes}")
        self._data = np.memmap(bin_path, dtype=self.dtype, mode="r") if want_bytes else np.zeros(0, dtype=self.dtype)
        if vocab_size is not None:
            self.check_ids(vocab_size)

    def check_ids(self, vocab_size: int) -> None:
        """Every id must index the dictionary, and none may be ``<pad>``, ``<s>`` or ``</s>``
        (ids 0-2, which :meth:`Dictionary.encode` never writes inside a sentence): a bad id would
        otherwise be an IndexError mid-epoch, or padding or a sentence end trained on silently."""
        if not len(self._data):
            return
        if int(self._data.max()) < vocab_size and int(self._data.min()) >= UNK_ID:  # no temporary arrays
            return
        bad = (self._data < UNK_ID) | (self._data >= vocab_size)
        pos = int(np.argmax(bad))
        sent = int(np.searchsorted(self.offsets, pos, side="right")) - 1
        value = int(self._data[pos])
        why = (f"the special id {value} ({SPECIALS[value]}), which no sentence may hold: preprocess it again"
               if 0 <= value < UNK_ID else f"token id {value}, but the dictionary has {vocab_size} entries")
        raise InputError(f"{self.prefix}.bin", None, f"corrupt data: sentence {sent} (0-based) holds {why}")

    def __len__(self) -> int:
        return len(self.sizes)

    def __getitem__(self, i: int) -> np.ndarray:
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return np.asarray(self._data[self.offsets[i] : self.offsets[i + 1]], dtype=np.int64)
