"""A seeded English->German toy corpus with gold word alignments (``nmtkit sample``).

What it is for: the README demo, the tests and quick experiments need a parallel corpus
that a ~1M-parameter attention LSTM learns in a few CPU minutes, that exercises the
things attention has to get right, and that comes with exact word alignments for
alignment-error-rate checks.  It is *not* a benchmark (Multi30k is): the language is
small and regular by design.

The grammar (a few hundred content words per side plus ~1,700 syllable-built names):

* noun phrases with German gender (der/die/das), case (nominative subject, accusative
  object, dative after mit/zu/von/aus/bei/in/auf/... and for the recipient of geben),
  weak masculine nouns (den Jungen), German plurals and dative plural -n, adjective
  endings (weak after der/dieser/jeder, mixed after ein/kein/possessives, strong without
  article or after numbers), and contractions (in dem -> im, zu der -> zur);
* pronouns in all cases, subject-verb agreement for every person and number;
* present, English simple past (German perfect, or Präteritum for sein/haben/modals),
  perfect (has seen -> hat ... gesehen), future (will -> wird ... sehen) and modals
  (can/must/want to -> kann/muss/will ... sehen), with ``nicht`` placed in the middle
  field and do-support on the English side;
* German word order: verb second (also after a fronted time phrase or clause), verb-final
  subordinate and relative clauses (..., weil der Mann den Hund sieht .), separable verbs
  (ruft ... an / anruft), pronouns before nominal objects, dative before accusative;
* yes/no and wh-questions (wen/wem/was/wo), ``that``-complements (dass), relative clauses.

Each sentence pair comes with sure links in Pharaoh ``i-j`` format (English index first)
made while the words are generated, so they are right by construction: articles to
articles, separable prefixes to their English verb or particle, auxiliaries to
auxiliaries, ``saw`` to both ``hat`` and ``gesehen``, names to names, punctuation to
punctuation; words without a counterpart (English ``to`` in ``wants to``, German commas
before ``dass``) stay unaligned.

Determinism: one ``random.Random`` per split seeded from a string (hashed with SHA-512 by
Python, independent of ``PYTHONHASHSEED``); all lists are tuples in a fixed order.
"""
from __future__ import annotations

import functools
import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator, NamedTuple, Sequence

from nmtkit.data.sample_lexicon import (
    ADJECTIVES, BE, CONJUNCTIONS, NOUNS, NUMBERS, POSSESSIVES, PRONOUNS, TIMES, VERBS,
    Adjective, Noun, Verb, build_names,
)
from nmtkit.errors import NmtkitError
from nmtkit.utils.textio import atomic_write, read_lines

MIN_LEN, MAX_LEN = 4, 20   # tokens per side, punctuation included

# ------------------------------------------------------------------ tokens and links


