"""The random grammar of the sample corpus: which sentences are drawn, with which weights.

:class:`Grammar` picks verbs, frames, tenses and noun phrases that fit each other
(selection labels from :mod:`nmtkit.sample.lexicon`) and builds whole sentences of the kinds
in :data:`KINDS`.  All randomness comes from one seeded ``random.Random``: the order of every
draw is part of the output, so changing it changes the corpus.
"""
from __future__ import annotations

import functools
import random
from dataclasses import replace
from typing import Sequence

from nmtkit.sample.clauses import Clause, object_case, realize_clause, relative_pronoun
from nmtkit.sample.lexicon import (
    ADJECTIVES, BE, CONJUNCTIONS, NOUNS, NUMBERS, POSSESSIVES, PRONOUNS, TIMES, VERBS, Adjective, Noun, Verb,
)
from nmtkit.sample.phrases import NP, PP
from nmtkit.sample.tokens import Example, Links, Tok, finish_example, link


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


def weighted_choice(rng: random.Random, items: Sequence[tuple[str, float]]) -> str:
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
        det = weighted_choice(rng, options)
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
        frame = frame or (verb.frame if verb else weighted_choice(rng, _FRAMES))
        if verb is None:
            verb = BE if frame == "copula" else rng.choice([v for v in VERBS if v.frame == frame])
        tense = tense or weighted_choice(rng, _TENSE_WEIGHTS)
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
        link(links, p_en, p_de)
        return finish_example(en + [p_en], de + [p_de], links)

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
        tense = weighted_choice(self.rng, [t for t in _TENSE_WEIGHTS if t[0] not in ("must", "had_to")])
        c = self._time(self.clause(tense=tense, allow_neg=False), 0.15)
        c = replace(c, time_front=False)
        links: Links = []
        return self._end(*realize_clause(c, "ynq", links), links, "?")

    def _s_wh(self) -> Example:
        rng = self.rng
        tense = weighted_choice(rng, [t for t in _TENSE_WEIGHTS if t[0] not in ("must", "had_to")])
        links: Links = []
        r = rng.random()
        if r < 0.3:       # who sees the dog ?
            frame = weighted_choice(rng, [f for f in _FRAMES if f[0] not in ("copula",)])
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
            case = object_case(verb, gap)
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
        link(links, en, de)
        words = realize_clause(c, "wh", links, gap=gap, front=([en], [de]))
        return self._end(*words, links, "?")

    def _s_subordinate(self) -> Example:
        rng = self.rng
        conj_en, conj_de = rng.choice(CONJUNCTIONS)
        non_past = ("pres", "fut", "can", "must", "want")
        if conj_de == "wenn":
            main = self.clause(tense=weighted_choice(rng, [t for t in _TENSE_WEIGHTS if t[0] in non_past]))
            sub = self.clause(tense=weighted_choice(rng, [t for t in _TENSE_WEIGHTS if t[0] in ("pres", "can")]))
        else:
            main = self.clause()
            sphere = _PAST_SPHERE if main.tense in _PAST_SPHERE else _NOW_SPHERE
            sub = self.clause(tense=weighted_choice(rng, [t for t in _TENSE_WEIGHTS if t[0] in sphere]))
        links: Links = []
        c_en, c_de = Tok(conj_en), Tok(conj_de)
        link(links, c_en, c_de)
        s_en, s_de = realize_clause(sub, "sub", links)
        if rng.random() < 0.35:   # When the dog sleeps , the cat plays .
            m_en, m_de = realize_clause(main, "v1", links)
            comma_en, comma_de = Tok(","), Tok(",")
            link(links, comma_en, comma_de)
            return self._end([c_en] + s_en + [comma_en] + m_en, [c_de] + s_de + [comma_de] + m_de, links)
        m_en, m_de = realize_clause(main, "decl", links)
        return self._end(m_en + [c_en] + s_en, m_de + [Tok(","), c_de] + s_de, links)

    def _s_that(self) -> Example:
        rng = self.rng
        verb = rng.choice([v for v in VERBS if v.frame == "that"])
        tense = weighted_choice(rng, [t for t in _TENSE_WEIGHTS if t[0] in ("pres", "perf", "fut")])
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
            case = object_case(verb, gap)
        links: Links = []
        m_en, m_de = realize_clause(main, "decl", links)
        front = relative_pronoun(ante, case, links)
        r_en, r_de = realize_clause(rel, "rel", links, gap=gap, front=front)
        return self._end(m_en + r_en, m_de + [Tok(",")] + r_de, links)
