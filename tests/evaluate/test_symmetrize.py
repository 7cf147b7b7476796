"""Symmetrization heuristics on small hand-made alignment matrices with known answers."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmtkit.errors import NmtkitError
from nmtkit.evaluate.symmetrize import (
    METHODS,
    grow_diag_final,
    grow_diag_final_and,
    intersect,
    symmetrize,
    union,
)

# Source rows i = 0..4, target columns j = 0..4.  s2t = S, t2s = T, both = B.
#
#        j: 0  1  2  3  4
#   i=0     B  .  .  .  S     (0,4): S only, target 4 still free  -> gdf final adds it
#   i=1     .  B  .  .  S     (1,4): S only, both words covered by then -> never added
#   i=2     .  .  S  .  .     (2,2): diagonal neighbour of (1,1)   -> grow adds it
#   i=3     T  .  .  .  .     (3,0): source 3 free, target 0 taken -> gdf only
#   i=4     .  .  .  .  T     (4,4): source 4 free (and target 4 in -and) -> both finals
S2T = {(0, 0), (1, 1), (2, 2), (0, 4), (1, 4)}
T2S = {(0, 0), (1, 1), (3, 0), (4, 4)}


def test_intersect_and_union() -> None:
    assert intersect(S2T, T2S) == {(0, 0), (1, 1)}
    assert union(S2T, T2S) == {(0, 0), (1, 1), (2, 2), (0, 4), (1, 4), (3, 0), (4, 4)}


def test_grow_diag_final_known_answer() -> None:
    assert grow_diag_final(S2T, T2S) == {(0, 0), (1, 1), (2, 2), (0, 4), (3, 0), (4, 4)}


def test_grow_diag_final_and_known_answer() -> None:
    assert grow_diag_final_and(S2T, T2S) == {(0, 0), (1, 1), (2, 2), (4, 4)}


def test_grow_follows_a_diagonal_chain() -> None:
    diagonal = {(0, 0), (1, 1), (2, 2), (3, 3)}
    assert grow_diag_final_and(diagonal, {(0, 0)}) == diagonal
    # A link far from the intersection is not grown into, only added by the final step.
    assert grow_diag_final_and({(0, 0), (3, 3)}, {(0, 0)}) == {(0, 0), (3, 3)}


def test_grow_skips_links_between_already_aligned_words() -> None:
    s2t = {(0, 0), (1, 1), (0, 1)}
    t2s = {(0, 0), (1, 1)}
    assert grow_diag_final(s2t, t2s) == {(0, 0), (1, 1)}
    assert union(s2t, t2s) == s2t


def test_horizontal_neighbour_is_grown() -> None:
    # Source word 0 translates as two target words; only one direction sees the second.
    assert grow_diag_final_and({(0, 0), (0, 1), (1, 2)}, {(0, 0), (1, 2)}) == {(0, 0), (0, 1), (1, 2)}


def test_empty_inputs() -> None:
    for fn in METHODS.values():
        assert fn(set(), set()) == set()
    assert grow_diag_final({(1, 2)}, set()) == {(1, 2)}
    assert grow_diag_final_and(set(), {(1, 2)}) == {(1, 2)}


def test_symmetrize_by_name() -> None:
    assert symmetrize(S2T, T2S, "intersect") == intersect(S2T, T2S)
    assert symmetrize(S2T, T2S, "grow-diag-final") == grow_diag_final(S2T, T2S)
    assert symmetrize(S2T, T2S) == grow_diag_final_and(S2T, T2S)
    with pytest.raises(NmtkitError, match="unknown symmetrization 'grow'"):
        symmetrize(S2T, T2S, "grow")


links = st.sets(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=14)


@settings(max_examples=150, deadline=None)
@given(links, links)
def test_heuristics_lie_between_intersection_and_union(a: set, b: set) -> None:
    inter, uni = intersect(a, b), union(a, b)
    gdfa, gdf = grow_diag_final_and(a, b), grow_diag_final(a, b)
    # (gdfa is not always a subset of gdf: their final steps can pick different links.)
    assert inter <= gdfa <= uni and inter <= gdf <= uni
    # grow-diag-final leaves no word unaligned that either direction aligned.
    assert {i for i, _ in gdf} == {i for i, _ in uni}
    assert {j for _, j in gdf} == {j for _, j in uni}
