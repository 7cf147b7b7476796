"""Metrics agree with sacrebleu itself, BLEU flavours differ where they should,
length buckets partition the corpus, perplexity is exp of mean negative log-prob."""
from __future__ import annotations

import math

import pytest
import sacrebleu
from sacrebleu.metrics import BLEU, CHRF, TER

from nmtkit.errors import NmtkitError
from nmtkit.evaluate.length_buckets import (
    DEFAULT_EDGES,
    assign_buckets,
    bleu_by_length,
    bucket_bounds,
    parse_edges,
)
from nmtkit.evaluate.metrics import (
    corpus_bleu,
    corpus_chrf,
    corpus_scores,
    corpus_ter,
    paired_bootstrap,
    parse_metric_names,
    perplexity,
    sentence_scores,
)

HYPS = [
    "The cat sat on the mat.",
    "A quick brown fox jumps over a lazy dog.",
    "He didn't go to school today, did he?",
    "Economic growth has slowed in recent years.",
]
REF1 = [
    "The cat sat on a mat.",
    "The quick brown fox jumps over the lazy dog.",
    "He did not go to school today, did he?",
    "Economic growth has slowed down in recent years.",
]
REF2 = [
    "A cat was sitting on the mat.",
    "A fast brown fox jumped over a lazy dog.",
    "He didn't go to school today, right?",
    "Growth of the economy slowed in recent years.",
]


def test_bleu_equals_sacrebleu_corpus_bleu() -> None:
    ours = corpus_bleu(HYPS, [REF1])
    theirs = sacrebleu.corpus_bleu(HYPS, [REF1])
    assert ours.score == pytest.approx(theirs.score, abs=1e-9)
    assert ours.name == "BLEU"
    assert "tok:13a" in ours.signature and "nrefs:1" in ours.signature and "version:" in ours.signature
    assert ours.details.startswith("BLEU = ")


def test_tokenized_bleu_is_sacrebleu_with_tokenize_none() -> None:
    hyps = ["the cat sat on the mat.", "he did n't go ."]
    refs = ["the cat sat on the mat .", "he did n't go ."]
    ours = corpus_bleu(hyps, [refs], tokenized=True)
    theirs = BLEU(tokenize="none").corpus_score(hyps, [refs])
    assert ours.score == pytest.approx(theirs.score, abs=1e-9)
    assert "tok:none" in ours.signature
    # "mat." is one token without tokenization, two with 13a: the flavours really differ.
    assert corpus_bleu(hyps, [refs]).score > ours.score


def test_multiple_references() -> None:
    ours = corpus_bleu(HYPS, [REF1, REF2])
    theirs = sacrebleu.corpus_bleu(HYPS, [REF1, REF2])
    assert ours.score == pytest.approx(theirs.score, abs=1e-9)
    assert "nrefs:2" in ours.signature
    assert ours.score > corpus_bleu(HYPS, [REF1]).score


def test_lowercase_applies_to_every_metric() -> None:
    hyps, refs = ["THE CAT SAT ON THE MAT"], [["the cat sat on the mat"]]
    assert corpus_bleu(hyps, refs).score < 1.0
    assert corpus_bleu(hyps, refs, lowercase=True).score == pytest.approx(100.0)
    assert corpus_chrf(hyps, refs, lowercase=True).score == pytest.approx(100.0)
    assert corpus_ter(hyps, refs).score > 0.0  # case-sensitive by default, unlike bare sacrebleu TER
    assert corpus_ter(hyps, refs, lowercase=True).score == pytest.approx(0.0)
    assert "case:lc" in corpus_bleu(hyps, refs, lowercase=True).signature


def test_chrf_and_ter_equal_sacrebleu() -> None:
    assert corpus_chrf(HYPS, [REF1]).score == pytest.approx(CHRF().corpus_score(HYPS, [REF1]).score)
    assert corpus_ter(HYPS, [REF1]).score == pytest.approx(
        TER(case_sensitive=True).corpus_score(HYPS, [REF1]).score)
    scores = corpus_scores(HYPS, [REF1], ["bleu", "chrf", "ter"])
    assert [r.name for r in scores.values()] == ["BLEU", "chrF2", "TER"]


def test_sentence_scores_match_sacrebleu_sentence_level() -> None:
    sents = sentence_scores(HYPS, [REF1, REF2], ["bleu", "chrf"])
    assert len(sents) == len(HYPS)
    for hyp, r1, r2, s in zip(HYPS, REF1, REF2, sents):
        assert s["bleu"] == pytest.approx(sacrebleu.sentence_bleu(hyp, [r1, r2]).score)
        assert s["chrf"] == pytest.approx(sacrebleu.sentence_chrf(hyp, [r1, r2]).score)


