"""nmtkit-align: word-level Pharaoh output, gold scoring, symmetrization, plots, dictionaries, errors.

The behaviour tests use a luong_tiny model trained for a few seconds on a small ``nmtkit
sample`` corpus (alignment *quality* is tested in test_align_e2e.py); the word-mapping tests
use untrained models with Moses/BPE pipelines built in memory (the mapping does not depend on
the weights).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from nmtkit.cli.align import command as align
from nmtkit.cli.preprocess import command as preprocess
from nmtkit.cli.train import command as train
from nmtkit.data.dictionary import Dictionary
from nmtkit.sample import generate_corpus
from nmtkit.data.text_pipeline import TextPipeline
from nmtkit.errors import NmtkitError
from nmtkit.evaluate.aer import alignment_error_rate
from nmtkit.data.lexicon import build_lexicon, count_word_pairs
from nmtkit.generate.align_pipeline import prepare_side
from nmtkit.generate.aligner import Aligner, AlignmentRun
from nmtkit.evaluate.alignment_io import read_alignments, read_gold
from nmtkit.evaluate.symmetrize import symmetrize
from nmtkit.generate.bundle import load_ensemble
from nmtkit.data.lexicon import load_lexicon
from nmtkit.models import registry
from nmtkit.checkpoint import model_payload, save_checkpoint
from tests.helpers import write

# Hand-written subword-nmt codes: "hund" -> "hu@@ nd", "katze" -> "ka@@ tze"; der, sieht, die stay whole.
BPE_CODES = ("#version: 0.2\nh u\nn d</w>\nk a\nt z\ntz e</w>\nd e\nde r</w>\ns i\ne h\nsi eh\nsieh t</w>\n"
             "d i\ndi e</w>\n")


# ---------------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------------
def run(args: list[str]):  # noqa: ANN201
    return CliRunner().invoke(align, [str(a) for a in args])


def links_of(output: str) -> list[set[tuple[int, int]]]:
    out = []
    for line in output.splitlines():
        out.append({(int(a), int(b)) for a, b in (t.split("-") for t in line.split())})
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A small sample corpus (en->de with gold links) preprocessed both ways, plus a model per
    direction trained for a few seconds."""
    root = tmp_path_factory.mktemp("align")
    raw = root / "raw"
    generate_corpus(raw, seed=3, n_train=300, n_valid=20, n_test=30)
    for s, t in (("en", "de"), ("de", "en")):
        res = CliRunner().invoke(preprocess, ["-s", s, "-t", t, "--trainpref", str(raw / "train"),
                                              "--validpref", str(raw / "valid"), "--testpref", str(raw / "test"),
                                              "--destdir", str(root / f"bin-{s}{t}")])
        assert res.exit_code == 0, res.output
        res = CliRunner().invoke(train, [str(root / f"bin-{s}{t}"), "--arch", "luong_tiny", "--save-dir",
                                         str(root / f"ckpt-{s}{t}"), "--batch-size", "32", "--max-update", "15",
                                         "--no-progress", "--seed", "1", "--threads", "1"])
        assert res.exit_code == 0, res.output
    return root


def fwd(c: Path) -> str:
    return str(c / "ckpt-ende" / "checkpoint_last.pt")


def rev(c: Path) -> str:
    return str(c / "ckpt-deen" / "checkpoint_last.pt")


def text_args(c: Path, split: str = "test") -> list[str]:
    return ["--source", c / "raw" / f"{split}.en", "--target", c / "raw" / f"{split}.de"]


def untrained_checkpoint(path: Path, src_pipe: TextPipeline, tgt_pipe: TextPipeline,
                         src_symbols: list[str], tgt_symbols: list[str], seed: int = 0,
                         arch: str = "luong_tiny") -> Path:
    """A small checkpoint of ``arch`` with random weights and the given text pipelines."""
    src_dict, tgt_dict = Dictionary(), Dictionary()
    for s in src_symbols:
        src_dict.add(s)
    for s in tgt_symbols:
        tgt_dict.add(s)
    torch.manual_seed(seed)
    name, cfg = registry.resolve_config(arch, {"hidden_size": 16, "embed_dim": 8, "layers": 1})
    model = registry.build_model(name, cfg, src_dict, tgt_dict)
    save_checkpoint(path, model_payload(model, arch, src_pipe, tgt_pipe))
    return path


