"""Guided alignment (issue 11, section 2): ``nmtkit-preprocess --alignfile`` and
``nmtkit-train --guided-alignment-weight``.

* the alignfile is parsed and mapped to pieces correctly (Moses tokens, BPE), follows the
  training filters and several train prefixes, and every bad input is a one-line error
  naming the file and line;
* the loss has the documented form (row-normalised links, ``</s>`` -> ``</s>``, unlinked rows ignored);
* guided training resumes bit for bit and lowers AER against unguided training with the same
  updates and seed on the sample corpus.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from tests import helpers

from nmtkit.cli.align import command as align
from nmtkit.cli.preprocess import command as preprocess
from nmtkit.cli.train import command as train
from nmtkit.data.alignments import piece_links, write_alignments
from nmtkit.data.dataset import DataDir
from nmtkit.sample import generate_corpus
from nmtkit.errors import InputError
from nmtkit.checkpoint import load_checkpoint
from nmtkit.train.guided import EPSILON, gold_alignment_matrix, guided_alignment_loss

from tests.helpers import write

#: Links of the conftest ``tiny_parallel`` corpus (word for word, except "den Hund" = "the dog").
TINY_ALIGN = "0-0 1-1 2-2 3-3\n0-0 1-1 2-2 3-3\n0-0 1-1 2-2 3-3 4-4 5-5\n0-0 1-1 2-2 3-3 4-4 5-5\n0-0 1-1 2-2 3-3 4-4\n0-0 1-1 2-2 3-3\n"


def prep(raw: Path, dest: Path, *extra: str, train: str = "train"):
    return CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", ",".join(str(raw / t) for t in train.split(",")),
                                           "--destdir", str(dest), *extra])


def one_line_error(res) -> str:  # noqa: ANN001
    lines = [l for l in res.output.splitlines() if l.strip()]
    assert res.exit_code == 1 and len(lines) == 1 and lines[0].startswith("nmtkit-"), res.output
    return lines[0]


# -- the alignfile ----------------------------------------------------------------------------
def test_word_links_map_to_every_piece_through_moses_and_bpe(tmp_path):
    raw = tmp_path / "raw"
    write(raw / "train.en", "a dog.\nthe cat\n")
    write(raw / "train.de", "ein Hund.\ndie Katze\n")
    write(raw / "train.align", "0-0 1-1\n1?1\n")  # a possible link counts as a link
    codes = write(tmp_path / "codes", "#version: 0.2\nq z</w>\n")  # no merge applies: every token -> characters
    res = prep(raw, tmp_path / "bin", "--alignfile", str(raw / "train"), "--tokenizer", "moses",
               "--bpe", "subword-nmt", "--bpe-codes", str(codes))
    assert res.exit_code == 0, res.output
    ds = DataDir(tmp_path / "bin").load_split("train")
    # "a dog." -> a | d@@ o@@ g | . (Moses split "dog." into two tokens of word 1)
    # "ein Hund." -> e@@ i@@ n | H@@ u@@ n@@ d | .
    want = {(0, q) for q in range(3)} | {(p, q) for p in range(1, 5) for q in range(3, 8)}
    assert {tuple(x) for x in ds.alignments[0].tolist()} == want
    # "the cat" -> t@@ h@@ e c@@ a@@ t ; "die Katze" -> d@@ i@@ e K@@ a@@ t@@ z@@ e
    assert {tuple(x) for x in ds.alignments[1].tolist()} == {(p, q) for p in range(3, 6) for q in range(3, 8)}
    meta = json.loads((tmp_path / "bin" / "meta.json").read_text())
    assert meta["splits"]["train"]["alignments"]["word_links"] == 3


def test_filtered_pairs_drop_their_alignment_line_and_prefixes_concatenate(tmp_path):
    raw = tmp_path / "raw"
    write(raw / "a.en", "one two\n\nx\na b c d e f g\n")
    write(raw / "a.de", "eins zwei\nleer\nX\nA B C D E F G\n")
    write(raw / "a.align", "0-1 1-0\n\n0-0\n0-0 6-6\n")
    write(raw / "b.en", "three\n")
    write(raw / "b.de", "drei vier\n")
    write(raw / "b.align", "0-1\n")
    res = prep(raw, tmp_path / "bin", "--alignfile", f"{raw / 'a'},{raw / 'b'}", "--max-len", "5", train="a,b")
    assert res.exit_code == 0, res.output
    ds = DataDir(tmp_path / "bin").load_split("train")
    assert ds.tokens_text("en") == ["one two", "x", "three"]  # the empty and the long pair are gone
    assert [ds.alignments[k].tolist() for k in range(len(ds))] == [[[0, 1], [1, 0]], [[0, 0]], [[0, 1]]]


def test_a_first_prefix_with_every_line_filtered_keeps_the_second_prefixs_links(tmp_path):
    raw = tmp_path / "raw"
    write(raw / "a.en", "a b c d e f g\n")  # too long for --max-len 5: the prefix keeps no pair
    write(raw / "a.de", "A B C D E F G\n")
    write(raw / "a.align", "6-6\n")
    write(raw / "b.en", "one two\nthree\n")
    write(raw / "b.de", "eins zwei\ndrei vier\n")
    write(raw / "b.align", "0-1 1-0\n0-1\n")
    res = prep(raw, tmp_path / "bin", "--alignfile", f"{raw / 'a'},{raw / 'b'}", "--max-len", "5", train="a,b")
    assert res.exit_code == 0, res.output
    ds = DataDir(tmp_path / "bin").load_split("train")
    assert ds.tokens_text("en") == ["one two", "three"]
    assert [ds.alignments[k].tolist() for k in range(len(ds))] == [[[0, 1], [1, 0]], [[0, 1]]]


def test_alignment_blocks_follow_the_files_not_line_one(tmp_path):
    # a prefix that contributed no line (the reader refuses empty files today, but the blocks must
    # not depend on it): its .align is read against no sentence and the next prefix's against its own
    from nmtkit.data.preprocess import _read_alignfiles

    a, b = tmp_path / "a", tmp_path / "b"
    write(tmp_path / "a.align", "")
    write(tmp_path / "b.align", "0-1 1-0\n0-0\n")
    train = (["one two", "three"], ["eins zwei", "drei"], [(f"{b}.en", 1), (f"{b}.en", 2)], [(f"{b}.de", 1), (f"{b}.de", 2)])
    assert _read_alignfiles([str(a), str(b)], [str(a), str(b)], "en", train) == [[(0, 1), (1, 0)], [(0, 0)]]
    # the same prefix twice: two blocks, each read against its own copy
    write(tmp_path / "b.align", "0-0\n")
    train = (["x", "x"], ["X", "X"], [(f"{b}.en", 1), (f"{b}.en", 1)], [(f"{b}.de", 1), (f"{b}.de", 1)])
    assert _read_alignfiles([str(b), str(b)], [str(b), str(b)], "en", train) == [[(0, 0)], [(0, 0)]]


def test_piece_links_helper():
    links = piece_links([(0, 1), (2, 0)], src_word_of=[0, 0, 1, 2], tgt_word_of=[0, 1, 1])
    assert links.tolist() == [[0, 1], [0, 2], [1, 1], [1, 2], [3, 0]]
    assert piece_links([], [0], [0]).shape == (0, 2)


@pytest.mark.parametrize("align, message", [
    ("0-0\n", r"train\.align: has 1 lines but there are 2 source sentences"),
    ("0-0\n0-0\n0-0\n", r"train\.align: has 3 lines but there are 2 source sentences"),
    ("0-0\n3-0\n", r"train\.align:2: source index 3 in '3-0' out of range \(sentence has 3 source words\)"),
    ("0-2\n0-0\n", r"train\.align:1: target index 2 in '0-2' out of range \(sentence has 2 target words\)"),
    ("0-0\n1:1\n", r"train\.align:2: malformed alignment link '1:1'"),
    ("a-b\n0-0\n", r"train\.align:1: malformed alignment link 'a-b'"),
    ("0-0\n0-1-1\n", r"train\.align:2: malformed alignment link '0-1-1'"),
    ("-1-0\n0-0\n", r"train\.align:1: negative index in alignment link '-1-0'"),
    ("0-0\n0--1\n", r"train\.align:2: negative index in alignment link '0--1'"),
], ids=["too-few-lines", "too-many-lines", "source-range", "target-range", "colon", "letters", "three-parts",
        "negative-source", "negative-target"])
def test_bad_alignfile_one_line_error_naming_file_and_line(tmp_path, align, message):
    raw = tmp_path / "raw"
    write(raw / "train.en", "a b c\nd e f\n")
    write(raw / "train.de", "A B\nD E\n")
    write(raw / "train.align", align)
    res = prep(raw, tmp_path / "bin", "--alignfile", str(raw / "train"))
    assert re.search(message, one_line_error(res)), res.output
    assert not (tmp_path / "bin").exists()


def test_bad_alignfile_options(tiny_parallel, tmp_path):
    write(tiny_parallel / "train.align", TINY_ALIGN)
    err = one_line_error(prep(tiny_parallel, tmp_path / "b1", "--alignfile", str(tmp_path / "nope")))
    assert "nope.align: no such alignment file" in err
    err = one_line_error(prep(tiny_parallel, tmp_path / "b2", "--alignfile", f"{tiny_parallel / 'train'},{tiny_parallel / 'train'}"))
    assert "--alignfile has 2 prefix(es) but --trainpref has 1" in err
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--srcdict", str(write(tmp_path / "d", "a 1\n")),
                                          "--tgtdict", str(tmp_path / "d"), "--validpref", str(tiny_parallel / "valid"),
                                          "--destdir", str(tmp_path / "b3"), "--alignfile", str(tiny_parallel / "train")])
    assert "--alignfile needs --trainpref" in one_line_error(res)


def test_error_in_second_prefix_names_that_file_and_its_line(tmp_path):
    raw = tmp_path / "raw"
    for name, links in (("a", "0-0\n"), ("b", "0-0\n0-9\n")):
        write(raw / f"{name}.en", "x\n" * links.count("\n"))
        write(raw / f"{name}.de", "X\n" * links.count("\n"))
        write(raw / f"{name}.align", links)
    err = one_line_error(prep(raw, tmp_path / "bin", "--alignfile", f"{raw / 'a'},{raw / 'b'}", train="a,b"))
    assert re.search(r"b\.align:2: target index 9", err), err


def test_corrupt_stored_alignments_are_refused(tiny_parallel, tmp_path):
    write(tiny_parallel / "train.align", TINY_ALIGN)
    assert prep(tiny_parallel, tmp_path / "bin", "--alignfile", str(tiny_parallel / "train")).exit_code == 0
    write_alignments(tmp_path / "bin" / "train.en-de.align", [np.array([[0, 9]])] + [np.zeros((0, 2), int)] * 5)
    with pytest.raises(InputError, match=r"train\.en-de\.align\.bin: corrupt alignments: sentence 0 \(0-based\) links piece 0-9"):
        DataDir(tmp_path / "bin").load_split("train")


# -- the loss ---------------------------------------------------------------------------------
def test_gold_matrix_row_normalised_with_eos_link_in_batch_order():
    links = [np.array([[0, 0], [1, 0], [2, 1]]), np.zeros((0, 2), dtype=np.int64)]
    gold = gold_alignment_matrix(links, torch.tensor([4, 2]), torch.tensor([3, 2]), (4, 4))
    assert gold.shape == (2, 4, 4)
    # row t is target piece t: piece 0 <- source pieces 0 and 1 (half each), piece 1 <- 2, </s> (t=2) <- </s> (s=3)
    assert gold[0].tolist() == [[0.5, 0.5, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]]
    # no links: only </s> -> </s>; the unlinked piece 0 and the padding rows stay zero
    assert gold[1].tolist() == [[0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]


def test_loss_formulas():
    attn = torch.tensor([[[0.6, 0.3, 0.1], [0.2, 0.2, 0.6], [0.3, 0.3, 0.4]]])
    gold = torch.tensor([[[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]])  # last target position unlinked
    ce = -(0.5 * math.log(0.6 + EPSILON) + 0.5 * math.log(0.3 + EPSILON) + math.log(0.6 + EPSILON))
    assert guided_alignment_loss(attn, gold, "ce").item() == pytest.approx(ce, rel=1e-6)
    mse = (0.1 ** 2 + 0.2 ** 2 + 0.1 ** 2) + (0.2 ** 2 + 0.2 ** 2 + 0.4 ** 2)
    assert guided_alignment_loss(attn, gold, "mse").item() == pytest.approx(mse, rel=1e-6)


# -- training ---------------------------------------------------------------------------------
@pytest.fixture
def aligned_data(tiny_parallel, tmp_path) -> Path:
    write(tiny_parallel / "train.align", TINY_ALIGN)
    dest = tmp_path / "bin-aligned"
    res = prep(tiny_parallel, dest, "--validpref", str(tiny_parallel / "valid"), "--alignfile", str(tiny_parallel / "train"))
    assert res.exit_code == 0, res.output
    return dest


def train_guided(data: Path, save: Path, *extra: str):  # noqa: ANN201
    return helpers.run_train(data, save, "--guided-alignment-weight", "0.5", *extra)


def test_guided_training_resumes_bit_for_bit(aligned_data, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert train_guided(aligned_data, a, "--max-epoch", "3").exit_code == 0
    r1 = train_guided(aligned_data, b, "--max-epoch", "3", "--max-update", "4")
    assert r1.exit_code == 0, r1.output
    r2 = train_guided(aligned_data, b, "--max-epoch", "3")
    assert r2.exit_code == 0 and "resuming from" in r2.output and "update 4" in r2.output, r2.output
    pa, pb = load_checkpoint(a / "checkpoint_last.pt")["model"], load_checkpoint(b / "checkpoint_last.pt")["model"]
    for k in pa:
        assert torch.equal(pa[k], pb[k]), k
    # the option is saved; the guided loss is logged next to the NLL
    assert load_checkpoint(b / "checkpoint_last.pt")["train_options"]["guided_alignment_weight"] == 0.5
    logged = [json.loads(l) for l in (b / "train_log.jsonl").read_text().splitlines()]
    assert all("align_loss" in r for r in logged if r["event"] == "train")


def test_guided_weight_may_change_on_resume_and_is_announced(aligned_data, tmp_path):
    assert train_guided(aligned_data, tmp_path / "c", "--max-update", "2").exit_code == 0
    res = train_guided(aligned_data, tmp_path / "c", "--max-update", "4", "--guided-alignment-weight", "1",
                    "--guided-alignment-loss", "mse")
    assert res.exit_code == 0, res.output
    assert "guided_alignment_weight 0.5 -> 1 (from --guided-alignment-weight)" in res.output
    assert "guided_alignment_loss ce -> mse (from --guided-alignment-loss)" in res.output


def test_guided_training_refused_without_links_or_attention(aligned_data, tiny_parallel, tmp_path):
    plain = tmp_path / "bin-plain"
    assert prep(tiny_parallel, plain).exit_code == 0
    err = one_line_error(train_guided(plain, tmp_path / "x", "--max-update", "1"))
    assert "has no alignments for split 'train' (run nmtkit-preprocess with --alignfile)" in err
    err = one_line_error(train_guided(aligned_data, tmp_path / "y", "--max-update", "1", "--arch", "rnnencdec_tiny"))
    assert "rnnencdec_tiny (rnnencdec) has no attention to guide" in err
    err = one_line_error(train_guided(aligned_data, tmp_path / "z", "--max-update", "1", "--attention", "none",
                                   "--no-input-feeding"))
    assert "has no attention to guide" in err


# Measured (one thread; luong_tiny, 300 sample pairs with the generator's gold links as the
# alignfile, batch 16, lr 0.005, λ = 1): test-set AER after 60 updates, unguided vs guided,
# 0.895 vs 0.515 (corpus and training seed 1, this test), 0.895 vs 0.545 (seed 2), 0.894 vs
# 0.529 (seed 3); after 40 / 100 updates (seed 1) 0.895 vs 0.59 / 0.50.  The unguided
# unidirectional model has not started to align yet; the margin asked for is under half the gap.
GUIDED_UPDATES = 60
AER_MARGIN = 0.15


def sample_corpus_aer(tmp_path: Path, n_train: int, arch: str, updates: int, variants: dict[str, list[str]]) -> dict[str, float]:
    """Test-set AER of ``arch`` trained ``updates`` updates on the sample corpus (seed 1, its gold
    links as the alignfile) once per variant of extra nmtkit-train flags."""
    raw = tmp_path / "raw"
    generate_corpus(raw, seed=1, n_train=n_train, n_valid=10, n_test=100)
    res = prep(raw, tmp_path / "bin", "--alignfile", str(raw / "train"))
    assert res.exit_code == 0, res.output
    aer = {}
    for label, extra in variants.items():
        save = tmp_path / f"ckpt-{label}"
        res = CliRunner().invoke(train, [str(tmp_path / "bin"), "--arch", arch, "--save-dir", str(save),
                                         "--batch-size", "16", "--lr", "0.005", "--max-update", str(updates),
                                         "--max-epoch", "0", "--seed", "1", "--threads", "1", "--device", "cpu",
                                         "--no-progress", "--valid-subset", "none", "--no-epoch-checkpoints", *extra])
        assert res.exit_code == 0, res.output
        res = CliRunner().invoke(align, ["--path", str(save / "checkpoint_last.pt"), "--source", str(raw / "test.en"),
                                         "--target", str(raw / "test.de"), "--gold", str(raw / "test.align"), "--json",
                                         "--device", "cpu"])
        assert res.exit_code == 0, res.output
        aer[label] = json.loads(res.stdout)["aer"]
    return aer


@pytest.mark.slow
def test_guided_training_lowers_aer_on_the_sample_corpus(tmp_path):
    aer = sample_corpus_aer(tmp_path, 300, "luong_tiny", GUIDED_UPDATES,
                            {w: ["--guided-alignment-weight", w] for w in ("0", "1")})
    print(f"AER unguided {aer['0']:.3f}, guided {aer['1']:.3f}")
    assert aer["1"] < aer["0"] - AER_MARGIN, aer


@pytest.mark.slow
def test_guided_training_lowers_aer_of_the_transformers_alignment_layer(tmp_path):
    """Garg et al. (2019): the guided loss on one layer's cross-attention (here the penultimate of
    transformer_test's two, its heads averaged) aligns far better than the same model unguided."""
    variants = {w: ["--guided-alignment-weight", w, "--lr-schedule", "fixed"] for w in ("0", "1")}
    variants["full"] = [*variants["1"], "--full-context-alignment"]  # the layer also sees the later words
    aer = sample_corpus_aer(tmp_path, 300, "transformer_test", GUIDED_UPDATES, variants)
    print(f"AER unguided {aer['0']:.3f}, guided {aer['1']:.3f}, guided with full context {aer['full']:.3f}")
    assert aer["1"] < aer["0"] - AER_MARGIN and aer["full"] < aer["0"] - AER_MARGIN, aer


