"""Writing the sample corpus: names held out for valid/test, distinct sentences, the files.

Valid and test draw most of their names from ones never seen in training (what
unknown-word replacement is tested on) and never repeat a sentence of another split.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Iterator, Sequence

from nmtkit.errors import NmtkitError
from nmtkit.sample.grammar import KINDS, Grammar, weighted_choice
from nmtkit.sample.lexicon import ADJECTIVES, NOUNS, VERBS, build_names
from nmtkit.sample.tokens import Example
from nmtkit.utils.checks import require_at_least, require_at_most
from nmtkit.utils.textio import atomic_write, read_lines


MIN_LEN, MAX_LEN = 4, 20   # tokens per side, punctuation included

#: Every name the generator can use, in a fixed order (words of the lexicon excluded).
NAMES: tuple[str, ...] = build_names(tuple(
    w.lower() for n in NOUNS for w in (n.en, n.en_pl, n.de, n.de_pl) if w
) + tuple(w for a in ADJECTIVES for w in (a.en, a.de)) + tuple(w for v in VERBS for w in v.en + (v.de,)))


def iter_pairs(rng: random.Random, names: Sequence[str] = NAMES, new_names: Sequence[str] = (),
               new_name_rate: float = 0.0, kinds: Sequence[str] | None = None) -> Iterator[Example]:
    """Yield an endless stream of sentence pairs drawn from ``rng``.

    ``names`` are used for proper names; with probability ``new_name_rate`` a name is
    drawn from ``new_names`` instead (held-out names for valid/test).  ``kinds``
    restricts the sentence kinds (keys of :data:`KINDS`).  Pairs longer than
    ``MAX_LEN`` or shorter than ``MIN_LEN`` tokens on either side are skipped.
    """
    chosen = tuple(kinds) if kinds else tuple(KINDS)
    for k in chosen:
        if k not in KINDS:
            raise ValueError(f"unknown sentence kind {k!r}; known: {', '.join(KINDS)}")
    weights = [(k, KINDS[k]) for k in chosen]
    grammar = Grammar(rng, names, new_names, new_name_rate)
    while True:
        ex = grammar.sentence(weighted_choice(rng, weights))
        if MIN_LEN <= len(ex.en) <= MAX_LEN and MIN_LEN <= len(ex.de) <= MAX_LEN:
            yield ex


def split_names(seed: int, held_out: float = 0.15) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Partition :data:`NAMES` into (train, valid-only, test-only) names for ``seed``."""
    names = list(NAMES)
    random.Random(f"nmtkit-sample:{seed}:names").shuffle(names)
    k = int(len(names) * held_out)
    return tuple(names[2 * k:]), tuple(names[:k]), tuple(names[k:2 * k])


def format_links(links: Sequence[tuple[int, int]]) -> str:
    return " ".join(f"{i}-{j}" for i, j in links)


#: Share of names drawn from the held-out names in valid/test.
NEW_NAME_RATE = 0.8


#: The files :func:`generate_corpus` writes.
CORPUS_FILES = frozenset(f"{split}.{ext}" for split in ("train", "valid", "test") for ext in ("en", "de", "align"))


def is_sample_corpus(path: str | Path) -> bool:
    """Whether ``path`` holds nothing but files :func:`generate_corpus` writes: the only kind of
    directory ``nmtkit sample --overwrite`` may replace."""
    try:
        names = {entry.name for entry in Path(path).iterdir()}
    except OSError:
        return False
    return bool(names) and names <= CORPUS_FILES


#: The most pairs of one split: a sample corpus is a test corpus, and the English sentences drawn
#: are remembered (valid and test repeat none of them); ``--train 10**12`` grew until the machine ran
#: out of memory.
MAX_PAIRS = 1_000_000


def generate_corpus(out_dir: str | Path, seed: int = 1, n_train: int = 20000, n_valid: int = 500,
                    n_test: int = 500) -> dict[str, int]:
    """Write ``{train,valid,test}.{en,de,align}`` under ``out_dir``; return lines per split.

    Valid and test use names never seen in training (most of their names) and never
    repeat an English sentence of train (or of each other).  Each pair is written as it is drawn.
    """
    for what, n in (("train", n_train), ("valid", n_valid), ("test", n_test)):
        require_at_least(f"--{what}", n, 1)
        require_at_most(f"--{what}", n, MAX_PAIRS)
    train_names, valid_names, test_names = split_names(seed)
    out = Path(out_dir)
    seen: set[str] = set()
    counts: dict[str, int] = {}
    plan = (("train", n_train, ()), ("valid", n_valid, valid_names), ("test", n_test, test_names))
    for split, n, new_names in plan:
        rng = random.Random(f"nmtkit-sample:{seed}:{split}")
        stream = iter_pairs(rng, train_names, new_names, NEW_NAME_RATE if new_names else 0.0)
        tries = written = 0
        with atomic_write(out / f"{split}.en") as f_en, atomic_write(out / f"{split}.de") as f_de, \
                atomic_write(out / f"{split}.align") as f_al:
            while written < n:
                ex = next(stream)
                tries += 1
                key = " ".join(ex.en)
                if split != "train" and key in seen:
                    if tries > 50 * n + 1000:
                        raise NmtkitError(f"could not draw {n} distinct {split} sentences")
                    continue
                seen.add(key)
                f_en.write(key + "\n")
                f_de.write(" ".join(ex.de) + "\n")
                f_al.write(format_links(ex.links) + "\n")
                written += 1
        counts[split] = written
    return counts


def describe_corpus(out_dir: str | Path) -> dict:
    """Sizes of a written corpus, for the CLI summary: lines and tokens per split,
    training vocabulary per language, and the share of test sentences that contain
    a name never seen in training (what unknown-word replacement is tested on)."""
    out = Path(out_dir)
    names = set(NAMES)
    splits: dict[str, dict[str, int]] = {}
    texts: dict[tuple[str, str], list[str]] = {}
    for split in ("train", "valid", "test"):
        row: dict[str, int] = {}
        for lang in ("en", "de"):
            lines = read_lines(out / f"{split}.{lang}")
            texts[split, lang] = lines
            row["lines"] = len(lines)
            row[f"{lang}_tokens"] = sum(len(line.split()) for line in lines)
        splits[split] = row
    train_vocab = {lang: {w for line in texts["train", lang] for w in line.split()} for lang in ("en", "de")}
    test = texts["test", "en"]
    unseen = sum(any(w in names and w not in train_vocab["en"] for w in line.split()) for line in test)
    return {
        "splits": splits,
        "en_types": len(train_vocab["en"]),
        "de_types": len(train_vocab["de"]),
        "test_unseen_name_share": unseen / len(test) if test else 0.0,
    }