# ---------------------------------------------------------------------------------------------
# words, tokens and pieces
# ---------------------------------------------------------------------------------------------
def test_pieces_map_back_to_the_words_as_given():
    pipe = TextPipeline(lang="de", tokenizer="moses", lowercase=True, bpe_codes_text=BPE_CODES)
    line = "Der Hund, (sieht) die Katze."
    side = prepare_side(line, pipe, Dictionary(), pretokenized=False, path="x", lineno=1)
    assert side.words == ["Der", "Hund,", "(sieht)", "die", "Katze."]
    _, pieces = pipe.encode(line)
    assert pieces == ["der", "hu@@", "nd", ",", "(", "sieht", ")", "die", "ka@@", "tze", "."]
    assert side.word_of == [0, 1, 1, 1, 2, 2, 2, 3, 4, 4, 4]
    assert len(side.ids) == len(pieces) + 1  # + </s>


def test_pretokenized_words_are_the_tokens():
    pipe = TextPipeline(lang="de", tokenizer="moses", lowercase=True, bpe_codes_text=BPE_CODES)
    side = prepare_side("Der Hund , sieht", pipe, Dictionary(), pretokenized=True, path="x", lineno=1)
    assert side.words == ["Der", "Hund", ",", "sieht"]
    assert side.word_of == [0, 1, 1, 2, 3]


