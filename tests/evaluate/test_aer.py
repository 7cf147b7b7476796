"""AER/precision/recall on hand-worked examples, and strict Pharaoh reading/writing."""
from __future__ import annotations

from pathlib import Path

import pytest

from nmtkit.errors import InputError, NmtkitError
from nmtkit.evaluate.aer import alignment_error_rate
from nmtkit.data.pharaoh import GoldAlignment, parse_pharaoh_line
from nmtkit.evaluate.alignment_io import format_pharaoh, read_alignments, read_gold, read_gold_pair, write_pharaoh


def G(sure: set, possible: set = frozenset()) -> GoldAlignment:  # noqa: N802
    return GoldAlignment(sure=set(sure), possible=set(possible))


# -- AER ------------------------------------------------------------------------------------
def test_hand_worked_corpus_with_possible_links() -> None:
    hyps = [{(0, 0), (1, 2), (2, 2)}, set(), {(1, 1)}]
    golds = [G({(0, 0), (1, 1)}, {(1, 2)}), G({(0, 0)}, {(0, 1)}), G(set(), {(1, 1)})]
    # |A| = 4, |S| = 3, |A&S| = 1, |A&P| = 3  (counts summed over sentences)
    r = alignment_error_rate(hyps, golds)
    assert (r.n_hyp, r.n_sure, r.n_hyp_sure, r.n_hyp_possible) == (4, 3, 1, 3)
    assert r.precision == pytest.approx(3 / 4)
    assert r.recall == pytest.approx(1 / 3)
    assert r.aer == pytest.approx(1 - 4 / 7)
    assert r.n_sentences == 3


def test_corpus_aer_is_not_a_mean_of_sentence_aers() -> None:
    hyps = [{(0, 0)}, {(0, 0), (1, 1), (2, 2), (3, 3)}]
    golds = [G({(0, 1)}), G({(0, 0), (1, 1), (2, 2), (3, 3)})]
    r = alignment_error_rate(hyps, golds)
    assert r.aer == pytest.approx(1 - (4 + 4) / (5 + 5))  # 0.2, whereas the sentence mean is 0.5


def test_perfect_alignment_and_possible_links_do_not_hurt() -> None:
    gold = [G({(0, 0), (1, 1)}, {(2, 1), (1, 2)})]
    assert alignment_error_rate([{(0, 0), (1, 1)}], gold).aer == 0.0
    r = alignment_error_rate([{(0, 0), (1, 1), (2, 1)}], gold)
    assert r.precision == 1.0 and r.recall == 1.0
    assert r.aer == pytest.approx(1 - (2 + 3) / (3 + 2))  # 0.0: a possible link costs nothing


def test_empty_alignments_are_defined() -> None:
    both_empty = alignment_error_rate([set(), set()], [G(set()), G(set())])
    assert (both_empty.precision, both_empty.recall, both_empty.aer) == (1.0, 1.0, 0.0)
    no_hyp = alignment_error_rate([set()], [G({(0, 0), (1, 1)})])
    assert (no_hyp.precision, no_hyp.recall, no_hyp.aer) == (1.0, 0.0, 1.0)
    no_gold = alignment_error_rate([{(0, 0)}], [G(set())])
    assert (no_gold.precision, no_gold.recall, no_gold.aer) == (0.0, 1.0, 1.0)


def test_sentence_count_mismatch_is_an_error() -> None:
    with pytest.raises(NmtkitError, match="2 hypothesis alignments but 1 gold"):
        alignment_error_rate([set(), set()], [G(set())])


def test_gold_possible_always_includes_sure() -> None:
    g = GoldAlignment(sure={(0, 0)}, possible={(1, 1)})
    assert g.possible == {(0, 0), (1, 1)}


# -- Pharaoh parsing ----------------------------------------------------------------------------
def test_parse_sure_and_possible_links() -> None:
    g = parse_pharaoh_line("0-0  2?1 1-1\t3?3")
    assert g.sure == {(0, 0), (1, 1)}
    assert g.possible == {(0, 0), (1, 1), (2, 1), (3, 3)}
    assert parse_pharaoh_line("").sure == set()


