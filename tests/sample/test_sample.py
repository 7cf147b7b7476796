"""The sample corpus generator: deterministic files, well-formed alignments, real German."""
from __future__ import annotations

import hashlib
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from nmtkit.cli.main import cli
from nmtkit import sample as S
from nmtkit.sample.clauses import Clause, realize_clause
from nmtkit.sample.grammar import Grammar
from nmtkit.sample.lexicon import ADJECTIVES, BE, NOUNS, VERBS, Adjective, Noun, Verb
from nmtkit.sample.morphology import HABEN, MODAL_PRET, MODALS, PRET_END, SEIN, WAR, WERDEN, present_forms
from nmtkit.sample.phrases import NP, PP, realize_np, realize_pp
from nmtkit.sample.tokens import Example, Links, Tok, finish_example

SPLITS = ("train", "valid", "test")
SUFFIXES = ("en", "de", "align")


def noun(en: str) -> Noun:
    return next(n for n in NOUNS if n.en == en)


def verb(key: str, frame: str | None = None) -> Verb:
    return next(v for v in VERBS if v.key == key and (frame is None or v.frame == frame))


def adj(en: str) -> Adjective:
    return next(a for a in ADJECTIVES if a.en == en)


def the(en: str, **kw) -> NP:
    return NP("noun", noun=noun(en), **kw)


def say(clause: Clause, mode: str = "decl", mark: str = ".") -> Example:
    """Realise one clause as a sentence, as the generator does."""
    links: Links = []
    en, de = realize_clause(clause, mode, links)
    p_en, p_de = Tok(mark), Tok(mark)
    links.append((p_en, p_de))
    return finish_example(en + [p_en], de + [p_de], links)


def linked(ex: Example) -> set[tuple[str, str]]:
    return {(ex.en[i], ex.de[j]) for i, j in ex.links}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sample") / "c"
    counts = S.generate_corpus(out, seed=7, n_train=300, n_valid=60, n_test=200)
    assert counts == {"train": 300, "valid": 60, "test": 200}
    return out


