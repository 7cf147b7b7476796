"""Word alignments from subword attention: merging, </s> handling, shift, token->word maps."""
from __future__ import annotations

import pytest
import torch

from nmtkit.errors import NmtkitError
from nmtkit.evaluate.alignment_io import format_pharaoh
from nmtkit.data.word_index import map_tokens_to_words, unescape_moses
from nmtkit.generate.word_alignment import align_pieces, align_words, merge_attention

# source pieces: "Ober@@ hausen ist schön" -> words 0 0 1 2 ; + </s> column
SRC = ["Ober@@", "hausen", "ist", "schön"]
# target pieces: "Ober@@ hausen is beauti@@ ful" -> words 0 0 1 2 2 ; + </s> row
TGT = ["Ober@@", "hausen", "is", "beauti@@", "ful"]


def attn() -> torch.Tensor:
    return torch.tensor(
        [  # Ober hausen  ist  schön  </s>
            [0.30, 0.20, 0.00, 0.00, 0.50],  # Ober@@
            [0.10, 0.30, 0.40, 0.00, 0.20],  # hausen
            [0.00, 0.10, 0.80, 0.10, 0.00],  # is
            [0.00, 0.00, 0.20, 0.70, 0.10],  # beauti@@
            [0.00, 0.00, 0.60, 0.40, 0.00],  # ful
            [0.05, 0.05, 0.05, 0.05, 0.80],  # </s> step
        ]
    )


def test_merge_sums_source_pieces_and_averages_target_pieces():
    m = merge_attention(attn(), [0, 0, 1, 2], [0, 0, 1, 2, 2])
    assert m.shape == (3, 3)
    # row "Ober@@" renormalised without </s>: [.6, .4, 0, 0] -> words [1.0, 0, 0]
    # row "hausen" renormalised: [.125, .375, .5, 0] -> words [.5, .5, 0]; mean -> [.75, .25, 0]
    assert m[0].tolist() == pytest.approx([0.75, 0.25, 0.0])
    assert m[2].tolist() == pytest.approx([0.0, (2 / 9 + 0.6) / 2, (7 / 9 + 0.4) / 2])
    assert m.sum(dim=1).tolist() == pytest.approx([1.0, 1.0, 1.0])


def test_alignment_with_bpe_drops_eos_column_and_row():
    links = align_pieces(attn(), SRC, TGT)
    # "Ober@@" puts most weight on </s>, but </s> is never a candidate
    assert links == [(0, 0), (1, 1), (2, 2)]
    assert format_pharaoh(links) == "0-0 1-1 2-2"


def test_shift_reads_the_next_row():
    # shift 1: word "Oberhausen" = rows 1,2 (hausen, is); "is" = row 3; "beautiful" = rows 4,5 (ful, </s>)
    links = align_pieces(attn(), SRC, TGT, align_shift=1)
    m = merge_attention(attn(), [0, 0, 1, 2], [0, 0, 1, 2, 2], align_shift=1)
    r1 = torch.tensor([0.125, 0.375, 0.5, 0.0])
    r2 = torch.tensor([0.0, 0.1, 0.8, 0.1])
    row0 = (torch.stack([r1[:2].sum(), r1[2], r1[3]]) + torch.stack([r2[:2].sum(), r2[2], r2[3]])) / 2
    assert m[0].tolist() == pytest.approx(row0.tolist())
    # rows: Oberhausen [.3, .65, .05]; is [0, 2/9, 7/9]; beautiful ([0, .6, .4] + [.5, .25, .25]) / 2
    assert m[2].tolist() == pytest.approx([0.25, 0.425, 0.325])
    assert links == [(1, 0), (2, 1), (1, 2)]
    with pytest.raises(ValueError, match="too small"):
        align_pieces(attn()[:5], SRC, TGT, align_shift=1)  # the </s> row is needed for shift 1
    with pytest.raises(NmtkitError, match="shift"):
        align_pieces(attn(), SRC, TGT, align_shift=2)


