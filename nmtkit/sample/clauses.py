"""Verb groups and clauses: tense, negation and German word order.

:func:`verb_group` makes the verb's words on both sides (do-support, auxiliaries, separable
prefixes, participles); :func:`realize_clause` places them with the subject and objects for
each clause mode: verb second (declarative), verb first (questions), verb last (subordinate
and relative clauses).
"""
from __future__ import annotations

from dataclasses import dataclass

from nmtkit.sample.lexicon import TIMES, Adjective, Verb
from nmtkit.sample.morphology import (
    HABEN, MODALS, MODAL_PRET, PRET_END, REL, SEIN, WAR, WERDEN, agreement_index, present_forms,
)
from nmtkit.sample.phrases import NP, PP, contract, realize_np, realize_pp
from nmtkit.sample.tokens import Links, Tok, link


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


# Long on purpose: one branch per tense (x negation, question, subordinate clause), each reads as
# the pattern it produces; split into helpers, the patterns would be harder to check against German.
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
        fin_forms = WAR if copula else tuple("hatte" + e for e in PRET_END)
        lexical_finite = True
    elif tense in ("past", "perf"):
        fin_forms, nonfin = (SEIN if verb.sein else HABEN), verb.pp
    elif tense == "fut":
        fin_forms, nonfin = WERDEN, verb.de
    elif tense in MODALS:
        fin_forms, nonfin = MODALS[tense], verb.de
    else:
        fin_forms, nonfin = tuple(MODAL_PRET[tense] + e for e in PRET_END), verb.de
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
    link(links, en_lex, de_lex)
    if tense == "past" and not lexical_finite and not do_support:
        link(links, en_lex, fin)                      # saw -> hat (+ gesehen)
    for t in en_aux:
        link(links, t, fin)                           # does/has/will/can -> sieht/hat/wird/kann
    if tense in ("want", "wanted", "had_to") and not en_aux:
        link(links, en_main[1 if neg else 0], fin)    # wants -> will; had -> musste
    if tense in ("want", "wanted") and en_aux:
        link(links, next(t for t in en_main if t.text == "want"), fin)
    link(links, en_not, de_neg)
    if en_aux and en_aux[0].text == "cannot":
        link(links, en_aux[0], de_neg)
    if en_part is not None:
        link(links, en_part, de_part if de_part is not None else de_lex)
    if en_prep is not None and not verb.de_prep:
        link(links, en_prep, de_part if de_part is not None else de_lex)
    if de_part is not None and en_part is None and (en_prep is None or verb.de_prep):
        link(links, en_lex, de_part)                  # calls -> ruft ... an
    return VerbGroup(en_aux, en_main, en_part, en_prep, fin, de_nonfin, de_part, de_neg)


# ------------------------------------------------------------------ clauses
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


def object_case(verb: Verb, which: str) -> str:
    if verb.frame == "dat" or (verb.frame == "dat_acc" and which == "obj"):
        return "dat"
    if verb.frame == "pobj":
        return verb.pcase
    return "acc"


# Long on purpose: the word order of every clause mode in one place, so the modes can be compared
# line by line (verb second, verb first, verb last).
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
        case = object_case(c.verb, role)
        e, d = realize_np(np, case, links)
        objs[role] = (e, d, np.is_pronoun, case)
    pobj_de: list[Tok] = []
    if c.verb.frame == "pobj" and "obj" in objs:   # German preposition of the object
        p = Tok(c.verb.de_prep)
        link(links, vg.prep, p)
        assert c.obj is not None
        pobj_de = contract(p, objs["obj"][1], c.obj, links)
    pp_en, pp_de = ([], []) if (c.pp is None or gap == "pp") else realize_pp(c.pp, links)
    pred_en: list[Tok] = []
    pred_de: list[Tok] = []
    if c.pred is not None:
        pred_en, pred_de = [Tok(c.pred.en)], [Tok(c.pred.de)]
        link(links, pred_en, pred_de)
    time_en: list[Tok] = []
    time_de: list[Tok] = []
    if c.time is not None:
        words_en, words_de, pairs, _ = TIMES[c.time]
        time_en, time_de = [Tok(w) for w in words_en], [Tok(w) for w in words_de]
        for i, j in pairs:
            link(links, time_en[i], time_de[j])
    comp_en: list[Tok] = []
    comp_de: list[Tok] = []
    if c.comp is not None:
        that, dass = Tok("that"), Tok("dass")
        link(links, that, dass)
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
    de = Tok(REL[case]["pl" if antecedent.is_plural else antecedent.gender])
    link(links, en, de)
    return [en], [de]