def test_alignment_head_sees_the_target_word_and_leaves_translation_alone():
    """rnnsearch --alignment-head: forward reports the head's attention (a distribution over the
    real source positions that depends on the word being aligned); the logits and beam search's
    step attention are those of the same model without the head."""
    from nmtkit.data.dictionary import Dictionary
    from nmtkit.models import build_model, resolve_config
    from nmtkit.models.rnnsearch import next_tokens

    d = Dictionary.from_symbols(["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(20)])
    torch.manual_seed(0)
    name, cfg = resolve_config("rnnsearch_tiny", {"alignment_head": True})
    head = build_model(name, cfg, d, d).eval()
    name, cfg0 = resolve_config("rnnsearch_tiny", {})
    plain = build_model(name, cfg0, d, d).eval()
    plain.load_state_dict({k: v for k, v in head.state_dict().items() if not k.startswith("align_head.")})
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
    slen = torch.tensor([4, 3])
    prev = torch.tensor([[1, 10, 11, 12], [1, 13, 0, 0]])
    assert next_tokens(prev).tolist() == [[10, 11, 12, 2], [13, 2, 0, 0]]
    with torch.no_grad():
        logits_h, attn_h = head(src, slen, prev)
        logits_p, attn_p = plain(src, slen, prev)
        torch.testing.assert_close(logits_h, logits_p)
        assert attn_h.shape == attn_p.shape and not torch.allclose(attn_h, attn_p)
        torch.testing.assert_close(attn_h.sum(-1), torch.ones(2, 4))
        assert attn_h[1, :, 3].abs().max() == 0  # padding gets nothing
        other = prev.clone()
        other[0, 2] = 15  # a different word y_2 changes the head's row for y_2 (row 1) only there
        _, attn_o = head(src, slen, other)
        assert not torch.allclose(attn_o[0, 1], attn_h[0, 1]) and torch.allclose(attn_o[0, 0], attn_h[0, 0])
        enc = head.encode(src, slen)
        _, step_attn, _ = head.decode_step(prev[:, 0], head.init_decoder_state(enc), enc)
        _, step_attn_p, _ = plain.decode_step(prev[:, 0], plain.init_decoder_state(plain.encode(src, slen)), plain.encode(src, slen))
        torch.testing.assert_close(step_attn, step_attn_p)


def test_alignment_head_needs_the_guided_loss(aligned_data, tmp_path):
    res = CliRunner().invoke(train, [str(aligned_data), "--arch", "rnnsearch_tiny", "--save-dir", str(tmp_path / "h"),
                                     "--alignment-head", "--max-update", "1", "--no-progress"])
    assert "--alignment-head is trained only by the guided-alignment loss" in one_line_error(res)
    res = CliRunner().invoke(train, [str(aligned_data), "--arch", "luong_tiny", "--save-dir", str(tmp_path / "l"),
                                     "--alignment-head", "--guided-alignment-weight", "1", "--max-update", "1", "--no-progress"])
    assert res.exit_code != 0 and "alignment_head" in one_line_error(res)


# Measured (one thread; rnnsearch_tiny guided by the sample corpus's gold links, batch 16,
# lr 0.005, λ = 1, seed 1): test AER read from the decoder's attention vs from the alignment head,
# 0.487 vs 0.166 (2,000 training pairs, 150 updates) and 0.513 vs 0.257 (this test: 1,000 pairs,
# 100 updates).  The test asks for 0.15, under 60 % of the gap.
@pytest.mark.slow
def test_alignment_head_aligns_better_than_the_decoders_attention(tmp_path):
    guided = ["--guided-alignment-weight", "1"]
    aer = sample_corpus_aer(tmp_path, 1000, "rnnsearch_tiny", 100,
                            {"attention": guided, "head": [*guided, "--alignment-head"]})
    print(f"AER guided attention {aer['attention']:.3f}, alignment head {aer['head']:.3f}")
    assert aer["head"] < aer["attention"] - 0.15, aer