def test_ties_go_to_lower_source_word_and_empty_inputs():
    a = torch.tensor([[0.4, 0.4, 0.2], [0.0, 0.0, 1.0]])
    assert align_words(a, [0, 1], [0]) == [(0, 0)]
    assert align_words(a, [], [0]) == []
    assert align_words(a, [0, 1], []) == []
    # a row with all its mass on </s> aligns nothing
    assert align_words(a, [0, 1], [0, 1]) == [(0, 0)]


def test_padding_columns_are_ignored():
    padded = torch.cat([attn(), torch.zeros(6, 3)], dim=1)
    assert align_pieces(padded, SRC, TGT) == align_pieces(attn(), SRC, TGT)


def test_map_tokens_to_words_moses_splits():
    line = "I don't know, \"Tom & Jerry\" did it."
    tokens = ["I", "don", "'t", "know", ",", '"', "Tom", "&", "Jerry", '"', "did", "it", "."]
    assert map_tokens_to_words(line, tokens) == [0, 1, 1, 2, 2, 3, 3, 4, 5, 5, 6, 7, 7]
    escaped = ["I", "don", "&apos;t", "know", ",", "&quot;", "Tom", "&amp;", "Jerry", "&quot;", "did", "it", "."]
    assert map_tokens_to_words(line, escaped) == [0, 1, 1, 2, 2, 3, 3, 4, 5, 5, 6, 7, 7]


def test_map_tokens_to_words_literal_entity_case_and_dashes():
    # the user really wrote "&amp;": Moses escapes it to "&amp;amp;"
    assert map_tokens_to_words("a &amp; b", ["a", "&amp;amp;", "b"]) == [0, 1, 2]
    assert map_tokens_to_words("a &amp; b", ["a", "&amp;", "b"]) == [0, 1, 2]
    assert map_tokens_to_words("Well-known  Fact", ["well", "@-@", "known", "fact"]) == [0, 0, 0, 1]
    assert unescape_moses("@-@") == "-" and unescape_moses("&amp;amp;") == "&amp;"


def test_map_tokens_to_words_falls_back_to_character_diff():
    # a normalising tokenizer changed characters: the diff still finds the words
    line = "„Hallo“ sagte er"
    tokens = ['"', "Hallo", '"', "sagte", "er"]
    assert map_tokens_to_words(line, tokens) == [0, 0, 0, 1, 2]


def test_compose_with_sacremoses():
    from sacremoses import MosesTokenizer

    line = "Isn't it 3.5 km from Oberhausen-Ost, (really)?"
    mt = MosesTokenizer(lang="en")
    for escape in (True, False):
        for dash in (True, False):
            toks = mt.tokenize(line, escape=escape, aggressive_dash_splits=dash)
            mapped = map_tokens_to_words(line, toks)
            words = line.split()
            # every word's tokens are contiguous and together spell the word
            for w_idx, w in enumerate(words):
                spelled = "".join(unescape_moses(t) for t, k in zip(toks, mapped) if k == w_idx)
                assert spelled == w


def test_soft_symmetrization_averages_both_directions_attention():
    from nmtkit.evaluate.symmetrize import grow_diag_final_and
    from nmtkit.generate.word_alignment import soft_symmetrize

    # forward [n_tgt=2, n_src=3] is unsure about target word 1; the reverse model is sure that
    # source word 2 goes with target word 1, so the average links (2, 1)
    fwd = torch.tensor([[0.9, 0.05, 0.05], [0.1, 0.46, 0.44]])
    rev = torch.tensor([[0.9, 0.1], [0.8, 0.2], [0.05, 0.95]])  # [n_src, n_tgt]
    links = soft_symmetrize(fwd, rev)
    assert (2, 1) in links and (0, 0) in links
    m = (fwd + rev.t()) / 2
    s2t = [(int(m[j].argmax()), j) for j in range(2)]
    t2s = [(i, int(m[:, i].argmax())) for i in range(3)]
    assert links == grow_diag_final_and(s2t, t2s)
    # hard symmetrization of the two argmax alignments misses it: forward picks source 1
    assert (1, 1) in {(int(fwd[j].argmax()), j) for j in range(2)}
    assert soft_symmetrize(torch.zeros(0, 3), torch.zeros(3, 0)) == set()
