"""Output words and the links between them, for the sample corpus (:mod:`nmtkit.sample`).

Why objects and not strings: the grammar links an English word to its German counterpart
when it makes them, before word order moves them about; links point at :class:`Tok`
objects, and :func:`finish_example` turns them into index pairs once each side is final.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence


class Tok:
    """One output word; links point at Tok objects so that reordering keeps them right."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Tok({self.text!r})"


Links = list  # list[tuple[Tok, Tok]]: (English token, German token)


def link(links: Links, en: Tok | Sequence[Tok] | None, de: Tok | Sequence[Tok] | None) -> None:
    """Link every English token in ``en`` to every German token in ``de``."""
    if en is None or de is None:
        return
    for e in ([en] if isinstance(en, Tok) else en):
        for d in ([de] if isinstance(de, Tok) else de):
            links.append((e, d))


class Example(NamedTuple):
    """A generated sentence pair: tokens and sorted (English index, German index) links."""

    en: list[str]
    de: list[str]
    links: list[tuple[int, int]]


def finish_example(en: list[Tok], de: list[Tok], links: Links) -> Example:
    """Capitalise the first word of each side and turn token links into index pairs."""
    pos_en = {id(t): i for i, t in enumerate(en)}
    pos_de = {id(t): j for j, t in enumerate(de)}
    pairs = sorted({(pos_en[id(e)], pos_de[id(d)]) for e, d in links if id(e) in pos_en and id(d) in pos_de})
    en_words = [t.text for t in en]
    de_words = [t.text for t in de]
    for words in (en_words, de_words):
        words[0] = words[0][:1].upper() + words[0][1:]
    return Example(en_words, de_words, pairs)
