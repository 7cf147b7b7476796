from collections import Counter

import pytest

from nmtkit.data.dictionary import EOS_ID, PAD_ID, SPECIALS, UNK_ID, Dictionary
from nmtkit.errors import InputError


def test_specials_have_fixed_ids():
    d = Dictionary.build(Counter({"a": 3}))
    assert [d.id(t) for t in ("<pad>", "<s>", "</s>", "<unk>")] == [0, 1, 2, 3]
    assert d.encode(["a", "zzz"]) == [4, UNK_ID, EOS_ID]
    assert d.decode([4, UNK_ID, EOS_ID, 4, PAD_ID]) == ["a", "<unk>"]


def test_threshold_and_topk():
    c = Counter({"a": 5, "b": 3, "c": 3, "d": 1})
    assert Dictionary.build(c, threshold=3).symbols[4:] == ["a", "b", "c"]
    assert Dictionary.build(c, nwords=2).symbols[4:] == ["a", "b"]  # ties broken alphabetically
    assert Dictionary.build(c, threshold=2, nwords=10).symbols[4:] == ["a", "b", "c"]


def test_save_load_roundtrip(tmp_path):
    d = Dictionary.build(Counter({"x": 2, "y": 1, "1 000": 1}))
    d.save(tmp_path / "dict.txt")
    with pytest.raises(InputError, match=r"dict\.txt:2: token '1 000' is not one word"):
        Dictionary.load(tmp_path / "dict.txt")  # text is split on whitespace: such a token could never occur
    d = Dictionary.build(Counter({"x": 2, "y": 1, "1,000": 1, "10\xa0000": 1}))  # no-break space: inside a word
    d.save(tmp_path / "dict.txt")
    e = Dictionary.load(tmp_path / "dict.txt")
    assert e == d and e.checksum() == d.checksum()


@pytest.mark.parametrize("bad", ["a\nb", "a\u2028b", "a\x85b", "", " a"])
def test_symbols_with_whitespace_or_duplicates_are_refused(bad):
    with pytest.raises(ValueError, match="symbol 5"):
        Dictionary.from_symbols([*SPECIALS, "ok", bad])
    with pytest.raises(ValueError, match="symbol 5 .* duplicate"):
        Dictionary.from_symbols([*SPECIALS, "ok", "ok"])


def test_malformed_dictionary_names_line(tmp_path):
    p = tmp_path / "dict.txt"
    p.write_text("a 1\nb\n")
    with pytest.raises(InputError, match=r"dict\.txt:2"):
        Dictionary.load(p)