def test_reference_not_parallel_is_an_error() -> None:
    with pytest.raises(NmtkitError, match="reference 1 has 3 lines but the system output has 4"):
        corpus_bleu(HYPS, [REF1[:3]])
    with pytest.raises(NmtkitError, match="empty"):
        corpus_bleu([], [[]])


def test_parse_metric_names() -> None:
    assert parse_metric_names("BLEU, chrf") == ["bleu", "chrf"]
    with pytest.raises(NmtkitError, match="unknown metric 'meteor'"):
        parse_metric_names("bleu,meteor")


def test_paired_bootstrap_uses_sacrebleu_and_is_reproducible() -> None:
    better = list(REF1)  # the reference itself: clearly better than HYPS
    res = paired_bootstrap([("base", HYPS), ("oracle", better)], [REF1], ["bleu", "chrf"], n_samples=200)
    assert [(r.system, r.metric) for r in res] == [
        ("base", "BLEU"), ("base", "chrF2"), ("oracle", "BLEU"), ("oracle", "chrF2")]
    assert res[0].p_value is None and res[0].score == pytest.approx(corpus_bleu(HYPS, [REF1]).score)
    assert res[2].score == pytest.approx(100.0)
    assert res[2].p_value is not None and res[2].p_value < 0.05
    assert "bs:200" in res[2].signature
    again = paired_bootstrap([("base", HYPS), ("oracle", better)], [REF1], ["bleu", "chrf"], n_samples=200)
    assert again == res


def test_paired_bootstrap_identical_systems_not_significant() -> None:
    res = paired_bootstrap([("a", HYPS), ("b", list(HYPS))], [REF1], ["bleu"], n_samples=100)
    assert res[1].p_value == 1.0


def test_perplexity() -> None:
    assert perplexity(-10 * math.log(4.0), 10) == pytest.approx(4.0)
    assert perplexity(0.0, 3) == pytest.approx(1.0)
    assert perplexity(-1e6, 1) == math.inf
    with pytest.raises(ValueError):
        perplexity(-1.0, 0)


# -- length buckets -------------------------------------------------------------------------
def test_default_buckets_like_luong_fig6() -> None:
    labels = [label for _, _, label in bucket_bounds(DEFAULT_EDGES)]
    assert labels == ["<10", "10-19", "20-29", "30-39", "40-49", "50-59", "60-69", "70+"]


@pytest.mark.parametrize("lengths", [[0, 1, 9, 10, 19, 20, 69, 70, 500], list(range(0, 120, 7)), []])
def test_buckets_partition_the_corpus(lengths: list[int]) -> None:
    groups = assign_buckets(lengths, DEFAULT_EDGES)
    flat = sorted(i for g in groups for i in g)
    assert flat == list(range(len(lengths)))
    for (lo, hi, _), g in zip(bucket_bounds(DEFAULT_EDGES), groups):
        for i in g:
            assert lo <= lengths[i] and (hi is None or lengths[i] < hi)


def test_bleu_by_length_buckets_by_source_when_given() -> None:
    src = ["a b", "a b c d e", "a", "a b c d e f g"]  # lengths 2, 5, 1, 7
    res = bleu_by_length(HYPS, [REF1], src=src, edges=(2, 6))
    assert [(b.label, b.count) for b in res] == [("<2", 1), ("2-5", 2), ("6+", 1)]
    assert sum(b.count for b in res) == len(HYPS)
    assert res[0].bleu == pytest.approx(corpus_bleu([HYPS[2]], [[REF1[2]]]).score)
    assert res[1].bleu == pytest.approx(corpus_bleu([HYPS[0], HYPS[1]], [[REF1[0], REF1[1]]]).score)
    # Without a source the reference lengths decide (all references have 6-10 words).
    by_ref = bleu_by_length(HYPS, [REF1], edges=(2, 6))
    assert [b.count for b in by_ref] == [0, 0, 4] and by_ref[0].bleu is None


def test_bucket_edges_validated() -> None:
    assert parse_edges("5,10") == (5, 10)
    for bad in ("10,5", "0,10", "a,b", ""):
        with pytest.raises(NmtkitError):
            parse_edges(bad)


@pytest.mark.parametrize("labels", ["A\tx,B", "A\nx,B", "A,B\x07x", "A,B\u2028x"])
def test_labels_with_tabs_or_line_breaks_are_refused(labels):
    from nmtkit.errors import NmtkitError
    from nmtkit.evaluate.scoring import resolve_labels

    with pytest.raises(NmtkitError, match="holds a tab, line break or other control character"):
        resolve_labels(["a.txt", "b.txt"], labels)
    assert resolve_labels(["a.txt", "b.txt"], "A x,B\xa0y") == ["A x", "B\xa0y"]  # spaces of any kind are fine
