"""Unknown-word replacement from attention, with lexicon and BPE sources."""
from __future__ import annotations

import pytest
import torch

from nmtkit.errors import InputError, NmtkitError
from nmtkit.data.lexicon import load_lexicon
from nmtkit.generate.unk import replace_unks


def test_copies_the_most_attended_real_source_word():
    src = ["Müller", "kam", "nach", "Oberhausen"]
    hyp = ["<unk>", "came", "to", "<unk>"]
    attn = torch.tensor(
        [  # Müller kam  nach Oberhausen </s> <pad>
            [0.50, 0.10, 0.00, 0.00, 0.40, 0.00],
            [0.10, 0.80, 0.00, 0.10, 0.00, 0.00],
            [0.00, 0.10, 0.80, 0.10, 0.00, 0.00],
            [0.05, 0.05, 0.10, 0.20, 0.60, 0.00],  # </s> has most weight: never chosen
            [0.00, 0.00, 0.00, 0.00, 1.00, 0.00],  # the </s> step row
        ]
    )
    assert replace_unks(hyp, attn, src) == ["Müller", "came", "to", "Oberhausen"]


def test_padding_is_never_chosen():
    attn = torch.tensor([[0.2, 0.1, 0.0, 0.7]])  # columns: a b </s> <pad> (bogus padding weight)
    assert replace_unks(["<unk>"], attn, ["a", "b"]) == ["a"]


def test_lexicon_entry_wins_over_copy():
    attn = torch.tensor([[0.1, 0.9, 0.0], [0.9, 0.1, 0.0]])
    lex = {"Haus": "house"}
    assert replace_unks(["<unk>", "<unk>"], attn, ["Müller", "Haus"], lexicon=lex) == ["house", "Müller"]


def test_bpe_source_copies_the_whole_word_without_markers():
    src = ["Ober@@", "hau@@", "sen", "ist", "schön"]
    attn = torch.tensor([[0.1, 0.6, 0.1, 0.1, 0.1, 0.0]])
    assert replace_unks(["<unk>"], attn, src) == ["Oberhausen"]
    assert replace_unks(["<unk>"], attn, src, lexicon={"Oberhausen": "Upperhouses"}) == ["Upperhouses"]
    assert replace_unks(["<unk>"], attn, src, bpe_marker=None) == ["hau@@"]


def test_no_unk_no_attention_needed_and_errors():
    assert replace_unks(["a", "b"], None, ["x"]) == ["a", "b"]
    with pytest.raises(NmtkitError, match="attention"):
        replace_unks(["<unk>"], None, ["x"])
    with pytest.raises(ValueError):
        replace_unks(["<unk>", "<unk>"], torch.ones(1, 2), ["x"])
    assert replace_unks(["UNK"], torch.tensor([[0.0, 1.0, 0.0]]), ["x", "y"], unk="UNK") == ["y"]


def test_load_lexicon(tmp_path):
    p = tmp_path / "lex.txt"
    p.write_text("Haus house\nHaus home\nKatze\tcat\n", encoding="utf-8")
    assert load_lexicon(p) == {"Haus": "house", "Katze": "cat"}
    p.write_text("Haus home 0.2\nHaus house 0.7\nHaus building 0.1\n", encoding="utf-8")
    assert load_lexicon(p) == {"Haus": "house"}
    p.write_text("Haus house\nKatze\nHund dog\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"lex\.txt:2: expected 'source target'"):
        load_lexicon(p)
    p.write_text("Haus house x\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"lex\.txt:1"):
        load_lexicon(p)
    p.write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="empty"):
        load_lexicon(p)
