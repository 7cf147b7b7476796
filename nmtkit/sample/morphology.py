"""German inflection for the sample corpus: articles, adjective endings, noun cases, verb forms.

Tables of endings by case (nom/acc/dat) and gender (m/f/n, ``pl`` for plural), and the
present-tense forms of regular and strong verbs (``agreement_index`` picks one of the six
person/number slots).  Kept apart from the phrase builders so the grammar of German forms
can be checked on its own.
"""
from __future__ import annotations

from nmtkit.sample.lexicon import NUMBERS, POSSESSIVES, Adjective, Noun, Verb


_DEF = {"nom": {"m": "der", "f": "die", "n": "das", "pl": "die"},
        "acc": {"m": "den", "f": "die", "n": "das", "pl": "die"},
        "dat": {"m": "dem", "f": "der", "n": "dem", "pl": "den"}}
REL = {"nom": _DEF["nom"], "acc": _DEF["acc"], "dat": {**_DEF["dat"], "pl": "denen"}}
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
CONTRACTIONS = {("in", "dem"): "im", ("in", "das"): "ins", ("an", "dem"): "am", ("an", "das"): "ans",
             ("zu", "dem"): "zum", ("zu", "der"): "zur", ("von", "dem"): "vom", ("bei", "dem"): "beim"}

SEIN = ("bin", "bist", "ist", "sind", "seid", "sind")
HABEN = ("habe", "hast", "hat", "haben", "habt", "haben")
WERDEN = ("werde", "wirst", "wird", "werden", "werdet", "werden")
WAR = ("war", "warst", "war", "waren", "wart", "waren")
MODALS = {  # English tense name -> German present or preterite forms
    "can": ("kann", "kannst", "kann", "können", "könnt", "können"),
    "must": ("muss", "musst", "muss", "müssen", "müsst", "müssen"),
    "want": ("will", "willst", "will", "wollen", "wollt", "wollen"),
}
PRET_END = ("", "st", "", "n", "t", "n")
MODAL_PRET = {"could": "konnte", "had_to": "musste", "wanted": "wollte"}


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
