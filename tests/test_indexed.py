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