def test_links_index_the_given_words_through_moses_and_bpe(tmp_path):
    src_pipe = TextPipeline(lang="en", tokenizer="moses", lowercase=True)
    tgt_pipe = TextPipeline(lang="de", tokenizer="moses", lowercase=True, bpe_codes_text=BPE_CODES)
    ckpt = untrained_checkpoint(tmp_path / "m.pt", src_pipe, tgt_pipe, ["the", "dog", "sees", ".", ","],
                                ["der", "hu@@", "nd", "sieht", "."])
    src = ["The dog's (friend) sees, the cat.", "dog"]
    tgt = ["Der Hund, sieht die Katze.", "Hund Katze Hund."]
    (tmp_path / "s.txt").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp_path / "t.txt").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    res = run(["--path", ckpt, "--source", tmp_path / "s.txt", "--target", tmp_path / "t.txt", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    for links, s, t in zip(links_of(res.stdout), src, tgt):
        n_src, n_tgt = len(s.split()), len(t.split())
        # exactly one link per target word, into the source words as given
        assert sorted(j for _, j in links) == list(range(n_tgt))
        assert all(0 <= i < n_src for i, _ in links)


# ---------------------------------------------------------------------------------------------
# happy paths on the briefly trained model
# ---------------------------------------------------------------------------------------------
def test_one_pharaoh_line_per_pair_in_input_order_whatever_the_batching(corpus, tmp_path):
    base = run(["--path", fwd(corpus), *text_args(corpus), "--batch-size", "64"])
    assert base.exit_code == 0, base.output
    src = (corpus / "raw" / "test.en").read_text(encoding="utf-8").splitlines()
    tgt = (corpus / "raw" / "test.de").read_text(encoding="utf-8").splitlines()
    got = links_of(base.stdout)
    assert len(got) == len(src) == 30
    for links, s, t in zip(got, src, tgt):
        assert sorted(j for _, j in links) == list(range(len(t.split())))
        assert all(0 <= i < len(s.split()) for i, _ in links)
    for extra in (["--batch-size", "1"], ["--batch-size", "7"], ["--max-tokens", "40"]):
        other = run(["--path", fwd(corpus), *text_args(corpus), *extra])
        assert other.exit_code == 0, other.output
        assert other.stdout == base.stdout, extra
    # --output writes the same lines to a file and nothing to stdout
    out = tmp_path / "sub" / "a.align"
    res = run(["--path", fwd(corpus), *text_args(corpus), "-o", out])
    assert res.exit_code == 0 and res.stdout == ""
    assert out.read_text(encoding="utf-8") == base.stdout


def test_data_split_aligns_the_tok_text(corpus):
    # the sample text is whitespace-tokenized and preprocess ran without a tokenizer, so the
    # split's .tok text is the raw text and both inputs must give the same links
    a = run(["--path", fwd(corpus), *text_args(corpus)])
    b = run(["--path", fwd(corpus), "--data", corpus / "bin-ende", "--split", "test"])
    assert a.exit_code == 0 and b.exit_code == 0, b.output
    assert a.stdout == b.stdout


def test_an_ensemble_of_one_model_twice_aligns_like_the_model(corpus):
    a = run(["--path", fwd(corpus), *text_args(corpus)])
    b = run(["--path", f"{fwd(corpus)}:{fwd(corpus)}", *text_args(corpus)])
    assert b.exit_code == 0, b.output
    assert a.stdout == b.stdout


def test_gold_scores_match_the_printed_links(corpus):
    gold_path = corpus / "raw" / "test.align"
    res = run(["--path", fwd(corpus), *text_args(corpus), "--gold", gold_path])
    assert res.exit_code == 0, res.output
    assert "AER" in res.stderr and "source->target" in res.stderr
    hyp = links_of(res.stdout)
    src = [len(x.split()) for x in (corpus / "raw" / "test.en").read_text(encoding="utf-8").splitlines()]
    tgt = [len(x.split()) for x in (corpus / "raw" / "test.de").read_text(encoding="utf-8").splitlines()]
    want = alignment_error_rate(hyp, read_gold(gold_path, src, tgt))
    js = run(["--path", fwd(corpus), *text_args(corpus), "--gold", gold_path, "--json"])
    assert js.exit_code == 0, js.output
    scores = json.loads(js.stdout)  # stdout carries only the JSON
    assert scores["aer"] == pytest.approx(want.aer)
    assert scores["precision"] == pytest.approx(want.precision)
    assert scores["recall"] == pytest.approx(want.recall)
    # --sure/--possible with the same links (sure only here) give the same scores
    sp = run(["--path", fwd(corpus), *text_args(corpus), "--sure", gold_path, "--possible", gold_path, "--json"])
    assert json.loads(sp.stdout)["aer"] == pytest.approx(want.aer)


def test_symmetrization_combines_both_directions(corpus, tmp_path):
    f = run(["--path", fwd(corpus), *text_args(corpus)])
    # the reverse model reads German and writes English: its links are (de word, en word)
    r = run(["--path", rev(corpus), "--source", corpus / "raw" / "test.de", "--target", corpus / "raw" / "test.en"])
    assert f.exit_code == 0 and r.exit_code == 0, r.output
    s2t = links_of(f.stdout)
    t2s = [{(i, j) for j, i in links} for links in links_of(r.stdout)]
    results = {}
    for method in ("intersect", "union", "grow-diag-final", "grow-diag-final-and"):
        res = run(["--path", fwd(corpus), "--reverse-path", rev(corpus), "--symmetrize", method, *text_args(corpus),
                   "--gold", corpus / "raw" / "test.align", "-o", tmp_path / f"{method}.align"])
        assert res.exit_code == 0, res.output
        got = links_of((tmp_path / f"{method}.align").read_text(encoding="utf-8"))
        assert got == [symmetrize(a, b, method) for a, b in zip(s2t, t2s)]
        assert "target->source" in res.stderr and method in res.stderr
        results[method] = got
    for inter, uni, a, b in zip(results["intersect"], results["union"], s2t, t2s):
        assert inter <= a <= uni and inter <= b <= uni


def test_reverse_model_must_translate_the_other_way(corpus):
    res = run(["--path", fwd(corpus), "--reverse-path", fwd(corpus), *text_args(corpus)])
    assert res.exit_code == 1
    assert "translates en->de, but a de->en model is needed" in res.output


def test_plots_and_html_page(corpus, tmp_path, saved_figures):
    out = tmp_path / "plots"
    res = run(["--path", fwd(corpus), *text_args(corpus), "--gold", corpus / "raw" / "test.align",
               "--plot", out, "--plot-ids", "0,3", "--html", "-o", tmp_path / "a.align"])
    assert res.exit_code == 0, res.output
    for k in (0, 3):
        assert (out / f"align-{k}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (out / "align-1.png").exists()
    assert sorted(saved_figures) == ["align-0.png", "align-3.png"]
    (ax,) = saved_figures["align-0.png"].axes  # source words across the top, gold links circled
    src_words = [t.get_text() for t in ax.get_xticklabels()]
    assert src_words and ax.get_images()[0].get_array().shape == (len(ax.get_yticklabels()), len(src_words))
    assert len(ax.collections) == 1 and len(ax.collections[0].get_offsets()) > 0
    page = (out / "index.html").read_text(encoding="utf-8")
    assert 'src="align-0.png"' in page and 'src="align-3.png"' in page
    first_src = (corpus / "raw" / "test.en").read_text(encoding="utf-8").splitlines()[0]
    assert first_src.split()[1] in page
    bad = run(["--path", fwd(corpus), *text_args(corpus), "--plot", out, "--plot-ids", "30"])
    assert bad.exit_code == 1 and "--plot-ids 30 is out of range: there are 30 sentence pairs" in bad.output


def test_build_dict_writes_the_most_frequent_aligned_word(corpus, tmp_path):
    out = tmp_path / "dict.txt"
    res = run(["--path", fwd(corpus), *text_args(corpus, "train"), "--build-dict", out, "--dict-min-count", "3",
               "-o", tmp_path / "train.align"])
    assert res.exit_code == 0, res.output
    src = [l.split() for l in (corpus / "raw" / "train.en").read_text(encoding="utf-8").splitlines()]
    tgt = [l.split() for l in (corpus / "raw" / "train.de").read_text(encoding="utf-8").splitlines()]
    links = read_alignments(tmp_path / "train.align")
    want = build_lexicon(count_word_pairs(list(zip(src, tgt)), links), min_count=3)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines == [f"{s} {t}" for s, t, _ in want] and lines
    assert load_lexicon(out) == {s: t for s, t, _ in want}  # what --replace-unk reads


def test_lexicon_counts_ties_and_min_count():
    pairs = [(["a", "b"], ["x", "y"]), (["a", "b"], ["y", "x"]), (["a"], ["z"])]
    links = [[(0, 0), (1, 1)], [(0, 1), (1, 1)], [(0, 0)]]
    counts = count_word_pairs(pairs, links)
    assert counts["a"] == {"x": 2, "z": 1} and counts["b"] == {"y": 1, "x": 1}
    assert build_lexicon(counts, min_count=1) == [("a", "x", 2), ("b", "x", 1)]  # b: a tie, alphabetical
    assert build_lexicon(counts, min_count=2) == [("a", "x", 2)]
    # top k: a word's targets adjacent, by count then alphabetically; min_count applies to each
    assert build_lexicon(counts, min_count=1, top_k=2) == [("a", "x", 2), ("a", "z", 1), ("b", "x", 1), ("b", "y", 1)]
    assert build_lexicon(counts, min_count=2, top_k=2) == [("a", "x", 2)]


def test_aligner_builds_the_lexicon_lines_lowercased_like_each_side(tmp_path):
    # the library owns the lowercasing rule and the two formats; the command only writes the lines
    ckpt = untrained_checkpoint(tmp_path / "m.pt", TextPipeline("en", lowercase=True), TextPipeline("de"),
                                ["the", "cat"], ["Die", "Katze"])
    aligner = Aligner.from_checkpoint(ckpt, device="cpu")
    pairs, _ = aligner.prepare(["The Cat", "the cat"], ["Die Katze", "Die Katze"])
    links = [[(0, 0), (1, 1)], [(0, 0), (1, 1)]]  # token links (here the tokens are the words)
    run = AlignmentRun(pairs, [], {}, links, token_links=links)
    assert aligner.build_lexicon(run, min_count=2) == ["cat Katze", "the Die"]
    assert aligner.build_lexicon(run, min_count=1, top_k=3) == ["cat Katze 2", "the Die 2"]
    assert aligner.build_lexicon(run, min_count=3) == []
    with pytest.raises(NmtkitError, match="needs token links"):  # word links alone are not enough
        aligner.build_lexicon(AlignmentRun(pairs, [], {}, links), min_count=1)


def test_lexicon_entries_are_the_tokens_translate_looks_up(tmp_path):
    """Raw words with punctuation attached ('cat.') are several Moses tokens; the dictionary
    holds tokens ('cat', '.'), never the raw word, since --replace-unk looks up tokens."""
    ckpt = untrained_checkpoint(tmp_path / "m.pt", TextPipeline("en", tokenizer="moses", lowercase=True),
                                TextPipeline("de", tokenizer="moses"), ["the", "cat", "."], ["Die", "Katze", "."])
    aligner = Aligner.from_checkpoint(ckpt, device="cpu")
    run = aligner.align_corpus(["The cat.", "the cat."], ["Die Katze.", "Die Katze."], token_links=True)
    assert [p.src.words for p in run.prepared] == [["The", "cat."], ["the", "cat."]]
    assert [p.src.tokens for p in run.prepared] == [["the", "cat", "."]] * 2
    assert all(len(t) == 3 for t in run.token_links)  # one link per target token
    entries = aligner.build_lexicon(run, min_count=1, top_k=3)
    sources = {e.split()[0] for e in entries}
    targets = {e.split()[1] for e in entries}
    assert sources <= {"the", "cat", "."} and targets <= {"Die", "Katze", "."} and sources
    assert run.links and all(i < 2 for sent in run.links for i, _ in sent)  # word links stay word-level
    # with a reverse model the token links are symmetrized like the word links
    rev = untrained_checkpoint(tmp_path / "r.pt", TextPipeline("de", tokenizer="moses"),
                               TextPipeline("en", tokenizer="moses", lowercase=True), ["Die", "Katze", "."],
                               ["the", "cat", "."], seed=1)
    both = Aligner.from_checkpoint(ckpt, reverse_path=rev, symmetrize="union", device="cpu")
    sym = both.align_corpus(["The cat."], ["Die Katze."], token_links=True)
    fwd_only = aligner.align_corpus(["The cat."], ["Die Katze."], token_links=True)
    assert set(fwd_only.token_links[0]) <= set(sym.token_links[0])  # union keeps every forward link
    assert all(i < 3 and j < 3 for i, j in sym.token_links[0])
    assert sym.extra["token_links_forward_only"] == 0  # both models tokenize the pair alike


def test_build_dict_top_k_writes_counts_for_shortlists(corpus, tmp_path):
    from nmtkit.generate.shortlist import Shortlist

    out = tmp_path / "lex.txt"
    res = run(["--path", fwd(corpus), *text_args(corpus, "train"), "--build-dict", out, "--dict-top-k", "3",
               "--dict-min-count", "1", "-o", tmp_path / "train.align"])
    assert res.exit_code == 0, res.output
    src = [l.split() for l in (corpus / "raw" / "train.en").read_text(encoding="utf-8").splitlines()]
    tgt = [l.split() for l in (corpus / "raw" / "train.de").read_text(encoding="utf-8").splitlines()]
    counts = count_word_pairs(list(zip(src, tgt)), read_alignments(tmp_path / "train.align"))
    want = build_lexicon(counts, min_count=1, top_k=3)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines == [f"{s} {t} {n}" for s, t, n in want]
    per_word: dict[str, int] = {}
    for s, _, _ in want:
        per_word[s] = per_word.get(s, 0) + 1
    assert max(per_word.values()) == 3 and len(lines) > len(per_word)  # several targets for some words
    # the 1-best of the same file is what --replace-unk reads; the shortlist reads all of it
    assert load_lexicon(out) == {s: t for s, t, _ in build_lexicon(counts, min_count=1)}
    model, _ = load_ensemble(fwd(corpus))
    sl = Shortlist.load(out, TextPipeline("de"), model.tgt_dict, k=3, frequent=0)
    assert all(sl.key_ids(w) is not None for w in per_word) and sl.key_ids("no-such-word") is None


# ---------------------------------------------------------------------------------------------
# errors: one line, file and line named, exit 1
# ---------------------------------------------------------------------------------------------


def one_line_error(res, *parts: str) -> None:  # noqa: ANN001
    assert res.exit_code == 1, res.output
    msg = res.output.strip()
    assert msg.startswith("nmtkit-align: error: ") and "\n" not in msg, msg
    for p in parts:
        assert p in msg, msg


def test_gold_with_the_wrong_number_of_lines(corpus, tmp_path):
    gold = write(tmp_path / "g", "0-0\n" * 29)
    one_line_error(run(["--path", fwd(corpus), *text_args(corpus), "--gold", gold]),
                   f"{gold}: has 29 lines but there are 30 source sentences")


def test_gold_index_out_of_range(corpus, tmp_path):
    lines = (corpus / "raw" / "test.align").read_text(encoding="utf-8").splitlines()
    lines[4] += " 99-0"
    gold = write(tmp_path / "g", "\n".join(lines) + "\n")
    one_line_error(run(["--path", fwd(corpus), *text_args(corpus), "--gold", gold]),
                   f"{gold}:5:", "source index 99", "out of range")


def test_malformed_gold_link(corpus, tmp_path):
    lines = (corpus / "raw" / "test.align").read_text(encoding="utf-8").splitlines()
    lines[2] = "0-0 1:1"
    gold = write(tmp_path / "g", "\n".join(lines) + "\n")
    one_line_error(run(["--path", fwd(corpus), *text_args(corpus), "--gold", gold]),
                   f"{gold}:3:", "malformed alignment link '1:1'")


def test_empty_line_in_the_text(corpus, tmp_path):
    lines = (corpus / "raw" / "test.de").read_text(encoding="utf-8").splitlines()
    lines[6] = "  "
    tgt = write(tmp_path / "t.de", "\n".join(lines) + "\n")
    one_line_error(run(["--path", fwd(corpus), "--source", corpus / "raw" / "test.en", "--target", tgt]),
                   f"{tgt}:7: empty line")


def test_source_and_target_line_counts_differ(corpus, tmp_path):
    lines = (corpus / "raw" / "test.de").read_text(encoding="utf-8").splitlines()
    tgt = write(tmp_path / "t.de", "\n".join(lines[:-1]) + "\n")
    one_line_error(run(["--path", fwd(corpus), "--source", corpus / "raw" / "test.en", "--target", tgt]),
                   "not parallel", "has 30 lines", "has 29 lines")


def test_missing_and_corrupt_checkpoints(corpus, tmp_path):
    missing = tmp_path / "nope.pt"
    one_line_error(run(["--path", missing, *text_args(corpus)]), f"{missing}: no such checkpoint file")
    one_line_error(run(["--path", f"{fwd(corpus)}:{missing}", *text_args(corpus)]), str(missing))
    corrupt = tmp_path / "bad.pt"
    corrupt.write_bytes(Path(fwd(corpus)).read_bytes()[:5000])
    one_line_error(run(["--path", corrupt, *text_args(corpus)]), f"{corrupt}: not a readable nmtkit checkpoint")
    one_line_error(run(["--path", fwd(corpus), "--reverse-path", corrupt, *text_args(corpus)]), str(corrupt))


# outputs: every destination is checked before the model loads, and a failed run replaces no file
# ---------------------------------------------------------------------------------------------
def refuse_loading(monkeypatch) -> None:  # noqa: ANN001
    """Make loading a checkpoint fail the test: an output error must come before it."""
    import nmtkit.generate.aligner as library

    def loaded(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded before the outputs were checked")

    monkeypatch.setattr(library.Aligner, "from_checkpoint", loaded)


def test_a_plot_dir_that_is_a_file_fails_before_anything_is_written(corpus, tmp_path, monkeypatch):
    blocker, out = write(tmp_path / "afile", "hi\n"), write(tmp_path / "o.align", "OLD\n")
    for extra in (["-o", out], []):
        res = run(["--path", fwd(corpus), *text_args(corpus), *extra, "--plot", blocker])
        assert out.read_text(encoding="utf-8") == "OLD\n"
        assert res.stdout == "" and "Traceback" not in res.output  # no alignments printed either
        one_line_error(res, f"{blocker}: --plot needs a directory, and this is a file")
    (tmp_path / "plots" / "align-1.png").mkdir(parents=True)  # a heatmap's own path is checked too
    one_line_error(run(["--path", fwd(corpus), *text_args(corpus), "-o", out, "--plot", tmp_path / "plots"]),
                   f"{tmp_path / 'plots' / 'align-1.png'}: is a directory, where --plot writes a file")
    assert out.read_text(encoding="utf-8") == "OLD\n"
    refuse_loading(monkeypatch)
    one_line_error(run(["--path", fwd(corpus), *text_args(corpus), "--plot", blocker]), str(blocker))


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_write_failing_after_the_heatmaps_leaves_none_of_them(corpus, tmp_path):
    """The heatmaps are committed with the other outputs: -o /dev/full (written after them) fails
    the command, and --plot DIR holds no PNG, page or temporary file."""
    plots = tmp_path / "plots"
    res = run(["--path", fwd(corpus), *text_args(corpus), "--plot", plots, "--plot-ids", "0,2", "--html", "-o", "/dev/full"])
    assert res.exit_code != 0 and "Traceback" not in res.output
    one_line_error(res, "/dev/full")
    assert not plots.exists() or not any(plots.iterdir())


def test_build_dict_where_no_directory_can_be_fails_before_the_model_loads(corpus, tmp_path, monkeypatch):
    blocker, out = write(tmp_path / "afile", "hi\n"), write(tmp_path / "o.align", "OLD\n")
    for dest in (blocker / "x.dict", blocker / "sub" / "x.dict"):
        res = run(["--path", fwd(corpus), *text_args(corpus), "-o", out, "--build-dict", dest])
        assert out.read_text(encoding="utf-8") == "OLD\n"
        one_line_error(res, f"{dest}: {blocker} is a file, not a directory")
    refuse_loading(monkeypatch)
    one_line_error(run(["--path", fwd(corpus), *text_args(corpus), "-o", out, "--build-dict", blocker / "x.dict"]),
                   f"{blocker} is a file, not a directory")
    one_line_error(run(["--path", fwd(corpus), *text_args(corpus), "-o", tmp_path]),
                   f"{tmp_path}: is a directory, where --output writes a file")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_failed_dictionary_write_replaces_no_output(corpus, tmp_path):
    out = write(tmp_path / "o.align", "OLD\n")
    res = run(["--path", fwd(corpus), *text_args(corpus), "-o", out, "--build-dict", "/dev/full"])
    assert out.read_text(encoding="utf-8") == "OLD\n"
    one_line_error(res, "/dev/full: No space left on device")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.align"]  # no temporary file left
    res = run(["--path", fwd(corpus), *text_args(corpus), "--build-dict", "/dev/full"])
    assert res.stdout == ""  # stdout, which cannot be taken back, is written last
    one_line_error(res, "/dev/full: No space left on device")


@pytest.mark.parametrize("args, message", [
    (["--symmetrize", "union"], "--symmetrize needs --reverse-path"),
    (["--json"], "--json prints alignment scores and needs --gold or --sure"),
    (["--plot-ids", "1"], "--plot-ids and --html need --plot DIR"),
    (["--possible", "x"], "--possible needs --sure"),
    (["--data", "somewhere"], "give either --data DIR (with --split) or --source/--target, not both"),
    (["--build-dict", "-"], "--build-dict -: the links are written to standard output; give the dictionary a file name"),
    (["--build-dict", "/dev/stdout"], "--build-dict /dev/stdout: the links are written to standard output"),
    (["-o", "/dev/stdout", "--build-dict", "-"], "--build-dict -: the links are written to standard output"),
])
def test_option_combinations_refused(corpus, args, message):
    one_line_error(run(["--path", fwd(corpus), *text_args(corpus), *args]), message)


def test_gold_option_checks_are_the_librarys_and_come_before_loading(tmp_path, monkeypatch):
    import nmtkit.generate.aligner as library

    missing, g = tmp_path / "missing.pt", write(tmp_path / "g", "0-0\n")
    text = ["--source", g, "--target", g]
    one_line_error(run(["--path", missing, *text, "--gold", g, "--sure", g]),
                   "give either --gold FILE or --sure FILE [--possible FILE], not both")
    with pytest.raises(NmtkitError, match="--possible needs --sure"):
        library.read_gold_links([(["a"], ["b"])], possible=str(g))

    def refuse(*args: object) -> None:
        raise NmtkitError("checked by the library")

    from nmtkit.evaluate import alignment_io

    monkeypatch.setattr(alignment_io, "check_gold_options", refuse)  # one check, used by the command too
    one_line_error(run(["--path", missing, *text, "--gold", g]), "checked by the library")


def test_data_dir_of_the_other_direction(corpus):
    one_line_error(run(["--path", rev(corpus), "--data", corpus / "bin-ende"]),
                   "is en->de but the model translates de->en")


def test_a_model_without_attention_cannot_align(tmp_path):
    ckpt = untrained_checkpoint(tmp_path / "m.pt", TextPipeline("en"), TextPipeline("de"), ["a"], ["b"],
                                arch="rnnencdec_tiny")
    s = write(tmp_path / "s", "a a\n")
    t = write(tmp_path / "t", "b\n")
    one_line_error(run(["--path", ckpt, "--source", s, "--target", t]), "model has no attention")


def test_text_is_required(corpus):
    one_line_error(run(["--path", fwd(corpus), "--source", corpus / "raw" / "test.en"]),
                   "give --source FILE and --target FILE, or --data DIR with --split")


def test_ensembles_need_the_same_text_pipelines(tmp_path):
    a = untrained_checkpoint(tmp_path / "a.pt", TextPipeline("en"), TextPipeline("de"), ["x"], ["y"])
    b = untrained_checkpoint(tmp_path / "b.pt", TextPipeline("en", lowercase=True), TextPipeline("de"), ["x"], ["y"])
    with pytest.raises(NmtkitError, match="source text pipelines"):
        load_ensemble(f"{a}:{b}")
    model, ckpts = load_ensemble(f"{a}:{a}")
    assert len(model) == 2 and len(ckpts) == 2


def test_help_names_the_align_shift_default():
    res = CliRunner().invoke(align, ["--help"])
    assert res.exit_code == 0
    assert "--align-shift" in res.output and "footnote 14" in res.output


def test_soft_symmetrization_through_the_aligner(tmp_path):
    """--symmetrize soft-grow-diag-final-and: the links are soft_symmetrize of the two directions'
    word-level attention; only the matrices asked for (heatmaps) stay in the run."""
    from nmtkit.generate.word_alignment import soft_symmetrize

    words_en, words_de = ["the", "cat", "sees", "a", "dog"], ["die", "katze", "sieht", "einen", "hund"]
    fwd = untrained_checkpoint(tmp_path / "f.pt", TextPipeline("en"), TextPipeline("de"), words_en, words_de)
    rev = untrained_checkpoint(tmp_path / "r.pt", TextPipeline("de"), TextPipeline("en"), words_de, words_en, seed=1)
    src, tgt = ["the cat sees a dog", "a dog"], ["die katze sieht einen hund", "einen hund sieht"]
    soft = Aligner.from_checkpoint(fwd, reverse_path=rev, symmetrize="soft-grow-diag-final-and", device="cpu")
    res_run = soft.align_corpus(src, tgt, keep_attention=[1])
    assert res_run.method == "soft-grow-diag-final-and" and res_run.forward[0].attention is None
    assert res_run.forward[1].attention is not None
    f = Aligner.from_checkpoint(fwd, device="cpu").align_corpus(src, tgt, keep_attention=[0, 1])
    r = Aligner.from_checkpoint(rev, device="cpu").align_corpus(tgt, src, keep_attention=[0, 1])
    want = [sorted(soft_symmetrize(a.attention, b.attention)) for a, b in zip(f.forward, r.forward)]
    assert res_run.links == want and all(res_run.links)
    (tmp_path / "s.txt").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp_path / "t.txt").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    res = run(["--path", fwd, "--reverse-path", rev, "--symmetrize", "soft-grow-diag-final-and",
               "--source", tmp_path / "s.txt", "--target", tmp_path / "t.txt", "-o", tmp_path / "out.align"])
    assert res.exit_code == 0, res.output
    assert read_alignments(tmp_path / "out.align") == [set(links) for links in want]


def test_a_reader_leaving_stdout_keeps_the_finished_output_file(corpus, tmp_path):
    import subprocess
    import sys

    out = tmp_path / "o.align"
    proc = subprocess.Popen([sys.executable, "-m", "nmtkit.cli.align", "--path", str(fwd(corpus)),
                             *map(str, text_args(corpus)), "-o", str(out), "--build-dict", "-", "--threads", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # like `| head -0`: the dictionary on stdout meets a closed pipe
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err
    assert out.read_text(encoding="utf-8").count("\n") == len(Path(text_args(corpus)[1]).read_text().splitlines())
