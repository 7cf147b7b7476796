"""nmtkit-score in bounded memory: sufficient statistics summed chunk by chunk give exactly
sacrebleu's corpus scores, and no more than one chunk of lines is handed to sacrebleu at a time."""
from __future__ import annotations

import random

import pytest
from click.testing import CliRunner

from nmtkit.cli.score import command as score
from nmtkit.errors import InputError
from nmtkit.evaluate import metrics, scoring
from nmtkit.evaluate.length_buckets import bleu_by_length
from nmtkit.evaluate.metrics import corpus_score, make_metric
from nmtkit.utils.textio import iter_parallel_chunks

WORDS = "the a cat dog sees sits . , Anna Katze Hund über été 42 ( ) -".split()


def _corpus(n: int, seed: int = 0) -> tuple[list[str], list[list[str]]]:
    rng = random.Random(seed)
    line = lambda: " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 18)))  # noqa: E731 (empty lines too)
    return [line() for _ in range(n)], [[line() for _ in range(n)] for _ in range(2)]


@pytest.mark.parametrize("name", ["bleu", "chrf", "ter"])
@pytest.mark.parametrize("chunk", [1, 2, 7, 61, 1000])
@pytest.mark.parametrize("tokenized,lowercase", [(False, False), (True, False), (False, True)])
def test_chunked_scores_equal_sacrebleus_corpus_score_exactly(name, chunk, tokenized, lowercase):
    hyps, refs = _corpus(61)
    for streams in (refs[:1], refs):  # one and two references
        metric = make_metric(name, tokenized=tokenized, lowercase=lowercase)
        whole = metric.corpus_score(hyps, streams)
        got = corpus_score(name, hyps, streams, tokenized=tokenized, lowercase=lowercase, chunk_lines=chunk)
        assert got.score == float(whole.score)  # exact, not approximate
        assert got.details == whole.format()
        assert got.signature == str(metric.get_signature())


def test_bleu_by_length_equals_bucketwise_sacrebleu(monkeypatch):
    hyps, refs = _corpus(50, seed=3)
    monkeypatch.setattr("nmtkit.evaluate.length_buckets.SCORE_CHUNK_LINES", 4)
    buckets = bleu_by_length(hyps, refs, edges=(5, 10, 15))
    for b in buckets:
        idx = [i for i, r in enumerate(refs[0]) if b.lo <= len(r.split()) and (b.hi is None or len(r.split()) < b.hi)]
        assert b.count == len(idx)
        if idx:
            whole = make_metric("bleu").corpus_score([hyps[i] for i in idx], [[s[i] for i in idx] for s in refs])
            assert b.bleu == float(whole.score)


def test_the_command_scores_files_chunk_by_chunk_with_the_same_results(tmp_path, monkeypatch):
    hyps, refs = _corpus(40, seed=5)
    paths = {"sys": tmp_path / "sys.txt", "r1": tmp_path / "r1.txt", "r2": tmp_path / "r2.txt"}
    for p, lines in zip(paths.values(), [hyps, *refs]):
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = ["--sys", str(paths["sys"]), "--ref", str(paths["r1"]), "--ref", str(paths["r2"]), "--metrics", "bleu,chrf,ter"]
    whole = CliRunner().invoke(score, args)
    assert whole.exit_code == 0, whole.output

    seen: list[int] = []
    add = metrics.CorpusAccumulator.add
    monkeypatch.setattr(scoring, "SCORE_CHUNK_LINES", 3)
    monkeypatch.setattr(metrics.CorpusAccumulator, "add", lambda self, h, r: (seen.append(len(h)), add(self, h, r))[1])
    chunked = CliRunner().invoke(score, args)
    assert chunked.exit_code == 0 and chunked.output == whole.output
    assert max(seen) == 3 and sum(seen) == 3 * 40  # three metrics, every line once, never more than a chunk

    for extra in (["--by-length", "--buckets", "5,10"], ["--sentence-level"]):
        monkeypatch.setattr(scoring, "SCORE_CHUNK_LINES", 2000)
        a = CliRunner().invoke(score, args + extra)
        monkeypatch.setattr(scoring, "SCORE_CHUNK_LINES", 3)
        b = CliRunner().invoke(score, args + extra)
        assert a.exit_code == b.exit_code == 0 and a.output == b.output


def test_parallel_chunks_check_counts_and_empty_files(tmp_path):
    a, b, e = tmp_path / "a", tmp_path / "b", tmp_path / "e"
    a.write_text("1\n2\n3\n4\n5\n", encoding="utf-8")
    b.write_text("1\n2\n3\n4\n", encoding="utf-8")
    e.write_text("", encoding="utf-8")
    assert [c for c in iter_parallel_chunks([a, a], 2)] == [[["1", "2"]] * 2, [["3", "4"]] * 2, [["5"]] * 2]
    with pytest.raises(InputError, match=f"files are not parallel: {a} has 5 lines, {b} has 4 lines"):
        list(iter_parallel_chunks([a, b], 2))
    with pytest.raises(InputError, match=f"{e}: file is empty"):
        list(iter_parallel_chunks([a, e], 2))


def test_a_bad_line_late_in_a_file_gives_no_partial_result(tmp_path):
    good = tmp_path / "ref.txt"
    good.write_text("a b c\n" * 30, encoding="utf-8")
    bad = tmp_path / "sys.txt"
    bad.write_bytes(b"a b c\n" * 29 + b"\xff\n")
    res = CliRunner().invoke(score, ["--sys", str(bad), "--ref", str(good)])
    assert res.exit_code == 1
    assert res.output.strip() == f"nmtkit-score: error: {bad}:30: invalid UTF-8 at byte 0"
