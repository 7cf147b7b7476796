"""The binarized format: exact round trips, and clear errors on foreign or damaged files."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from nmtkit.data.indexed import IndexedTokens, write_indexed
from nmtkit.errors import InputError

sentences = st.lists(st.lists(st.integers(0, 70000), max_size=20), max_size=30)


@settings(max_examples=60, deadline=None)
@given(sentences)
def test_roundtrip_any_ids(tmp_path_factory, sents):
    vocab = max((max(s) for s in sents if s), default=0) + 1
    prefix = tmp_path_factory.mktemp("idx") / "x"
    assert write_indexed(prefix, sents, vocab) == len(sents)
    data = IndexedTokens(prefix)
    assert len(data) == len(sents)
    for k, s in enumerate(sents):
        assert data[k].tolist() == s
    assert data.sizes.tolist() == [len(s) for s in sents]


def test_uses_uint16_when_vocab_fits(tmp_path):
    write_indexed(tmp_path / "small", [[1, 65535]], 65536 - 1)
    write_indexed(tmp_path / "big", [[1, 70000]], 70001)
    assert IndexedTokens(tmp_path / "small").dtype == np.uint16
    assert IndexedTokens(tmp_path / "big").dtype == np.int32
    assert (tmp_path / "small.bin").stat().st_size == 4


@pytest.fixture
def written(tmp_path):
    write_indexed(tmp_path / "x", [[4, 5, 6], [7]], 10)
    return tmp_path / "x"


def test_wrong_magic(written):
    raw = bytearray(written.with_suffix(".idx").read_bytes())
    raw[:8] = b"FAIRSEQ!"
    written.with_suffix(".idx").write_bytes(bytes(raw))
    with pytest.raises(InputError, match="wrong magic"):
        IndexedTokens(written)


def test_wrong_version(written):
    raw = bytearray(written.with_suffix(".idx").read_bytes())
    raw[8] = 99
    written.with_suffix(".idx").write_bytes(bytes(raw))
    with pytest.raises(InputError, match="version 99"):
        IndexedTokens(written)


def test_truncated_index(written):
    p = written.with_suffix(".idx")
    p.write_bytes(p.read_bytes()[:-3])
    with pytest.raises(InputError, match=r"x\.idx: truncated"):
        IndexedTokens(written)


def test_truncated_data(written):
    p = written.with_suffix(".bin")
    p.write_bytes(p.read_bytes()[:-2])
    with pytest.raises(InputError, match=r"x\.bin: truncated"):
        IndexedTokens(written)


def test_missing_files(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        IndexedTokens(tmp_path / "nothing")


# -- corrupted contents (same file sizes): found when opened, naming file and sentence ------------
def _patch_idx(prefix, count: int, sizes=None, offsets=None) -> None:
    """Rewrite sizes and/or offsets in place; the file keeps its length."""
    p = prefix.with_suffix(".idx")
    raw = bytearray(p.read_bytes())
    header = 24
    if sizes is not None:
        raw[header : header + 4 * count] = np.asarray(sizes, dtype="<i4").tobytes()
    if offsets is not None:
        raw[header + 4 * count :] = np.asarray(offsets, dtype="<i8").tobytes()
    p.write_bytes(bytes(raw))


@pytest.fixture
def three(tmp_path):
    write_indexed(tmp_path / "y", [[4, 5, 6], [7], [8, 9]], 10)  # offsets 0 3 4 6
    return tmp_path / "y"


def test_one_corrupted_offset_is_found(three):
    size = three.with_suffix(".idx").stat().st_size
    _patch_idx(three, 3, offsets=[0, 3, 27000, 6])
    assert three.with_suffix(".idx").stat().st_size == size
    with pytest.raises(InputError, match=r"y\.idx: corrupt index: offsets decrease at sentence 2"):
        IndexedTokens(three)


def test_offsets_that_disagree_with_sizes_are_found(three):
    _patch_idx(three, 3, offsets=[0, 2, 4, 6])
    with pytest.raises(InputError, match=r"y\.idx: corrupt index: sentence 0 \(0-based\) has size 3 but its offsets span 2"):
        IndexedTokens(three)
    _patch_idx(three, 3, sizes=[3, 1, 5], offsets=[0, 3, 4, 6])
    with pytest.raises(InputError, match=r"sentence 2 \(0-based\) has size 5"):
        IndexedTokens(three)


def test_first_offset_must_be_zero(three):
    _patch_idx(three, 3, offsets=[1, 3, 4, 6])
    with pytest.raises(InputError, match="starts at offset 1, not 0"):
        IndexedTokens(three)


def test_last_offset_must_match_the_bin_size(three):
    _patch_idx(three, 3, sizes=[3, 1, 3], offsets=[0, 3, 4, 7])
    with pytest.raises(InputError, match=r"y\.bin: truncated or corrupt data"):
        IndexedTokens(three)


def test_ids_beyond_the_dictionary_are_found(three):
    IndexedTokens(three, vocab_size=10)  # fine as written
    with pytest.raises(InputError, match=r"y\.bin: corrupt data: sentence 2 \(0-based\) holds token id 9, but the dictionary has 9 entries"):
        IndexedTokens(three, vocab_size=9)
    raw = bytearray(three.with_suffix(".bin").read_bytes())
    raw[6:8] = np.asarray([60000], dtype="<u2").tobytes()  # sentence 1's only id
    three.with_suffix(".bin").write_bytes(bytes(raw))
    with pytest.raises(InputError, match="sentence 1 .* token id 60000"):
        IndexedTokens(three, vocab_size=10)


def test_negative_int32_ids_are_found(tmp_path):
    write_indexed(tmp_path / "z", [[4], [70000, 5]], 70001)
    raw = bytearray((tmp_path / "z.bin").read_bytes())
    raw[8:12] = np.asarray([-5], dtype="<i4").tobytes()
    (tmp_path / "z.bin").write_bytes(bytes(raw))
    with pytest.raises(InputError, match="sentence 1 .* token id -5"):
        IndexedTokens(tmp_path / "z", vocab_size=70001)


def test_special_ids_inside_a_sentence_are_corrupt_data(three):
    """<pad>, <s> and </s> never occur inside a binarized sentence (Dictionary.encode writes <unk>
    for them): found at load, not trained on as padding or a sentence end."""
    IndexedTokens(three, vocab_size=10)
    raw = bytearray(three.with_suffix(".bin").read_bytes())
    for special, name in ((0, "<pad>"), (2, "</s>")):
        raw[6:8] = np.asarray([special], dtype="<u2").tobytes()  # sentence 1's only id
        three.with_suffix(".bin").write_bytes(bytes(raw))
        with pytest.raises(InputError, match=rf"sentence 1 \(0-based\) holds the special id {special} \({name}\), which no sentence may hold"):
            IndexedTokens(three, vocab_size=10)


def test_text_that_spells_a_special_symbol_is_unk():
    from nmtkit.data.dictionary import EOS_ID, UNK_ID, Dictionary

    d = Dictionary.from_symbols(["<pad>", "<s>", "</s>", "<unk>", "cat"])
    assert d.encode(["cat", "</s>", "<pad>", "<s>", "<unk>", "dog"]) == [4, UNK_ID, UNK_ID, UNK_ID, UNK_ID, UNK_ID, EOS_ID]
    assert [d.id(t) for t in ("</s>", "cat")] == [EOS_ID, 4]  # a symbol's id: the specials keep theirs