def test_read_gold_file(tmp_path: Path) -> None:
    p = tmp_path / "gold.txt"
    p.write_text("0-0 1?2\n\n2-1 0-0\n", encoding="utf-8")
    golds = read_gold(p)
    assert len(golds) == 3
    assert golds[0].sure == {(0, 0)} and golds[0].possible == {(0, 0), (1, 2)}
    assert golds[1].sure == set() and golds[1].possible == set()
    assert golds[2].sure == {(0, 0), (2, 1)}


@pytest.mark.parametrize("bad, message", [
    ("0-0 1-x", "malformed alignment link '1-x'"),
    ("0-0 12", "malformed alignment link '12'"),
    ("0-0 1:2", "malformed"),
    ("0-0 \u0661-\u0662", "malformed alignment link '\u0661-\u0662'"),  # Arabic-Indic digits, which int() reads
    ("0-0 \uff11-\uff12", "malformed"),  # fullwidth digits
    ("0--1", "negative index"),
    ("-1-0", "negative index"),
])
def test_malformed_gold_names_file_and_line(tmp_path: Path, bad: str, message: str) -> None:
    p = tmp_path / "gold.txt"
    p.write_text(f"0-0\n{bad}\n", encoding="utf-8")
    with pytest.raises(InputError, match=message) as exc:
        read_gold(p)
    assert str(exc.value).startswith(f"{p}:2: ")


def test_out_of_range_and_length_mismatch(tmp_path: Path) -> None:
    p = tmp_path / "gold.txt"
    p.write_text("0-0 1-1\n2-0\n", encoding="utf-8")
    assert len(read_gold(p, src_lengths=[2, 3], tgt_lengths=[2, 1])) == 2
    with pytest.raises(InputError, match=r"gold.txt:2: source index 2 .* out of range \(sentence has 2 source"):
        read_gold(p, src_lengths=[2, 2])
    with pytest.raises(InputError, match=r"gold.txt:1: target index 1 .* out of range"):
        read_gold(p, tgt_lengths=[1, 1])
    with pytest.raises(InputError, match="has 2 lines but there are 3 source sentences"):
        read_gold(p, src_lengths=[2, 3, 4])


def test_hypothesis_file_rejects_possible_links(tmp_path: Path) -> None:
    p = tmp_path / "hyp.txt"
    p.write_text("0-0 1?1\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"hyp.txt:1: possible link '1\?1' not allowed"):
        read_alignments(p)


def test_gold_from_separate_sure_and_possible_files(tmp_path: Path) -> None:
    sure, poss = tmp_path / "sure.txt", tmp_path / "possible.txt"
    sure.write_text("0-0\n1-1\n", encoding="utf-8")
    poss.write_text("0-0 0-1\n2-2\n", encoding="utf-8")  # second line omits the sure link
    golds = read_gold_pair(sure, poss)
    assert golds[0].sure == {(0, 0)} and golds[0].possible == {(0, 0), (0, 1)}
    assert golds[1].possible == {(1, 1), (2, 2)}
    poss.write_text("0-0\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"sure.txt has 2 lines, .*possible.txt has 1 lines"):
        read_gold_pair(sure, poss)


def test_invalid_utf8_names_line(tmp_path: Path) -> None:
    p = tmp_path / "gold.txt"
    p.write_bytes(b"0-0\n1-1 \xff\n")
    with pytest.raises(InputError, match="gold.txt:2: invalid UTF-8"):
        read_gold(p)


def test_write_pharaoh_sorted_and_round_trips(tmp_path: Path) -> None:
    aligns = [{(2, 1), (0, 0), (1, 3), (1, 2)}, set(), {(10, 2), (9, 0)}]
    p = tmp_path / "out" / "align.txt"
    write_pharaoh(p, aligns)
    assert p.read_text(encoding="utf-8") == "0-0 1-2 1-3 2-1\n\n9-0 10-2\n"
    assert read_alignments(p) == aligns
    assert format_pharaoh({(1, 1)}, possible={(0, 0), (1, 1)}) == "0?0 1-1"