def read(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return text[:-1].split("\n")


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


# ------------------------------------------------------------------ files


def test_same_seed_same_bytes_other_seed_other_text(tmp_path: Path, corpus: Path) -> None:
    S.generate_corpus(tmp_path / "again", seed=7, n_train=300, n_valid=60, n_test=200)
    assert digest(tmp_path / "again") == digest(corpus)
    S.generate_corpus(tmp_path / "other", seed=8, n_train=300, n_valid=60, n_test=200)
    assert read(tmp_path / "other" / "train.en") != read(corpus / "train.en")


#: sha256 over the file names and bytes of ``generate_corpus(seed=5, n_train=40, n_valid=10, n_test=10)``.
#: Any change to the grammar, the lexicon or the order of random draws changes it; update it
#: only on purpose (the README demo's numbers come from this generator).
PINNED_CORPUS_SHA256 = "79d4067db45b82a3e9ed65384292e3ebf98ba803ad37c187bd5ff5c20feb4fd2"


def test_small_corpus_is_pinned_byte_for_byte(tmp_path: Path) -> None:
    S.generate_corpus(tmp_path / "c", seed=5, n_train=40, n_valid=10, n_test=10)
    h = hashlib.sha256()
    for p in sorted((tmp_path / "c").iterdir()):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    assert h.hexdigest() == PINNED_CORPUS_SHA256


def test_output_does_not_depend_on_hash_seed(tmp_path: Path) -> None:
    """Set or dict order leaking into the output would show up under another PYTHONHASHSEED."""
    code = ("import sys; from nmtkit.sample import generate_corpus; "
            "generate_corpus(sys.argv[1], seed=3, n_train=80, n_valid=20, n_test=20)")
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run([sys.executable, "-c", code, str(tmp_path / hash_seed)], check=True, env=env)
    assert digest(tmp_path / "1") == digest(tmp_path / "2")


def test_files_are_parallel_and_tokenized(corpus: Path) -> None:
    assert sorted(p.name for p in corpus.iterdir()) == sorted(f"{s}.{x}" for s in SPLITS for x in SUFFIXES)
    for split in SPLITS:
        en, de, al = (read(corpus / f"{split}.{x}") for x in SUFFIXES)
        assert len(en) == len(de) == len(al)
        for line in en + de:
            assert line and line == line.strip() and "  " not in line and "\t" not in line
            assert line.split()[-1] in (".", "?")
            assert S.MIN_LEN <= len(line.split()) <= S.MAX_LEN


def test_alignments_are_well_formed(corpus: Path) -> None:
    pattern = re.compile(r"^\d+-\d+( \d+-\d+)*$")
    for split in SPLITS:
        for en, de, al in zip(*(read(corpus / f"{split}.{x}") for x in SUFFIXES)):
            assert pattern.match(al), al
            links = [tuple(map(int, p.split("-"))) for p in al.split()]
            assert links == sorted(set(links))
            e, d = en.split(), de.split()
            assert all(0 <= i < len(e) and 0 <= j < len(d) for i, j in links)
            assert (len(e) - 1, len(d) - 1) in links           # final punctuation
            for i, j in links:
                assert (e[i] in ",.?") == (d[j] in ",.?"), (en, de, e[i], d[j])
                if e[i] in S.NAMES or d[j] in S.NAMES:
                    assert e[i] == d[j]
            # only words without a counterpart stay unaligned
            assert {e[i] for i in range(len(e)) if all(a != i for a, _ in links)} <= {"to"}
            assert {d[j] for j in range(len(d)) if all(b != j for _, b in links)} <= {","}


def test_case_follows_normal_orthography(corpus: Path) -> None:
    german_nouns = set(_gender_options())
    verb_forms = {w for v in VERBS for w in v.en}
    english_nouns = {w for n in NOUNS for w in (n.en, n.en_pl) if w and w not in verb_forms}
    for en, de, links in zip(*(read(corpus / f"train.{x}") for x in SUFFIXES)):
        e, d = en.split(), de.split()
        assert e[0][0].isupper() and d[0][0].isupper()
        for w in e[1:]:
            assert w.islower() or w in S.NAMES or w in ("I", "Monday", "Friday", "Sunday") or not w.isalpha(), en
        for w in d[1:]:
            assert w.islower() or not w.isalpha() or w in S.NAMES or w in german_nouns or \
                w in ("Abend", "Morgen", "Tag", "Woche", "Montag", "Freitag", "Sonntag"), de
        for i, j in (tuple(map(int, p.split("-"))) for p in links.split()):
            if e[i] in english_nouns:   # German nouns are capitalised wherever they stand
                assert d[j] in german_nouns, (en, de, e[i], d[j])


def test_held_out_names_in_test(corpus: Path) -> None:
    train_words = {w for line in read(corpus / "train.en") for w in line.split()}
    test = read(corpus / "test.en")
    unseen = [line for line in test if any(w in S.NAMES and w not in train_words for w in line.split())]
    assert 0.25 <= len(unseen) / len(test) <= 0.6
    train, valid, test_names = S.split_names(7)
    assert not set(train) & set(test_names) and not set(valid) & set(test_names) and len(S.NAMES) > 1000
    assert not set(read(corpus / "test.en")) & set(read(corpus / "train.en"))


# ------------------------------------------------------------------ grammar: exact sentences


@pytest.mark.parametrize("det,gender_noun,case,expected", [
    ("def", "dog", "nom", "der kleine Hund"), ("def", "dog", "acc", "den kleinen Hund"),
    ("def", "dog", "dat", "dem kleinen Hund"), ("def", "cat", "dat", "der kleinen Katze"),
    ("def", "child", "acc", "das kleine Kind"), ("indef", "dog", "nom", "ein kleiner Hund"),
    ("indef", "dog", "acc", "einen kleinen Hund"), ("indef", "child", "nom", "ein kleines Kind"),
    ("indef", "cat", "dat", "einer kleinen Katze"), ("this", "child", "dat", "diesem kleinen Kind"),
    ("poss", "child", "dat", "meinem kleinen Kind"), ("every", "cat", "nom", "jede kleine Katze"),
    ("this", "dog", "dat", "diesem kleinen Hund"), ("no", "dog", "acc", "keinen kleinen Hund"),
])
def test_adjective_endings_agree(det: str, gender_noun: str, case: str, expected: str) -> None:
    links: Links = []
    _, de = realize_np(the(gender_noun, det=det, adj=adj("small")), case, links)
    assert " ".join(t.text for t in de) == expected


@pytest.mark.parametrize("np,case,expected", [
    (dict(det="num", plural=True, which=0), "nom", "zwei kleine Hunde"),
    (dict(det="num", plural=True, which=0), "dat", "zwei kleinen Hunden"),
    (dict(det="no", plural=True), "acc", "keine kleinen Hunde"),
    (dict(det="def", plural=True), "dat", "den kleinen Hunden"),
])
def test_plural_noun_phrases(np: dict, case: str, expected: str) -> None:
    _, de = realize_np(the("dog", adj=adj("small"), **np), case, [])
    assert " ".join(t.text for t in de) == expected


def test_strong_endings_without_article_and_weak_nouns() -> None:
    links: Links = []
    _, de = realize_pp(PP(("with",), "mit", "dat", the("water", det="bare", adj=adj("cold"))), links)
    assert [t.text for t in de] == ["mit", "kaltem", "Wasser"]
    _, de = realize_pp(PP(("with",), "mit", "dat", the("coffee", det="bare", adj=adj("hot"))), links)
    assert [t.text for t in de] == ["mit", "heißem", "Kaffee"]
    _, de = realize_np(the("milk", det="bare", adj=adj("cold")), "acc", links)
    assert [t.text for t in de] == ["kalte", "Milch"]
    _, de = realize_np(the("boy"), "acc", links)
    assert [t.text for t in de] == ["den", "Jungen"]
    _, de = realize_np(the("teacher", adj=adj("tired")), "dat", links)
    assert [t.text for t in de] == ["dem", "müden", "Lehrer"]


def test_contraction_links_both_words() -> None:
    links: Links = []
    en, de = realize_pp(PP(("in",), "in", "dat", the("house", adj=adj("big"))), links)
    assert [t.text for t in de] == ["im", "großen", "Haus"]
    pairs = {(e.text, d.text) for e, d in links}
    assert ("in", "im") in pairs and ("the", "im") in pairs
    _, de = realize_pp(PP(("to",), "zu", "dat", the("school")), [])
    assert [t.text for t in de] == ["zur", "Schule"]
    _, de = realize_pp(PP(("into",), "in", "acc", the("house")), [])
    assert [t.text for t in de] == ["ins", "Haus"]


def test_separable_verb_and_verb_final_clause() -> None:
    c = Clause(the("woman"), verb("call"), obj=the("man"))
    ex = say(c)
    assert " ".join(ex.en) == "The woman calls the man ."
    assert " ".join(ex.de) == "Die Frau ruft den Mann an ."
    assert {("calls", "ruft"), ("calls", "an"), ("the", "den")} <= linked(ex)
    links: Links = []
    en, de = realize_clause(c, "sub", links)
    assert [t.text for t in de] == ["die", "Frau", "den", "Mann", "anruft"]
    perfect = say(Clause(the("woman"), verb("call"), "perf", obj=the("man")))
    assert " ".join(perfect.de) == "Die Frau hat den Mann angerufen ."
    assert {("has", "hat"), ("called", "angerufen")} <= linked(perfect)
    phrasal = say(Clause(the("woman"), verb("pick up"), obj=NP("pron", pron=2)))
    assert " ".join(phrasal.en) == "The woman picks him up ."
    assert " ".join(phrasal.de) == "Die Frau holt ihn ab ."
    assert {("picks", "holt"), ("up", "ab")} <= linked(phrasal)


def test_dative_recipient_and_word_order() -> None:
    give = verb("give")
    double = say(Clause(the("man"), give, obj=the("woman"), obj2=the("book")))
    to_form = say(Clause(the("man"), give, obj=the("woman"), obj2=the("book"), to_dative=True))
    assert " ".join(double.en) == "The man gives the woman the book ."
    assert " ".join(to_form.en) == "The man gives the book to the woman ."
    assert " ".join(double.de) == " ".join(to_form.de) == "Der Mann gibt der Frau das Buch ."
    pronouns = say(Clause(NP("pron", pron=0), verb("help"), "past", obj=NP("pron", pron=3)))
    assert " ".join(pronouns.de) == "Ich habe ihr geholfen ."
    assert {("helped", "habe"), ("helped", "geholfen"), ("her", "ihr")} <= linked(pronouns)


def test_verb_second_question_negation_and_agreement() -> None:
    see = verb("see")
    fronted = say(Clause(the("man"), see, obj=the("dog"), time=0, time_front=True))
    assert " ".join(fronted.en) == "Today the man sees the dog ."
    assert " ".join(fronted.de) == "Heute sieht der Mann den Hund ."
    question = say(Clause(NP("pron", pron=1), see, obj=the("dog")), "ynq", "?")
    assert " ".join(question.en) == "Do you see the dog ?"
    assert " ".join(question.de) == "Siehst du den Hund ?"
    assert {("Do", "Siehst"), ("see", "Siehst")} <= linked(question)
    negated = say(Clause(the("man", plural=True), see, "fut", neg=True, obj=the("dog")))
    assert " ".join(negated.de) == "Die Männer werden den Hund nicht sehen ."
    assert {("will", "werden"), ("not", "nicht"), ("see", "sehen")} <= linked(negated)
    expected = ["sehe", "siehst", "sieht", "sehen", "seht", "sehen"]
    assert list(present_forms(see)) == expected
    assert list(present_forms(verb("work"))) == ["arbeite", "arbeitest", "arbeitet", "arbeiten", "arbeitet",
                                                    "arbeiten"]
    assert list(present_forms(verb("invite"))) == ["lade", "lädst", "lädt", "laden", "ladet", "laden"]


# ------------------------------------------------------------------ grammar: corpus-wide

FINITE = {f for v in VERBS + (BE,) for f in present_forms(v)} | \
    {v.sep + f for v in VERBS if v.sep for f in present_forms(v)} | \
    {f for table in (SEIN, HABEN, WERDEN, WAR) for f in table} | \
    {f for table in MODALS.values() for f in table} | \
    {stem + e for stem in ("hatte",) + tuple(MODAL_PRET.values()) for e in PRET_END}
SUBORDINATORS = {"weil", "obwohl", "dass", "wenn", "während", "bevor"}
RELATIVE = {"der", "die", "das", "den", "dem", "denen"}


def german_clauses(line: str) -> list[list[str]]:
    return [seg.split() for seg in re.split(r" , | [.?]$", line) if seg.strip()]


@pytest.fixture(scope="module")
def pairs() -> list[Example]:
    stream = S.iter_pairs(random.Random(11), kinds=("subordinate", "that", "relative", "simple"))
    return [next(stream) for _ in range(600)]


def test_subordinate_and_relative_clauses_end_with_the_finite_verb(pairs: list[Example]) -> None:
    checked = 0
    for ex in pairs:
        segments = german_clauses(" ".join(ex.de))
        for k, seg in enumerate(segments):
            first = seg[0].lower()
            if first in SUBORDINATORS or (k > 0 and first in RELATIVE):
                assert seg[-1] in FINITE, " ".join(ex.de)
                checked += 1
    assert checked > 100


def test_separable_prefix_closes_the_main_clause() -> None:
    grammar = Grammar(random.Random(5), S.NAMES)
    for v in (v for v in VERBS if v.sep):
        for tense in ("pres", "perf", "can"):
            c = grammar.clause(verb=v, tense=tense, adjuncts=False)
            main = say(c)
            last = main.de[-2]
            if tense == "pres":
                assert last == v.sep, " ".join(main.de)
            else:
                assert last.startswith(v.sep) and last in (v.pp, v.de), " ".join(main.de)
            links: Links = []
            _, sub = realize_clause(c, "sub", links)
            assert sub[-1].text.startswith(v.sep) or tense != "pres"


def _gender_options() -> dict[str, set[tuple[str, bool]]]:
    options: dict[str, set[tuple[str, bool]]] = {}
    for n in NOUNS:
        for form in (n.de, n.obl):
            if form:
                options.setdefault(form, set()).add((n.gender, False))
        if n.de_pl:
            for form in (n.de_pl, n.de_pl if n.de_pl.endswith(("n", "s")) else n.de_pl + "n"):
                options.setdefault(form, set()).add((n.gender, True))
    return options


def test_articles_and_adjectives_agree_with_nouns(pairs: list[Example]) -> None:
    """der/die/das/den/dem (+ contractions) + adjective + noun: gender, number and weak endings."""
    options = _gender_options()
    article = {"der": ("m", "f"), "die": ("f", "pl"), "das": ("n",), "den": ("m", "pl"), "dem": ("m", "n")}
    contracted = {"im": "dem", "am": "dem", "zum": "dem", "vom": "dem", "beim": "dem", "ins": "das", "ans": "das",
                  "zur": "der"}
    checked = 0
    for ex in pairs:
        d = ex.de
        for k, w in enumerate(d[:-1]):
            art = contracted.get(w.lower(), w.lower())
            if art not in article or (k > 0 and d[k - 1] == ","):
                continue
            has_adj = d[k + 1].islower() and k + 2 < len(d) and d[k + 2] in options
            head = d[k + 2] if has_adj else d[k + 1]
            if head not in options:
                continue
            fits = []
            for gender, plural in options[head]:
                g = "pl" if plural else gender
                if g not in article[art]:
                    continue
                if has_adj:
                    nominative_like = (art, g) in (("der", "m"), ("die", "f"), ("das", "n"))
                    ending_ok = d[k + 1].endswith("e") if nominative_like else d[k + 1].endswith("en")
                    if not ending_ok:
                        continue
                fits.append(g)
            assert fits, f"{' '.join(d)}: {' '.join(d[k:k + 3])}"
            checked += 1
    assert checked > 500


def test_mixed_endings_after_ein_words(pairs: list[Example]) -> None:
    options = _gender_options()
    checked = 0
    for ex in pairs:
        d = ex.de
        for k in range(len(d) - 2):
            w, a, n = d[k].lower(), d[k + 1], d[k + 2]
            if w not in ("ein", "kein", "mein", "dein", "sein", "unser") or not a.islower() or n not in options:
                continue
            genders = {g for g, plural in options[n] if not plural}
            assert (a.endswith("er") and "m" in genders) or (a.endswith("es") and "n" in genders), " ".join(d)
            checked += 1
    assert checked > 5


# ------------------------------------------------------------------ CLI


def test_cli_writes_summary_and_refuses_to_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    runner = CliRunner()
    args = ["sample", "--out", str(out), "--train", "50", "--valid", "10", "--test", "10", "--seed", "2"]
    res = runner.invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert len(read(out / "train.en")) == 50 and len(read(out / "test.align")) == 10
    res = runner.invoke(cli, args)
    assert res.exit_code == 1
    assert "nmtkit-sample: error:" in res.output and "--overwrite" in res.output
    res = runner.invoke(cli, args[:-1] + ["3", "--overwrite"])
    assert res.exit_code == 0, res.output
    assert len(read(out / "train.de")) == 50
