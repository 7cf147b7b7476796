#!/usr/bin/env python3
"""Prepare the Canadian Hansards (English-French) for training nmtkit models and scoring
their attention alignments against the HLT-NAACL 2003 gold set.

Why this script: the training bitext is raw (untokenized, mixed case, French accents
stripped), while the gold alignments index the words of a tokenized, lowercased text with
French contractions undone (``du`` -> ``de le``, ``l'`` -> ``le``, ``qu'`` -> ``que``) and
with accents.  A model trained on text tokenized differently from the gold text would see
unknown words and split words differently, and its links could not be compared.  So:

* training text (``train``, ``valid``) is Moses-tokenized, hyphens split (``peut - etre``),
  French elisions and article contractions expanded as in the gold set, then lowercased
  (and accent-stripped, a no-op on this ASCII-folded text);
* the gold-set text (``test``) is only normalized **word by word** (lowercased, accents
  stripped: ``à`` -> ``a``, ``œ`` -> ``oe``), so the number and order of words, and thus
  every gold link, stay valid.

Outputs in ``--out``: ``train.{en,fr}``, ``valid.{en,fr}`` (the first ``--valid-size`` lines
of the held-out ``house-senate.testing`` part), ``test.{en,fr}`` and ``test.gold`` (a copy of
the gold links: ``i-j`` sure, ``i?j`` possible; English is the source side).  Data is read
from ``--data`` (default ``$NMTKIT_DATA/align``) and never copied into the repository.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import unicodedata
from multiprocessing import Pool
from pathlib import Path
from typing import Iterable, Iterator

#: French elided forms (the apostrophe token Moses keeps attached) -> the full word.
ELISIONS = {
    "l'": "le", "d'": "de", "qu'": "que", "n'": "ne", "s'": "se", "c'": "ce", "j'": "je",
    "m'": "me", "t'": "te", "jusqu'": "jusque", "lorsqu'": "lorsque", "puisqu'": "puisque",
    "quoiqu'": "quoique", "quelqu'": "quelque", "presqu'": "presque",
}
#: French preposition + article contractions -> the two words the gold set writes.
CONTRACTIONS = {"du": ["de", "le"], "des": ["de", "les"], "au": ["a", "le"], "aux": ["a", "les"]}
#: Letters NFKD does not decompose, folded the way the training text was.
LIGATURES = {"œ": "oe", "Œ": "OE", "æ": "ae", "Æ": "AE"}
_DASH = re.compile(r"^@(\S+)@$")


def fold_word(word: str) -> str:
    """Lowercase and strip accents from one word (``Élève`` -> ``eleve``, ``œuvre`` -> ``oeuvre``)."""
    word = "".join(LIGATURES.get(c, c) for c in word)
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def normalize_gold_line(line: str) -> str:
    """A gold-set line, folded word by word (same words, same positions)."""
    return " ".join(fold_word(w) for w in line.split(" ") if w)


def _french_words(tokens: Iterable[str]) -> Iterator[str]:
    """Expand elisions and contractions; keep ``aujourd'hui`` whole (Moses splits it)."""
    toks = list(tokens)
    k = 0
    while k < len(toks):
        low = toks[k].lower()
        if low == "aujourd'" and k + 1 < len(toks) and toks[k + 1].lower() == "hui":
            yield toks[k] + toks[k + 1]
            k += 2
            continue
        if low in ELISIONS:
            yield ELISIONS[low]
        elif low in CONTRACTIONS:
            yield from CONTRACTIONS[low]
        else:
            yield toks[k]
        k += 1


class Normalizer:
    """Raw training line -> the gold set's tokenization (one per language and process)."""

    def __init__(self, lang: str) -> None:
        from sacremoses import MosesTokenizer

        self.lang = lang
        self.moses = MosesTokenizer(lang=lang)

    def __call__(self, line: str) -> str:
        tokens = self.moses.tokenize(line, escape=False, aggressive_dash_splits=True)
        tokens = [(_DASH.match(t).group(1) if _DASH.match(t) else t) for t in tokens]
        if self.lang == "fr":
            tokens = list(_french_words(tokens))
        return " ".join(fold_word(t) for t in tokens)


_worker: Normalizer | None = None


def _init(lang: str) -> None:
    global _worker
    _worker = Normalizer(lang)


def _normalize_chunk(lines: list[str]) -> list[str]:
    assert _worker is not None
    return [_worker(line) for line in lines]


def normalize_lines(lines: list[str], lang: str, workers: int, chunk: int = 2000) -> list[str]:
    """Normalize many lines with ``workers`` processes, order kept."""
    chunks = [lines[i:i + chunk] for i in range(0, len(lines), chunk)]
    if workers <= 1:
        _init(lang)
        return [out for c in chunks for out in _normalize_chunk(c)]
    with Pool(workers, initializer=_init, initargs=(lang,)) as pool:
        return [out for res in pool.imap(_normalize_chunk, chunks) for out in res]


def read_text(path: Path) -> list[str]:
    """Lines split on ``\\n`` only (strict UTF-8, CRLF tolerated)."""
    with open(path, "rb") as fh:
        data = fh.read().decode("utf-8")
    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def write_text(path: Path, lines: Iterable[str]) -> None:
    """Write to a temporary file and rename it into place (no half-written outputs)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        for line in lines:
            fh.write(line + "\n")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    default_data = os.path.join(os.environ.get("NMTKIT_DATA", "../shared/data"), "align")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=default_data,
                    help="folder with hansards-enfr-train/ and hansards-enfr-dev/ (default: $NMTKIT_DATA/align)")
    ap.add_argument("--out", required=True, help="output folder (outside the repository)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="tokenizer processes")
    ap.add_argument("--valid-size", type=int, default=2000, help="validation pairs from house-senate.testing")
    ap.add_argument("--max-train", type=int, default=0, help="use only the first N training pairs (0: all)")
    args = ap.parse_args(argv)

    train_dir = Path(args.data) / "hansards-enfr-train"
    dev_dir = Path(args.data) / "hansards-enfr-dev"
    for p in (train_dir / "house-senate.training.en", train_dir / "house-senate.testing.en", dev_dir / "gold.pharaoh"):
        if not p.is_file():
            print(f"prepare.py: error: {p}: no such file (set --data or NMTKIT_DATA)", file=sys.stderr)
            return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    parts = {"train": ("house-senate.training", args.max_train), "valid": ("house-senate.testing", args.valid_size)}
    for split, (stem, limit) in parts.items():
        raw = {lang: read_text(train_dir / f"{stem}.{lang}") for lang in ("en", "fr")}
        if len(raw["en"]) != len(raw["fr"]):
            print(f"prepare.py: error: {train_dir / stem}.en/.fr are not parallel "
                  f"({len(raw['en'])} vs {len(raw['fr'])} lines)", file=sys.stderr)
            return 1
        for lang in ("en", "fr"):
            lines = raw[lang][:limit] if limit > 0 else raw[lang]
            write_text(out / f"{split}.{lang}", normalize_lines(lines, lang, args.workers))
            print(f"{out / f'{split}.{lang}'}: {len(lines)} lines", file=sys.stderr)

    for src, lang in (("src.en", "en"), ("tgt.fr", "fr")):
        lines = read_text(dev_dir / src)
        write_text(out / f"test.{lang}", [normalize_gold_line(line) for line in lines])
    shutil.copyfile(dev_dir / "gold.pharaoh", out / "test.gold")
    print(f"{out}/test.{{en,fr}} and test.gold: {len(lines)} gold-aligned pairs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
