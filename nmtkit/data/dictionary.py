"""Token <-> id mapping with fixed special ids, saved as ``dict.{lang}.txt``.

File format: one ``token count`` line per non-special token, most frequent first.  The
four specials are not written; they always take ids 0-3 (``<pad> <s> </s> <unk>``) so
that every dictionary of every model agrees on them.
"""
from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from typing import Iterable, Sequence

from nmtkit.data.text_pipeline import split_words
from nmtkit.errors import InputError
from nmtkit.utils.textio import atomic_write, iter_lines

#: A count in a dictionary file: ASCII digits only (``int`` would accept '²' in isdigit's sense, then fail).
_COUNT = re.compile(r"-?[0-9]+")

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3


def is_one_word(symbol: str) -> bool:
    """Whether ``symbol`` is a word as nmtkit's text pipeline splits lines (:func:`split_words`):
    no space, tab, line break or control character.  Other Unicode spaces (U+00A0 ...) stay inside
    words there, so a dictionary may hold them."""
    return symbol.splitlines() == [symbol] and split_words(symbol) == [symbol]  # splitlines: "\n" is kept by split_words


class Dictionary:
    """A vocabulary: specials first, then tokens by descending count (ties alphabetical)."""

    pad_id = PAD_ID
    bos_id = BOS_ID
    eos_id = EOS_ID
    unk_id = UNK_ID

    def __init__(self) -> None:
        self.symbols: list[str] = list(SPECIALS)
        self.counts: list[int] = [0] * len(SPECIALS)
        self.index: dict[str, int] = {s: i for i, s in enumerate(SPECIALS)}

    # -- building -----------------------------------------------------------------
    @classmethod
    def build(cls, counter: Counter, threshold: int = 0, nwords: int = -1) -> "Dictionary":
        """Keep tokens seen at least ``threshold`` times, then the ``nwords`` most frequent.

        ``nwords`` counts ordinary tokens only (the specials come on top), so
        ``--nwordssrc 50000`` gives the papers' 50K words plus ``<unk>`` and friends.
        """
        d = cls()
        items = [(t, c) for t, c in counter.items() if c >= max(threshold, 1) and t not in d.index]
        items.sort(key=lambda tc: (-tc[1], tc[0]))
        if nwords is not None and nwords >= 0:
            items = items[:nwords]
        for tok, cnt in items:
            d.add(tok, cnt)
        return d

    def add(self, token: str, count: int = 1) -> int:
        if token in self.index:
            i = self.index[token]
            self.counts[i] += count
            return i
        i = len(self.symbols)
        self.symbols.append(token)
        self.counts.append(count)
        self.index[token] = i
        return i

    # -- lookup ---------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.symbols)

    def __contains__(self, token: str) -> bool:
        return token in self.index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dictionary) and self.symbols == other.symbols

    def __getitem__(self, i: int) -> str:
        return self.symbols[i]

    def id(self, token: str) -> int:
        """The id of a symbol (the specials' too); text goes through :meth:`encode`."""
        return self.index.get(token, UNK_ID)

    def encode(self, tokens: Sequence[str], add_eos: bool = True) -> list[int]:
        """Text tokens -> ids.  A token that spells ``<pad>``, ``<s>`` or ``</s>`` is ``<unk>``:
        text cannot end a sentence early, nor hide padding inside one (in the binarized data the
        model would skip it in the loss, or stop reading the source there)."""
        get = self.index.get
        ids = [i if (i := get(t, UNK_ID)) >= UNK_ID else UNK_ID for t in tokens]
        if add_eos:
            ids.append(EOS_ID)
        return ids

    def decode(self, ids: Iterable[int], strip_specials: bool = True) -> list[str]:
        """Ids -> tokens, stopping at ``</s>``; ``<pad>``/``<s>`` dropped when ``strip_specials``."""
        out = []
        for i in ids:
            i = int(i)
            if i == EOS_ID and strip_specials:
                break
            if strip_specials and i in (PAD_ID, BOS_ID):
                continue
            out.append(self.symbols[i])
        return out

    def checksum(self) -> str:
        """SHA-256 of the symbol list: how checkpoints and data dirs prove they match."""
        h = hashlib.sha256()
        for s in self.symbols:
            h.update(s.encode("utf-8") + b"\n")
        return h.hexdigest()

    # -- persistence ------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        with atomic_write(path) as fh:
            for sym, cnt in zip(self.symbols[len(SPECIALS):], self.counts[len(SPECIALS):]):
                fh.write(f"{sym} {cnt}\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Dictionary":
        d = cls()
        for lineno, line in iter_lines(path):
            parts = line.rsplit(" ", 1)
            if len(parts) != 2 or not parts[0] or not _COUNT.fullmatch(parts[1]):
                raise InputError(str(path), lineno, f"expected 'token count', got {line!r}")
            tok, cnt = parts[0], int(parts[1])
            if not is_one_word(tok):
                raise InputError(str(path), lineno, f"token {tok!r} is not one word as nmtkit splits text "
                                                    "(a space, tab, line break or control character): it could never occur")
            if tok in d.index:
                if tok in SPECIALS:
                    continue
                raise InputError(str(path), lineno, f"duplicate token {tok!r}")
            d.add(tok, cnt)
        return d

    @classmethod
    def from_symbols(cls, symbols: Sequence[str]) -> "Dictionary":
        """Rebuild from a saved symbol list (as stored inside checkpoints)."""
        if tuple(symbols[: len(SPECIALS)]) != SPECIALS:
            raise ValueError("symbol list does not start with the special tokens")
        d = cls()
        for k, s in enumerate(symbols[len(SPECIALS):], start=len(SPECIALS)):
            # what load() refuses in a file: a symbol with a line break would split an output line
            if not isinstance(s, str) or not is_one_word(s):
                raise ValueError(f"symbol {k} ({s!r}) is empty or not one word (a space, tab, line break or control character)")
            if s in d.index:
                raise ValueError(f"symbol {k} ({s!r}) is a duplicate")
            d.add(s, 0)
        return d
