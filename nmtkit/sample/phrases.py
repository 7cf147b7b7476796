"""Noun phrases and prepositional phrases, realised on both sides with their links.

An :class:`NP` is chosen first (noun, determiner, adjective, number, pronoun or name) and
realised later in the case its role needs; German articles, adjective endings and
contractions (in dem -> im) follow from :mod:`nmtkit.sample.morphology`.
"""
from __future__ import annotations

from dataclasses import dataclass

from nmtkit.sample.lexicon import NUMBERS, POSSESSIVES, PRONOUNS, Adjective, Noun
from nmtkit.sample.morphology import CONTRACTIONS, german_adjective, german_determiner, german_noun
from nmtkit.sample.tokens import Links, Tok, link


@dataclass(frozen=True)
class NP:
    """A noun phrase to be realised in some case.

    kind: ``noun`` (det + optional adjective + noun), ``pron`` (index into PRONOUNS),
    ``name`` or ``coord`` (``parts`` joined by and/und).  ``det`` is one of def, indef,
    no, poss, this, every, num, many, some, bare; ``which`` picks the possessive or number.
    """

    kind: str
    noun: Noun | None = None
    plural: bool = False
    det: str = "def"
    which: int = 0
    adj: Adjective | None = None
    pron: int = 0
    name: str = ""
    parts: tuple["NP", ...] = ()

    @property
    def person(self) -> int:
        return PRONOUNS[self.pron][0] if self.kind == "pron" else 3

    @property
    def is_plural(self) -> bool:
        if self.kind == "pron":
            return PRONOUNS[self.pron][1]
        return self.kind == "coord" or self.plural

    @property
    def gender(self) -> str:
        if self.kind == "noun":
            assert self.noun is not None
            return self.noun.gender
        if self.kind == "pron":
            return PRONOUNS[self.pron][2] or "m"
        return "m"

    @property
    def labels(self) -> tuple[str, ...]:
        if self.kind == "noun":
            assert self.noun is not None
            return self.noun.labels
        if self.kind == "coord":
            return self.parts[0].labels
        return ("person",)

    @property
    def is_pronoun(self) -> bool:
        return self.kind == "pron"


def realize_np(np: NP, case: str, links: Links) -> tuple[list[Tok], list[Tok]]:
    """English and German tokens of ``np`` in German ``case`` (nom, acc, dat)."""
    if np.kind == "pron":
        _, _, _, en_forms, de_forms = PRONOUNS[np.pron]
        en = [Tok(w) for w in en_forms[0 if case == "nom" else 1].split()]
        de = [Tok(de_forms[("nom", "acc", "dat").index(case)])]
        link(links, en, de)
        return en, de
    if np.kind == "name":
        en_t, de_t = Tok(np.name), Tok(np.name)
        link(links, en_t, de_t)
        return [en_t], [de_t]
    if np.kind == "coord":
        en, de = realize_np(np.parts[0], case, links)
        and_en, und = Tok("and"), Tok("und")
        link(links, and_en, und)
        en2, de2 = realize_np(np.parts[1], case, links)
        return en + [and_en] + en2, de + [und] + de2
    noun = np.noun
    assert noun is not None
    en: list[Tok] = []
    de: list[Tok] = []
    en_det = _english_determiner(np)
    de_det = german_determiner(np.det, noun.gender, np.plural, case, np.which)
    det_pair = (Tok(en_det) if en_det else None, Tok(de_det) if de_det else None)
    for side, t in zip((en, de), det_pair):
        if t is not None:
            side.append(t)
    link(links, *det_pair)
    if np.adj is not None:
        a_en = Tok(np.adj.en)
        a_de = Tok(german_adjective(np.adj, np.det, noun.gender, np.plural, case))
        en.append(a_en)
        de.append(a_de)
        link(links, a_en, a_de)
    n_en = Tok(noun.en_pl if np.plural else noun.en)
    n_de = Tok(german_noun(noun, np.plural, case))
    en.append(n_en)
    de.append(n_de)
    link(links, n_en, n_de)
    if en_det == "a" and _vowel_sound(en[1].text):
        en[0].text = "an"
    return en, de


def _english_determiner(np: NP) -> str | None:
    if np.det == "def":
        return "the"
    if np.det == "indef":
        return "a"
    if np.det == "poss":
        return POSSESSIVES[np.which][0]
    if np.det == "num":
        return NUMBERS[np.which][0]
    if np.det == "this":
        return "these" if np.plural else "this"
    return {"no": "no", "every": "every", "many": "many", "some": "some"}.get(np.det)


def _vowel_sound(word: str) -> bool:
    """a/an: by sound, so "an old man" but "a uniform"; the lexicon avoids the rest."""
    return word[:1].lower() in "aeiou" and not word.lower().startswith(("uni", "use", "eu", "one"))


@dataclass(frozen=True)
class PP:
    """A prepositional phrase: English preposition words, German preposition and case."""

    en: tuple[str, ...]
    de: str
    case: str
    np: NP


def realize_pp(pp: PP, links: Links) -> tuple[list[Tok], list[Tok]]:
    """Realise a PP; "in dem Haus" becomes "im Haus" with both "in" and "the" linked to it."""
    p_en = [Tok(w) for w in pp.en]
    p_de = Tok(pp.de)
    link(links, p_en, p_de)
    en, de = realize_np(pp.np, pp.case, links)
    return p_en + en, contract(p_de, de, pp.np, links)


def contract(prep: Tok, np_de: list[Tok], np: NP, links: Links) -> list[Tok]:
    """German preposition + NP, merging "von dem" into "vom" (the article's links move along)."""
    if np.kind == "noun" and np.det == "def":
        short = CONTRACTIONS.get((prep.text, np_de[0].text))
        if short:
            article = np_de[0]
            prep.text = short
            links[:] = [(e, prep if d is article else d) for e, d in links]
            return [prep] + np_de[1:]
    return [prep] + np_de