class Tok:
    """One output word; links point at Tok objects so that reordering keeps them right."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Tok({self.text!r})"


Links = list  # list[tuple[Tok, Tok]]: (English token, German token)


def _link(links: Links, en: Tok | Sequence[Tok] | None, de: Tok | Sequence[Tok] | None) -> None:
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


def _finish(en: list[Tok], de: list[Tok], links: Links) -> Example:
    """Capitalise the first word of each side and turn token links into index pairs."""
    pos_en = {id(t): i for i, t in enumerate(en)}
    pos_de = {id(t): j for j, t in enumerate(de)}
    pairs = sorted({(pos_en[id(e)], pos_de[id(d)]) for e, d in links if id(e) in pos_en and id(d) in pos_de})
    en_words = [t.text for t in en]
    de_words = [t.text for t in de]
    for words in (en_words, de_words):
        words[0] = words[0][:1].upper() + words[0][1:]
    return Example(en_words, de_words, pairs)


# ------------------------------------------------------------------ German morphology

_DEF = {"nom": {"m": "der", "f": "die", "n": "das", "pl": "die"},
        "acc": {"m": "den", "f": "die", "n": "das", "pl": "die"},
        "dat": {"m": "dem", "f": "der", "n": "dem", "pl": "den"}}
_REL = {"nom": _DEF["nom"], "acc": _DEF["acc"], "dat": {**_DEF["dat"], "pl": "denen"}}
#: Endings of ein/kein/mein (no ending in masculine nominative and neuter nom/acc).
_EIN = {"nom": {"m": "", "f": "e", "n": "", "pl": "e"},
        "acc": {"m": "en", "f": "e", "n": "", "pl": "e"},
        "dat": {"m": "em", "f": "er", "n": "em", "pl": "en"}}
#: Strong endings: dieser/jeder/viele/einige and adjectives with no article before them.
_STRONG = {"nom": {"m": "er", "f": "e", "n": "es", "pl": "e"},
           "acc": {"m": "en", "f": "e", "n": "es", "pl": "e"},
           "dat": {"m": "em", "f": "er", "n": "em", "pl": "en"}}
#: Adjective endings after der/dieser/jeder.
_WEAK = {"nom": {"m": "e", "f": "e", "n": "e", "pl": "en"},
         "acc": {"m": "en", "f": "e", "n": "e", "pl": "en"},
         "dat": {"m": "en", "f": "en", "n": "en", "pl": "en"}}
#: Adjective endings after ein/kein/possessives.
_MIXED = {"nom": {"m": "er", "f": "e", "n": "es", "pl": "en"},
          "acc": {"m": "en", "f": "e", "n": "es", "pl": "en"},
          "dat": {"m": "en", "f": "en", "n": "en", "pl": "en"}}
_DECLENSION = {"def": _WEAK, "this": _WEAK, "every": _WEAK, "indef": _MIXED, "no": _MIXED, "poss": _MIXED,
               "num": _STRONG, "many": _STRONG, "some": _STRONG, "bare": _STRONG}
#: Preposition + definite article contractions German requires in neutral speech.
_CONTRACT = {("in", "dem"): "im", ("in", "das"): "ins", ("an", "dem"): "am", ("an", "das"): "ans",
             ("zu", "dem"): "zum", ("zu", "der"): "zur", ("von", "dem"): "vom", ("bei", "dem"): "beim"}

_SEIN = ("bin", "bist", "ist", "sind", "seid", "sind")
_HABEN = ("habe", "hast", "hat", "haben", "habt", "haben")
_WERDEN = ("werde", "wirst", "wird", "werden", "werdet", "werden")
_WAR = ("war", "warst", "war", "waren", "wart", "waren")
_MODALS = {  # English tense name -> German present or preterite forms
    "can": ("kann", "kannst", "kann", "können", "könnt", "können"),
    "must": ("muss", "musst", "muss", "müssen", "müsst", "müssen"),
    "want": ("will", "willst", "will", "wollen", "wollt", "wollen"),
}
_PRET_END = ("", "st", "", "n", "t", "n")
_MODAL_PRET = {"could": "konnte", "had_to": "musste", "wanted": "wollte"}


def agreement_index(person: int, plural: bool) -> int:
    """0..5 for ich, du, er/sie, wir, ihr, sie (the order of every conjugation table)."""
    return (person - 1) + (3 if plural else 0)


def _needs_e(stem: str) -> bool:
    """arbeit-est, find-et, öffn-et: an e is inserted after -t/-d and consonant + m/n."""
    if stem.endswith(("t", "d")):
        return True
    if stem.endswith(("m", "n")) and len(stem) > 1:
        before = stem[-2]
        return stem.endswith("chn") or (before not in "aeiouäöülrhmn")
    return False


def present_forms(verb: Verb) -> tuple[str, ...]:
    """The six present-tense forms of a German verb, separable prefix left off."""
    if verb.forms:
        return verb.forms
    inf = verb.de[len(verb.sep):]
    stem = inf[:-1] if inf.endswith(("ern", "eln")) else inf[:-2]
    e = "e" if _needs_e(stem) else ""
    sibilant = stem.endswith(("s", "ß", "z", "x"))
    du = stem + (e + "st" if e else ("t" if sibilant else "st"))
    er = stem + e + "t"
    if verb.stem2:  # vowel change: sieh-st, sieh-t; läd-st, läd-t (no e inserted)
        s2 = verb.stem2
        du = s2 + ("t" if s2.endswith(("s", "ß", "z", "x")) else "st")
        er = s2 if s2.endswith("t") else s2 + "t"
    return (stem + "e", du, er, inf, stem + e + "t", inf)


def german_noun(noun: Noun, plural: bool, case: str) -> str:
    """Noun form for number and case: den Jungen, den Kindern, den Autos."""
    if plural:
        form = noun.de_pl
        if case == "dat" and not form.endswith(("n", "s")):
            form += "n"
        return form
    if noun.obl and case != "nom":
        return noun.obl
    return noun.de


def german_determiner(det: str, gender: str, plural: bool, case: str, which: int = 0) -> str | None:
    """The article/determiner word, or None when German has none (bare, numbers)."""
    g = "pl" if plural else gender
    if det == "def":
        return _DEF[case][g]
    if det in ("indef", "no", "poss"):
        stem = {"indef": "ein", "no": "kein"}.get(det) or POSSESSIVES[which][1]
        return stem + _EIN[case][g]
    if det in ("this", "every", "many", "some"):
        stem = {"this": "dies", "every": "jed", "many": "viel", "some": "einig"}[det]
        return stem + _STRONG[case][g]
    if det == "num":
        return NUMBERS[which][1]
    return None


def german_adjective(adj: Adjective, det: str, gender: str, plural: bool, case: str) -> str:
    """Attributive adjective with the ending the determiner calls for."""
    return adj.de_stem + _DECLENSION[det][case]["pl" if plural else gender]


# ------------------------------------------------------------------ noun phrases


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
        _link(links, en, de)
        return en, de
    if np.kind == "name":
        en_t, de_t = Tok(np.name), Tok(np.name)
        _link(links, en_t, de_t)
        return [en_t], [de_t]
    if np.kind == "coord":
        en, de = realize_np(np.parts[0], case, links)
        and_en, und = Tok("and"), Tok("und")
        _link(links, and_en, und)
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
    _link(links, *det_pair)
    if np.adj is not None:
        a_en = Tok(np.adj.en)
        a_de = Tok(german_adjective(np.adj, np.det, noun.gender, np.plural, case))
        en.append(a_en)
        de.append(a_de)
        _link(links, a_en, a_de)
    n_en = Tok(noun.en_pl if np.plural else noun.en)
    n_de = Tok(german_noun(noun, np.plural, case))
    en.append(n_en)
    de.append(n_de)
    _link(links, n_en, n_de)
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
    _link(links, p_en, p_de)
    en, de = realize_np(pp.np, pp.case, links)
    return p_en + en, _contract(p_de, de, pp.np, links)


def _contract(prep: Tok, np_de: list[Tok], np: NP, links: Links) -> list[Tok]:
    """German preposition + NP, merging "von dem" into "vom" (the article's links move along)."""
    if np.kind == "noun" and np.det == "def":
        short = _CONTRACT.get((prep.text, np_de[0].text))
        if short:
            article = np_de[0]
            prep.text = short
            links[:] = [(e, prep if d is article else d) for e, d in links]
            return [prep] + np_de[1:]
    return [prep] + np_de


# ------------------------------------------------------------------ verb groups


@dataclass
class VerbGroup:
    """The verb's words on both sides, placed later by the clause's word order.

    English: ``aux`` (goes before the subject in questions), ``main`` (not, main verb,
    to), ``part`` (movable particle) and ``prep`` (fixed preposition before the object).
    German: finite verb, non-finite verb (participle/infinitive), separated prefix, nicht.
    """

    aux: list[Tok]
    main: list[Tok]
    part: Tok | None
    prep: Tok | None
    fin: Tok
    nonfin: Tok | None
    de_part: Tok | None
    neg: Tok | None


#: English tense names: pres, past (simple past), perf, fut, and modals can, could,
#: must, had_to, want, wanted.
TENSES = ("pres", "past", "perf", "fut", "can", "could", "must", "had_to", "want", "wanted")


def _english_be(tense_past: bool, idx: int) -> str:
    if tense_past:
        return "was" if idx in (0, 2) else "were"
    return {0: "am", 2: "is"}.get(idx, "are")


def verb_group(verb: Verb, tense: str, neg: bool, idx: int, invert: bool, sub: bool, links: Links) -> VerbGroup:
    """Build and link the verb words of one clause (see :class:`VerbGroup`)."""
    copula = verb.frame == "copula"
    en_base, en_s3, en_past, en_pp = verb.en
    third = idx == 2
    aux: list[str] = []
    main: list[str] = []      # English words after the subject
    do_support = (neg or invert) and not copula
    # ---- English
    if tense in ("pres", "past"):
        past = tense == "past"
        if copula:
            aux = [_english_be(past, idx)]
        elif do_support:
            aux = ["did" if past else ("does" if third else "do")]
            main = [en_base]
        else:
            main = [en_past if past else (en_s3 if third else en_base)]
    elif tense == "perf":
        aux, main = ["has" if third else "have"], [en_pp]
    elif tense in ("fut", "can", "could", "must"):
        aux = [{"fut": "will", "can": "can", "could": "could", "must": "must"}[tense]]
        main = [en_base]
        if tense == "can" and neg:
            aux = ["cannot"]
    elif tense == "had_to":
        main = ["had", "to", en_base]
    elif tense in ("want", "wanted"):
        if neg or invert:
            aux = ["did" if tense == "wanted" else ("does" if third else "do")]
            main = ["want", "to", en_base]
        else:
            main = ["wanted" if tense == "wanted" else ("wants" if third else "want"), "to", en_base]
    else:
        raise ValueError(f"unknown tense {tense!r}")
    if neg and aux != ["cannot"]:
        main = ["not"] + main
    en_aux = [Tok(w) for w in aux]
    en_main = [Tok(w) for w in main]
    # the lexical verb: the copula itself in "is"/"was", else the last word after the subject
    en_lex = en_aux[0] if (copula and tense in ("pres", "past")) else en_main[-1]
    en_part = Tok(verb.en_part) if verb.en_part else None
    en_prep = Tok(verb.en_prep) if verb.en_prep else None
    en_not = next((t for t in en_main if t.text == "not"), None)
    # ---- German
    fin_forms: tuple[str, ...]
    nonfin: str | None = None
    lexical_finite = False
    if tense == "pres":
        fin_forms, lexical_finite = present_forms(verb), True
    elif tense == "past" and (copula or verb.de == "haben"):
        fin_forms = _WAR if copula else tuple("hatte" + e for e in _PRET_END)
        lexical_finite = True
    elif tense in ("past", "perf"):
        fin_forms, nonfin = (_SEIN if verb.sein else _HABEN), verb.pp
    elif tense == "fut":
        fin_forms, nonfin = _WERDEN, verb.de
    elif tense in _MODALS:
        fin_forms, nonfin = _MODALS[tense], verb.de
    else:
        fin_forms, nonfin = tuple(_MODAL_PRET[tense] + e for e in _PRET_END), verb.de
    fin_text = fin_forms[idx]
    de_part = None
    if lexical_finite and verb.sep:
        if sub:
            fin_text = verb.sep + fin_text
        else:
            de_part = Tok(verb.sep)
    fin = Tok(fin_text)
    de_nonfin = Tok(nonfin) if nonfin else None
    de_neg = Tok("nicht") if neg else None
    de_lex = de_nonfin if de_nonfin is not None else fin
    # ---- links
    _link(links, en_lex, de_lex)
    if tense == "past" and not lexical_finite and not do_support:
        _link(links, en_lex, fin)                      # saw -> hat (+ gesehen)
    for t in en_aux:
        _link(links, t, fin)                           # does/has/will/can -> sieht/hat/wird/kann
    if tense in ("want", "wanted", "had_to") and not en_aux:
        _link(links, en_main[1 if neg else 0], fin)    # wants -> will; had -> musste
    if tense in ("want", "wanted") and en_aux:
        _link(links, next(t for t in en_main if t.text == "want"), fin)
    _link(links, en_not, de_neg)
    if en_aux and en_aux[0].text == "cannot":
        _link(links, en_aux[0], de_neg)
    if en_part is not None:
        _link(links, en_part, de_part if de_part is not None else de_lex)
    if en_prep is not None and not verb.de_prep:
        _link(links, en_prep, de_part if de_part is not None else de_lex)
    if de_part is not None and en_part is None and (en_prep is None or verb.de_prep):
        _link(links, en_lex, de_part)                  # calls -> ruft ... an
    return VerbGroup(en_aux, en_main, en_part, en_prep, fin, de_nonfin, de_part, de_neg)


# ------------------------------------------------------------------ clauses


@dataclass(frozen=True)
class Clause:
    """One clause before word order is decided.

    ``obj``: the accusative, dative or prepositional object (the recipient for dat_acc,
    the theme for put); ``obj2``: the theme of dat_acc; ``pp``: goal, source, place or
    other adjunct; ``pred``: a predicate adjective (copula); ``time``: index into TIMES;
    ``comp``: the clause of a that-verb; ``to_dative``: English "gives the book to her".
    """

    subj: NP
    verb: Verb
    tense: str = "pres"
    neg: bool = False
    obj: NP | None = None
    obj2: NP | None = None
    pp: PP | None = None
    pred: Adjective | None = None
    time: int | None = None
    time_front: bool = False
    comp: "Clause | None" = None
    to_dative: bool = False


#: Where the clause's words go: decl (main clause, verb second), ynq (yes/no question),
#: v1 (main clause after a fronted subordinate clause), sub (verb final), and wh/rel
#: (a fronted wh-word or relative pronoun fills the role named by ``gap``).
MODES = ("decl", "ynq", "v1", "sub", "wh", "rel")


def _object_case(verb: Verb, which: str) -> str:
    if verb.frame == "dat" or (verb.frame == "dat_acc" and which == "obj"):
        return "dat"
    if verb.frame == "pobj":
        return verb.pcase
    return "acc"


def realize_clause(c: Clause, mode: str, links: Links, gap: str = "",
                   front: tuple[list[Tok], list[Tok]] | None = None) -> tuple[list[Tok], list[Tok]]:
    """Order one clause's words for English and German.

    ``gap`` (subj, obj, obj2, pp) names the role replaced by ``front`` (wh-word or relative
    pronoun), which both languages put first.  Conjunctions and punctuation are the
    caller's.
    """
    assert mode in MODES
    idx = agreement_index(c.subj.person, c.subj.is_plural)
    invert = mode == "ynq" or (mode == "wh" and gap != "subj")
    vg = verb_group(c.verb, c.tense, c.neg, idx, invert, mode in ("sub", "rel"), links)
    subj_en, subj_de = ([], []) if gap == "subj" else realize_np(c.subj, "nom", links)

    # objects: (English tokens, German tokens, is_pronoun, German case)
    objs: dict[str, tuple[list[Tok], list[Tok], bool, str]] = {}
    for role in ("obj", "obj2"):
        np = getattr(c, role)
        if np is None or gap == role:
            continue
        case = _object_case(c.verb, role)
        e, d = realize_np(np, case, links)
        objs[role] = (e, d, np.is_pronoun, case)
    pobj_de: list[Tok] = []
    if c.verb.frame == "pobj" and "obj" in objs:   # German preposition of the object
        p = Tok(c.verb.de_prep)
        _link(links, vg.prep, p)
        assert c.obj is not None
        pobj_de = _contract(p, objs["obj"][1], c.obj, links)
    pp_en, pp_de = ([], []) if (c.pp is None or gap == "pp") else realize_pp(c.pp, links)
    pred_en: list[Tok] = []
    pred_de: list[Tok] = []
    if c.pred is not None:
        pred_en, pred_de = [Tok(c.pred.en)], [Tok(c.pred.de)]
        _link(links, pred_en, pred_de)
    time_en: list[Tok] = []
    time_de: list[Tok] = []
    if c.time is not None:
        words_en, words_de, pairs, _ = TIMES[c.time]
        time_en, time_de = [Tok(w) for w in words_en], [Tok(w) for w in words_de]
        for i, j in pairs:
            _link(links, time_en[i], time_de[j])
    comp_en: list[Tok] = []
    comp_de: list[Tok] = []
    if c.comp is not None:
        that, dass = Tok("that"), Tok("dass")
        _link(links, that, dass)
        ce, cd = realize_clause(c.comp, "sub", links)
        comp_en, comp_de = [that] + ce, [Tok(","), dass] + cd

    # ---------------- German
    pron_objs = [objs[r][1] for r in sorted(objs, key=lambda r: objs[r][3] != "acc") if objs[r][2]]
    noun_objs = [objs[r][1] for r in sorted(objs, key=lambda r: objs[r][3] != "dat") if not objs[r][2]]
    if c.verb.frame == "pobj":
        pron_objs, noun_objs = [], []
    front_de = front[1] if front else []
    time_in_middle = [] if (c.time_front and mode == "decl") else time_de
    middle: list[Tok] = []
    subject_first = mode == "decl" and not c.time_front
    if not subject_first:
        middle += subj_de
    for part in pron_objs:
        middle += part
    middle += time_in_middle
    for part in noun_objs:
        middle += part
    if vg.neg is not None:
        middle.append(vg.neg)
    middle += pobj_de + pp_de + pred_de
    if mode in ("sub", "rel"):
        final = ([vg.nonfin] if vg.nonfin else []) + [vg.fin]
        de = front_de + middle + final
    else:
        bracket = [t for t in (vg.de_part, vg.nonfin) if t is not None]
        if mode == "decl":
            vorfeld = time_de if c.time_front else subj_de
        else:
            vorfeld = front_de          # ynq/v1: empty; wh: the wh-word
        de = vorfeld + [vg.fin] + middle + bracket
    de += comp_de

    # ---------------- English
    tail: list[Tok] = []
    fr = c.verb.frame
    if fr in ("acc", "dat", "pobj", "put"):
        obj_en = objs["obj"][0] if "obj" in objs else []
        obj_is_pron = "obj" in objs and objs["obj"][2]
        late_part = vg.part is not None and (obj_is_pron or not obj_en)
        if vg.part is not None and not late_part:
            tail.append(vg.part)
        if vg.prep is not None:
            tail.append(vg.prep)
        tail += obj_en
        if late_part:
            tail.append(vg.part)    # type: ignore[arg-type]
    elif fr == "dat_acc":
        rec = objs["obj"][0] if "obj" in objs else []
        theme = objs["obj2"][0] if "obj2" in objs else []
        if c.to_dative and rec:
            tail += theme + [Tok("to")] + rec
        else:
            tail += rec + theme
    elif vg.part is not None:
        tail.append(vg.part)
    tail += pp_en + pred_en + comp_en
    front_en = front[0] if front else []
    if mode in ("decl", "v1", "sub"):
        en = (time_en if c.time_front else []) + subj_en + vg.aux + vg.main + tail
    elif mode == "ynq":
        en = vg.aux + subj_en + vg.main + tail
    elif mode == "wh":
        en = front_en + vg.aux + subj_en + vg.main + tail
    else:  # rel
        en = front_en + subj_en + vg.aux + vg.main + tail
    if not c.time_front or mode != "decl":
        en += time_en
    return en, de


def relative_pronoun(antecedent: NP, case: str, links: Links) -> tuple[list[Tok], list[Tok]]:
    """who/that <-> der/die/das/den/dem/denen, agreeing in gender and number, case by role."""
    en = Tok("who" if "person" in antecedent.labels else "that")
    de = Tok(_REL[case]["pl" if antecedent.is_plural else antecedent.gender])
    _link(links, en, de)
    return [en], [de]


# ------------------------------------------------------------------ the random grammar

#: Relative weights of the sentence kinds.
KINDS: dict[str, float] = {
    "simple": 0.52, "question": 0.08, "wh": 0.07, "subordinate": 0.14, "that": 0.07, "relative": 0.07,
    "copula": 0.05,
}
_FRAMES = (("acc", 0.34), ("intr", 0.11), ("dat", 0.08), ("dat_acc", 0.1), ("pobj", 0.09),
           ("motion", 0.1), ("put", 0.05), ("copula", 0.13))
_TENSE_WEIGHTS = (("pres", 0.42), ("past", 0.15), ("perf", 0.14), ("fut", 0.09), ("can", 0.07),
                  ("could", 0.03), ("must", 0.04), ("had_to", 0.02), ("want", 0.03), ("wanted", 0.01))
_TIME_TENSE = {"pres": "pres", "past": "past", "perf": "perf", "fut": "fut", "can": "modal", "must": "modal",
               "want": "modal", "could": "past", "had_to": "past", "wanted": "past"}
_NO_DET_VERBS = ("have", "need", "see", "find", "buy")
_FOR_VERBS = ("buy", "cook", "paint", "draw", "write", "build", "repair")
_PP_DETS = ("def", "indef", "poss", "this")
_LOC_NOUNS = tuple(n for n in NOUNS if n.loc)
_GENERIC_LOC = ((("behind",), "hinter"), (("in", "front", "of"), "vor"), (("next", "to"), "neben"))
_GENERIC_LOC_NOUNS = ("building", "vehicle", "table", "bed", "chair", "sofa", "window", "door", "tree", "box")
#: Tenses that go together in a complex sentence (so "before" clauses don't jump in time).
_PAST_SPHERE = ("past", "perf", "could", "had_to", "wanted")
_NOW_SPHERE = ("pres", "perf", "fut", "can", "must", "want")


def _weighted(rng: random.Random, items: Sequence[tuple[str, float]]) -> str:
    r = rng.random() * sum(w for _, w in items)
    for name, w in items:
        r -= w
        if r < 0:
            return name
    return items[-1][0]


def _fits(labels: Sequence[str], accepted: Sequence[str]) -> bool:
    return any(lab in accepted for lab in labels)


@functools.lru_cache(maxsize=None)
def _nouns_for(accepted: tuple[str, ...]) -> tuple[Noun, ...]:
    """Nouns that fit ``accepted``, in lexicon order (cached: the filter is the hot spot)."""
    return tuple(n for n in NOUNS if _fits(n.labels, accepted))


@functools.lru_cache(maxsize=None)
def _adjectives_for(noun: Noun) -> tuple[Adjective, ...]:
    return tuple(a for a in ADJECTIVES if _fits(noun.labels, a.applies))


class Grammar:
    """Draws random clauses and sentences; all randomness comes from ``rng``."""

    def __init__(self, rng: random.Random, names: Sequence[str], new_names: Sequence[str] = (),
                 new_name_rate: float = 0.0) -> None:
        self.rng = rng
        self.names = tuple(names)
        self.new_names = tuple(new_names)
        self.new_name_rate = new_name_rate

    # ---------------------------------------------------------------- noun phrases
    def name(self) -> str:
        if self.new_names and self.rng.random() < self.new_name_rate:
            return self.rng.choice(self.new_names)
        return self.rng.choice(self.names)

    def np(self, accepted: Sequence[str], role: str, allow_pron: bool = True, avoid: NP | None = None,
           nominal: bool = False, dets: Sequence[str] | None = None) -> NP:
        """A random NP whose labels fit ``accepted``; role is subj, obj or pp."""
        rng = self.rng
        human = "person" in accepted
        nominal = nominal or role == "no"
        r = rng.random()
        if human and not nominal:
            if allow_pron and r < (0.22 if role == "subj" else 0.12):
                choices = [i for i in range(len(PRONOUNS))
                           if avoid is None or avoid.kind != "pron" or PRONOUNS[i][0] != avoid.person
                           or PRONOUNS[i][0] == 3]
                return NP("pron", pron=rng.choice(choices))
            if r < 0.45 and self.names:
                return NP("name", name=self.name())
            if role == "subj" and r < 0.5:
                return NP("coord", parts=(self.np(("person",), "pp", nominal=True, dets=("def", "poss")),
                                          NP("name", name=self.name())))
        nouns = [n for n in _nouns_for(tuple(accepted))
                 if not (avoid is not None and avoid.kind == "noun" and avoid.noun == n)]
        return self.noun_np(rng.choice(nouns), role, dets)

    def noun_np(self, noun: Noun, role: str, dets: Sequence[str] | None = None) -> NP:
        """Determiner, number and maybe an adjective for ``noun``; role "no" asks for no/kein."""
        rng = self.rng
        plural = not noun.mass and rng.random() < 0.25
        weights = {"def": 0.5, "indef": 0.2, "poss": 0.12, "this": 0.05, "every": 0.02, "num": 0.06,
                   "many": 0.03, "some": 0.03, "bare": 0.06, "no": 0.04}
        allowed = dets or tuple(weights)
        options = []
        for det in allowed:
            if det in ("indef", "every") and (plural or noun.mass):
                continue
            if det in ("num", "many", "some") and not plural:
                continue
            if det == "bare" and not (plural or noun.mass):
                continue
            if det == "every" and role != "subj":
                continue
            if det == "no" and role != "no":
                continue
            options.append((det, weights.get(det, 0.1)))
        if not options:
            options = [("def", 1.0)]
        det = _weighted(rng, options)
        which = rng.randrange(len(POSSESSIVES)) if det == "poss" else rng.randrange(len(NUMBERS))
        adj = None
        if rng.random() < 0.3:
            adjs = _adjectives_for(noun)
            adj = rng.choice(adjs) if adjs else None
        return NP("noun", noun=noun, plural=plural, det=det, which=which, adj=adj)

    def place_pp(self) -> PP:
        """A location in the dative: "in the garden" -> "im Garten", "at the station" -> "am Bahnhof"."""
        rng = self.rng
        noun = rng.choice(_LOC_NOUNS)
        if rng.random() < 0.15 and _fits(noun.labels, _GENERIC_LOC_NOUNS):
            en, de = rng.choice(_GENERIC_LOC)
        else:
            en_w, de = rng.choice(noun.loc)
            en = tuple(en_w.split())
        return PP(en, de, "dat", self.noun_np(noun, "pp", _PP_DETS))

    # ---------------------------------------------------------------- clauses
    def clause(self, frame: str | None = None, tense: str | None = None, allow_neg: bool = True,
               verb: Verb | None = None, subj: NP | None = None, adjuncts: bool = True) -> Clause:
        rng = self.rng
        frame = frame or (verb.frame if verb else _weighted(rng, _FRAMES))
        if verb is None:
            verb = BE if frame == "copula" else rng.choice([v for v in VERBS if v.frame == frame])
        tense = tense or _weighted(rng, _TENSE_WEIGHTS)
        subj_labels = verb.subj if frame != "copula" else ("person", "animal", "thing", "food", "drink",
                                                           "furniture", "place", "vehicle")
        subj = subj or self.np(subj_labels, "subj")
        if tense in ("want", "wanted") and not _fits(subj.labels, ("person", "animal")):
            tense = "pres"   # only the living want things
        obj = obj2 = None
        pp = None
        pred = None
        to_dative = False
        if frame in ("acc", "dat", "pobj"):
            role = "no" if (frame == "acc" and verb.en[0] in _NO_DET_VERBS and rng.random() < 0.08) else "obj"
            obj = self.np(verb.obj, role, avoid=subj, dets=("no",) if role == "no" else None)
        elif frame == "dat_acc":
            obj = self.np(verb.obj, "obj", avoid=subj)
            obj2 = self.np(verb.obj2, "obj", allow_pron=False)
            to_dative = rng.random() < 0.35
        elif frame == "put":
            obj = self.np(verb.obj, "obj", allow_pron=False)
            pp = self.goal(verb, dest=verb.obj2)
        elif frame == "motion":
            if rng.random() < 0.75:
                pp = self.goal(verb)
        elif frame == "copula":
            if rng.random() < 0.5 and _fits(subj.labels, ("person", "animal", "thing", "vehicle")):
                pp = self.place_pp()
            else:
                adjs = [a for a in ADJECTIVES if _fits(subj.labels, a.applies)]
                pred = rng.choice(adjs)
        if adjuncts and pp is None and frame in ("intr", "acc", "dat") and rng.random() < 0.3:
            pp = self.adjunct(verb, subj)
        neg = allow_neg and rng.random() < 0.12 and tense not in ("must", "had_to")
        if neg and any(n is not None and n.kind == "noun" and n.det not in ("def", "poss", "this")
                       for n in (obj, obj2, subj)):
            neg = False
        if neg and pp is not None and frame in ("intr", "acc", "dat"):
            neg = False
        return Clause(subj, verb, tense, neg, obj, obj2, pp, pred, to_dative=to_dative)

    def adjunct(self, verb: Verb, subj: NP) -> PP:
        rng = self.rng
        r = rng.random()
        if r < 0.5:
            return self.place_pp()
        if r < 0.8:
            return PP(("with",), "mit", "dat", self.np(("person", "animal"), "pp", avoid=subj, allow_pron=False))
        if verb.en[0] in _FOR_VERBS and r < 0.92:
            return PP(("for",), "für", "acc", self.np(("person",), "pp", avoid=subj))
        return PP(("without",), "ohne", "acc", self.np(("person", "animal"), "pp", avoid=subj, allow_pron=False))

    def goal(self, verb: Verb, dest: Sequence[str] = ()) -> PP:
        """Where something moves: into/onto/to (motion) or in/on/under (put), accusative."""
        rng = self.rng
        kind = rng.choice(verb.goals)
        if kind == "to":
            if rng.random() < 0.35:
                np = self.np(("person",), "pp", allow_pron=False)
            else:
                np = self.np(("place", "vehicle", "furniture"), "pp", nominal=True, dets=_PP_DETS)
            return PP(("to",), "zu", "dat", np)
        en_key = {"into": "in", "onto": "on"}.get(kind, kind)
        classes = dest or ("place", "vehicle", "furniture")
        nouns = [n for n in NOUNS if _fits(n.labels, classes) and any(e == en_key for e, _ in n.loc)]
        noun = rng.choice(nouns)
        de = next(d for e, d in noun.loc if e == en_key)
        return PP((kind,), de, "acc", self.noun_np(noun, "pp", _PP_DETS))

    def source(self, verb: Verb) -> PP:
        rng = self.rng
        np = self.np(("place", "vehicle"), "pp", nominal=True, dets=_PP_DETS)
        assert np.noun is not None
        if any(e == "in" for e, _ in np.noun.loc) and rng.random() < 0.5:
            return PP(("out", "of"), "aus", "dat", np)
        return PP(("from",), "von", "dat", np)

    # ---------------------------------------------------------------- sentences
    def sentence(self, kind: str) -> Example:
        return getattr(self, "_s_" + kind)()

    def _time(self, c: Clause, p: float = 0.25) -> Clause:
        rng = self.rng
        if rng.random() >= p:
            return c
        options = [i for i, t in enumerate(TIMES) if _TIME_TENSE[c.tense] in t[3]]
        if not options:
            return c
        return replace(c, time=rng.choice(options), time_front=rng.random() < 0.5)

    def _end(self, en: list[Tok], de: list[Tok], links: Links, mark: str = ".") -> Example:
        p_en, p_de = Tok(mark), Tok(mark)
        _link(links, p_en, p_de)
        return _finish(en + [p_en], de + [p_de], links)

    def _s_simple(self) -> Example:
        rng = self.rng
        c = self.clause()
        if c.verb.frame == "motion" and c.pp is None and c.verb.source and rng.random() < 0.5:
            c = replace(c, pp=self.source(c.verb))
        c = self._time(c)
        links: Links = []
        return self._end(*realize_clause(c, "decl", links), links)

    def _s_copula(self) -> Example:
        c = self._time(self.clause("copula"))
        links: Links = []
        return self._end(*realize_clause(c, "decl", links), links)

    def _s_question(self) -> Example:
        tense = _weighted(self.rng, [t for t in _TENSE_WEIGHTS if t[0] not in ("must", "had_to")])
        c = self._time(self.clause(tense=tense, allow_neg=False), 0.15)
        c = replace(c, time_front=False)
        links: Links = []
        return self._end(*realize_clause(c, "ynq", links), links, "?")

    def _s_wh(self) -> Example:
        rng = self.rng
        tense = _weighted(rng, [t for t in _TENSE_WEIGHTS if t[0] not in ("must", "had_to")])
        links: Links = []
        r = rng.random()
        if r < 0.3:       # who sees the dog ?
            frame = _weighted(rng, [f for f in _FRAMES if f[0] not in ("copula",)])
            verbs = [v for v in VERBS if v.frame == frame and "person" in v.subj]
            c = self.clause(verb=rng.choice(verbs), tense=tense, allow_neg=False,
                            subj=NP("name", name="?"))
            en, de = Tok("who"), Tok("wer")
            gap = "subj"
        elif r < 0.75:    # who/what does the man see/help ?
            verbs = [v for v in VERBS if v.frame in ("acc", "dat", "dat_acc") and not v.en_part]
            verb = rng.choice(verbs)
            c = self.clause(verb=verb, tense=tense, allow_neg=False, adjuncts=False)
            gap = "obj2" if verb.frame == "dat_acc" else "obj"
            target = getattr(c, gap)
            assert target is not None
            case = _object_case(verb, gap)
            if "person" in target.labels:
                en, de = Tok("who"), Tok({"acc": "wen", "dat": "wem"}[case])
            else:
                en, de = Tok("what"), Tok("was")
            c = replace(c, to_dative=False)
        else:             # where is the dog ? / where does the man sleep ?
            verb = rng.choice([BE] + [v for v in VERBS if v.frame == "intr"])
            c = self.clause(verb=verb, tense=tense, allow_neg=False, adjuncts=False)
            c = replace(c, pp=None, pred=None)
            en, de = Tok("where"), Tok("wo")
            gap = "pp"
        _link(links, en, de)
        words = realize_clause(c, "wh", links, gap=gap, front=([en], [de]))
        return self._end(*words, links, "?")

    def _s_subordinate(self) -> Example:
        rng = self.rng
        conj_en, conj_de = rng.choice(CONJUNCTIONS)
        non_past = ("pres", "fut", "can", "must", "want")
        if conj_de == "wenn":
            main = self.clause(tense=_weighted(rng, [t for t in _TENSE_WEIGHTS if t[0] in non_past]))
            sub = self.clause(tense=_weighted(rng, [t for t in _TENSE_WEIGHTS if t[0] in ("pres", "can")]))
        else:
            main = self.clause()
            sphere = _PAST_SPHERE if main.tense in _PAST_SPHERE else _NOW_SPHERE
            sub = self.clause(tense=_weighted(rng, [t for t in _TENSE_WEIGHTS if t[0] in sphere]))
        links: Links = []
        c_en, c_de = Tok(conj_en), Tok(conj_de)
        _link(links, c_en, c_de)
        s_en, s_de = realize_clause(sub, "sub", links)
        if rng.random() < 0.35:   # When the dog sleeps , the cat plays .
            m_en, m_de = realize_clause(main, "v1", links)
            comma_en, comma_de = Tok(","), Tok(",")
            _link(links, comma_en, comma_de)
            return self._end([c_en] + s_en + [comma_en] + m_en, [c_de] + s_de + [comma_de] + m_de, links)
        m_en, m_de = realize_clause(main, "decl", links)
        return self._end(m_en + [c_en] + s_en, m_de + [Tok(","), c_de] + s_de, links)

    def _s_that(self) -> Example:
        rng = self.rng
        verb = rng.choice([v for v in VERBS if v.frame == "that"])
        tense = _weighted(rng, [t for t in _TENSE_WEIGHTS if t[0] in ("pres", "perf", "fut")])
        comp = self.clause()
        c = replace(self.clause(verb=verb, tense=tense, allow_neg=False), comp=comp)
        links: Links = []
        return self._end(*realize_clause(c, "decl", links), links)

    def _s_relative(self) -> Example:
        rng = self.rng
        verbs = [v for v in VERBS if v.frame in ("acc", "dat", "dat_acc", "pobj")]
        main = self.clause(verb=rng.choice(verbs), allow_neg=False, adjuncts=False)
        ante_role = "obj"
        if main.verb.frame == "dat_acc" and not main.to_dative:
            ante_role = "obj2"
        ante = getattr(main, ante_role)
        assert ante is not None
        if ante.kind != "noun" or ante.det not in _PP_DETS:
            accepted = main.verb.obj2 if ante_role == "obj2" else main.verb.obj
            ante = self.np(accepted, "obj", nominal=True, dets=_PP_DETS)
            main = replace(main, **{ante_role: ante})
        main = self._time(main, 0.1)
        main = replace(main, time_front=main.time is not None)
        # the relative clause: the antecedent is its subject or object
        if rng.random() < 0.55:
            verbs = [v for v in VERBS if v.frame in ("intr", "acc", "dat", "pobj") and _fits(ante.labels, v.subj)]
            rel = self.clause(verb=rng.choice(verbs + [BE]), subj=ante, adjuncts=False,
                              tense=rng.choice(("pres", "pres", "perf", "past")))
            gap, case = "subj", "nom"
        else:
            verbs = [v for v in VERBS if v.frame in ("acc", "dat", "dat_acc") and _fits(ante.labels,
                     v.obj2 if v.frame == "dat_acc" else v.obj)]
            verb = rng.choice(verbs)  # never empty: the antecedent is an object of the main verb
            rel = self.clause(verb=verb, tense=rng.choice(("pres", "pres", "perf", "past")), adjuncts=False)
            gap = "obj2" if verb.frame == "dat_acc" else "obj"
            rel = replace(rel, to_dative=False, **{gap: ante})
            case = _object_case(verb, gap)
        links: Links = []
        m_en, m_de = realize_clause(main, "decl", links)
        front = relative_pronoun(ante, case, links)
        r_en, r_de = realize_clause(rel, "rel", links, gap=gap, front=front)
        return self._end(m_en + r_en, m_de + [Tok(",")] + r_de, links)


# ------------------------------------------------------------------ public API

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
        ex = grammar.sentence(_weighted(rng, weights))
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


def generate_corpus(out_dir: str | Path, seed: int = 1, n_train: int = 20000, n_valid: int = 500,
                    n_test: int = 500) -> dict[str, int]:
    """Write ``{train,valid,test}.{en,de,align}`` under ``out_dir``; return lines per split.

    Valid and test use names never seen in training (most of their names) and never
    repeat an English sentence of train (or of each other).
    """
    for what, n in (("train", n_train), ("valid", n_valid), ("test", n_test)):
        if n < 1:
            raise NmtkitError(f"--{what} must be at least 1, got {n}")
    train_names, valid_names, test_names = split_names(seed)
    out = Path(out_dir)
    seen: set[str] = set()
    counts: dict[str, int] = {}
    plan = (("train", n_train, ()), ("valid", n_valid, valid_names), ("test", n_test, test_names))
    for split, n, new_names in plan:
        rng = random.Random(f"nmtkit-sample:{seed}:{split}")
        stream = iter_pairs(rng, train_names, new_names, NEW_NAME_RATE if new_names else 0.0)
        rows: list[Example] = []
        tries = 0
        while len(rows) < n:
            ex = next(stream)
            tries += 1
            key = " ".join(ex.en)
            if split != "train":
                if key in seen:
                    if tries > 50 * n + 1000:
                        raise NmtkitError(f"could not draw {n} distinct {split} sentences")
                    continue
            seen.add(key)
            rows.append(ex)
        with atomic_write(out / f"{split}.en") as f_en, atomic_write(out / f"{split}.de") as f_de, \
                atomic_write(out / f"{split}.align") as f_al:
            for ex in rows:
                f_en.write(" ".join(ex.en) + "\n")
                f_de.write(" ".join(ex.de) + "\n")
                f_al.write(format_links(ex.links) + "\n")
        counts[split] = len(rows)
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
